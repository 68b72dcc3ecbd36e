"""Qwen3-TTS Studio desktop app (PySide6). Talks to the engine only through qwen3tts_gui.engine_adapter."""

APP_NAME = "Qwen3-TTS Studio"
APP_ID = "qwen3tts-studio"
__version__ = "0.1.0"
