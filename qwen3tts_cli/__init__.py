"""The `qwen3tts` command line: one module per command group (synth, batch, models, tools, bench), the parser and
dispatch in main.py, what they share in common.py.

It uses only the engine's public API (the names `engine` exports, and the `engine.store` package); the engine
never imports it.
"""
