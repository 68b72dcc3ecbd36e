"""A local speech server that speaks OpenAI's audio API (`POST /v1/audio/speech`), so that other programs (chat
front ends, readers, home automation) can speak with this app's voices. `qwen3tts serve` runs it; the app's
"Let other apps use these voices" switch runs the same server beside its window.

    config.py        ServerConfig and Limits: address, key, the limits every request is held to
    api_errors.py    ApiError: every refusal in OpenAI's JSON error shape, one line each
    speech_body.py   the request body -> a checked SpeechOrder (what to say, how, in which format)
    voices.py        voice names -> the engine's voice (library voices by name, preset speakers); the voice list
    audio_formats.py the encoders: wav and pcm stream as audio comes, flac / mp3 / opus are written whole
    task.py          SpeechTask (one request's work, the unit) and the events posted back to its request
    tasks.py         TaskQueue: the engine thread, the queue, batching
    engine_turns.py  EngineTurns: the app's open model shared with the server, one thread at a time
    engine_call.py   the one place that runs the engine for a task or a group of tasks
    http_app.py      the Starlette app: routes, the key, body limits, streaming and disconnects
    read_deadline.py uvicorn's h11 protocol with a deadline for each request to arrive (a slow client: 408)
    serving.py       running it: uvicorn in the foreground (CLI) or on a thread (the app)

Uses only the engine's public API (engine, engine.store), like the CLI and the app.
"""

from importlib import import_module
from typing import Any

from .config import Limits, ServerConfig

_LAZY = {"BackgroundServer": "serving", "run_server": "serving", "SpeechServer": "http_app"}


def __getattr__(name: str) -> Any:  # the HTTP stack loads on first use: `qwen3tts --help` stays quick
    if name in _LAZY:
        return getattr(import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["BackgroundServer", "Limits", "ServerConfig", "SpeechServer", "run_server"]
