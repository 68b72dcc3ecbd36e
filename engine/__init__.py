"""Qwen3-TTS inference on ncnn + numpy. Imports no Qt and no torch.

Public API (the GUI and CLI use only these names):
"""

from .cpu import configure_openmp

configure_openmp()  # before anything imports ncnn (libgomp reads its environment once, at load)

from .bundle import Bundle  # noqa: E402
from .errors import AudioError, BundleError, Cancelled, ConvertError, EngineError, TextError, VoiceError  # noqa: E402
from .fileio import read_text_file  # noqa: E402
from .joining import JoinSettings  # noqa: E402
from .longform import (  # noqa: E402
    ChunkAudio,
    ChunkFrame,
    ChunkRetry,
    ChunkSkipped,
    ChunkStarted,
    LongResult,
    LongTextOptions,
    split_for_synthesis,
    synthesize_long,
)
from .runaway import GuardSettings  # noqa: E402
from .splitter import DEFAULT_MAX_CHARS, TextChunk, split_text  # noqa: E402
from .synthesizer import Synthesizer  # noqa: E402
from .types import SAMPLE_RATE, AudioChunk, FrameEvent, GenerationSettings, SynthesisEvent, SynthesisResult  # noqa: E402
from .voice import Voice, VoiceSummary  # noqa: E402

__all__ = [
    "DEFAULT_MAX_CHARS",
    "ChunkAudio",
    "ChunkFrame",
    "ChunkRetry",
    "ChunkSkipped",
    "ChunkStarted",
    "GuardSettings",
    "JoinSettings",
    "LongResult",
    "LongTextOptions",
    "TextChunk",
    "read_text_file",
    "split_for_synthesis",
    "split_text",
    "synthesize_long",
    "SAMPLE_RATE",
    "AudioChunk",
    "AudioError",
    "Bundle",
    "BundleError",
    "Cancelled",
    "ConvertError",
    "EngineError",
    "FrameEvent",
    "GenerationSettings",
    "SynthesisEvent",
    "SynthesisResult",
    "Synthesizer",
    "TextError",
    "Voice",
    "VoiceError",
    "VoiceSummary",
]
__version__ = "0.1.0"
