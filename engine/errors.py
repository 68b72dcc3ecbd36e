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


class NotUtf8Error(TextError):
    """A text file in an 8-bit code page (Latin-1, Windows-1252...): readable once the user names the encoding."""


class VoiceError(EngineError):
    """A saved voice file is damaged or belongs to another model."""


class CodesError(EngineError):
    """Codec ids that the decoder cannot take (wrong shape, not integers, out of range)."""


class LanguageError(EngineError):
    """A language the model does not know (speech recognition: a code Whisper has no token for)."""


class Cancelled(EngineError):
    """The caller cancelled a long operation."""


_END = (".", "!", "?", "…", ".)", ".”", ".\"", "?)")


def as_sentence(text: str) -> str:
    """A message in the house voice: one line, capital letter, full stop. Every front end shows errors through
    this, so a message reads the same whichever layer raised it. A first word that is a file or option name
    (silent.wav, --top-p) keeps its spelling."""
    text = " ".join(str(text).split())
    if not text:
        return text
    first = text.split(" ", 1)[0]
    if text[0].islower() and first.rstrip(",:;").replace("-", "").isalpha():
        text = text[0].upper() + text[1:]
    if not text.endswith(_END):
        text += "."
    return text
