"""Qwen3-TTS inference on ncnn + numpy. Imports no Qt and no torch.

Public API (the GUI and CLI use only these names):
"""

from .bundle import Bundle
from .errors import AudioError, BundleError, Cancelled, ConvertError, EngineError, TextError, VoiceError
from .fileio import read_text_file
from .joining import JoinSettings
from .longform import (
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
from .runaway import GuardSettings
from .splitter import DEFAULT_MAX_CHARS, TextChunk, split_text
from .synthesizer import Synthesizer
from .types import SAMPLE_RATE, AudioChunk, FrameEvent, GenerationSettings, SynthesisEvent, SynthesisResult
from .voice import Voice

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
]
__version__ = "0.1.0"
