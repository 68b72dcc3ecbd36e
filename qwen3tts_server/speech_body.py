"""The body of `POST /v1/audio/speech` -> a checked SpeechBody, or an ApiError naming the field.

OpenAI's fields: model, input, voice, response_format, speed, instructions, stream_format. This server adds the
app's generation settings as extra fields (seed, language, temperature, top_k, top_p, repetition_penalty, greedy,
max_frames and the code predictor's subtalker_* three), each defaulting to the server's settings; fields it does
not know are ignored, as OpenAI's clients send a few of their own."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Any

from engine import GENERATION_SETTINGS, EngineError, GenerationSettings

from .api_errors import ApiError
from .audio_formats import MEDIA_TYPES
from .config import Limits

FORMATS = tuple(MEDIA_TYPES)  # the response formats, each with its encoder (audio_formats.py); OpenAI's default is mp3
DEFAULT_FORMAT = "mp3"
STREAM_FORMATS = ("audio", "sse")  # the audio itself, or OpenAI's Server-Sent Events (http_app.py)
OPENAI_MODELS = ("tts-1", "tts-1-hd", "gpt-4o-mini-tts")  # front ends send these; they mean the served model

# the extra fields: the generation settings as the engine declares them, each checked by its rule
# (engine/setting_specs.py)
SETTINGS = {spec.name: spec for spec in GENERATION_SETTINGS}


@dataclass(frozen=True)
class SpeechBody:
    model: str
    text: str
    voice: str
    response_format: str
    instructions: str | None
    language: str
    settings: GenerationSettings  # the server's defaults with the request's own settings over them
    stream_format: str = "audio"  # "audio": the body is the audio; "sse": events carrying it (OpenAI's shapes)


def parse_speech_body(data: object, limits: Limits, defaults: GenerationSettings) -> SpeechBody:
    if not isinstance(data, dict):
        raise ApiError(400, "The request body must be a JSON object.")
    text = _string(data, "input", required=True)
    if len(text) > limits.max_input_chars:
        raise ApiError(400, f"The input is {len(text)} characters; this server takes at most "
                            f"{limits.max_input_chars} in one request.", "string_above_max_length", "input")
    if not text.strip():
        raise ApiError(400, "The input is empty: give the text to speak.", "empty_input", "input")
    voice = data.get("voice")
    if isinstance(voice, dict):  # OpenAI's newer form for custom voices: {"id": "..."}
        voice = voice.get("id")
    if voice is None:
        voice = ""
    if not isinstance(voice, str):
        raise ApiError(400, f"voice must be a voice name (a string), not {_kind(voice)}.", param="voice")
    fmt = _string(data, "response_format") or DEFAULT_FORMAT
    if fmt.lower() not in FORMATS:
        raise ApiError(400, f"response_format {fmt!r} is not offered; choose one of {', '.join(FORMATS)}.",
                       "unsupported_format", "response_format")
    stream_format = _string(data, "stream_format") or "audio"
    if stream_format not in STREAM_FORMATS:
        raise ApiError(400, f"stream_format {stream_format!r} is not offered; use \"audio\" (the audio itself) or "
                            "\"sse\" (Server-Sent Events carrying it).", param="stream_format")
    speed = data.get("speed", 1.0)
    if speed is not None and not (_is_number(speed) and math.isclose(float(speed), 1.0)):
        raise ApiError(400, f"speed {speed!r} is not offered: this model speaks at its own pace, and changing the "
                            "speed afterwards would change the voice. Send 1.0 or leave it out.", param="speed")
    instructions = _string(data, "instructions") or None
    language = _string(data, "language") or "auto"
    return SpeechBody(model=_string(data, "model"), text=text, voice=voice.strip(), response_format=fmt.lower(),
                      instructions=instructions, language=language, settings=_settings(data, defaults),
                      stream_format=stream_format)


def _settings(data: dict, defaults: GenerationSettings) -> GenerationSettings:
    given: dict[str, Any] = {}
    for name, spec in SETTINGS.items():
        if name not in data or data[name] is None:
            continue
        value = data[name]
        problem = spec.problem(value, called=name)
        if problem:
            raise ApiError(400, problem, param=name)
        given[name] = value if spec.whole or spec.switch else float(value)
    settings = replace(defaults, **given)
    try:
        settings.check()
    except EngineError as e:
        raise ApiError(400, str(e)) from None
    return settings


def settings_fields() -> set[str]:
    """The GenerationSettings fields a request may set (tests hold SETTINGS to the engine's names)."""
    return {f.name for f in fields(GenerationSettings)} & set(SETTINGS)


def _string(data: dict, name: str, required: bool = False) -> str:
    value = data.get(name)
    if value is None:
        if required:
            raise ApiError(400, f"The request needs {name!r}.", "missing_field", name)
        return ""
    if not isinstance(value, str):
        raise ApiError(400, f"{name} must be a string, not {_kind(value)}.", param=name)
    return value


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _kind(value: object) -> str:
    return {dict: "an object", list: "a list", bool: "true/false", int: "a number", float: "a number"}.get(
        type(value), type(value).__name__)
