"""Errors the engine raises for bad input. Each carries one clear line for the user."""


class EngineError(Exception):
    """Base class: a user-facing problem (bad input, bad model), never a bug."""


class BundleError(EngineError):
    """A converted model bundle is missing, truncated, foreign or from another format version."""


class ConvertError(EngineError):
    """A source checkpoint cannot be converted (not Qwen3-TTS 12 Hz, missing or damaged files)."""


class AudioError(EngineError):
    """Reference audio cannot be used (unreadable, silent, too short, unknown format)."""


class TextError(EngineError):
    """Text cannot be synthesised (empty, too long for the frame cap, unknown language)."""


class VoiceError(EngineError):
    """A saved voice file is damaged or belongs to another model."""


class CodesError(EngineError):
    """Codec ids that the decoder cannot take (wrong shape, not integers, out of range)."""


class Cancelled(EngineError):
    """The caller cancelled a long operation."""
