"""Plain data the engine hands to its callers (CLI, GUI). No behaviour beyond validation."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

SAMPLE_RATE = 24000
SAMPLES_PER_FRAME = 1920  # 12.5 frames per second
NUM_CODE_GROUPS = 16


@dataclass
class GenerationSettings:
    """Sampling settings for one synthesis. None means: the bundle's generation_config.json default.

    greedy=True means argmax for the talker and the code predictor (the repetition penalty still applies,
    as in the official greedy run). seed=None draws a fresh random seed (recorded in the result).
    """

    greedy: bool = False
    seed: int | None = None
    temperature: float | None = None
    top_k: int | None = None
    top_p: float | None = None
    repetition_penalty: float | None = None
    subtalker_temperature: float | None = None
    subtalker_top_k: int | None = None
    subtalker_top_p: float | None = None
    max_frames: int | None = None  # at most this many generated frames (official max_new_tokens = N + 1)
    non_streaming_text: bool = False  # whole text in the prefill instead of one token per frame
    stream_audio: bool = False  # also yield AudioChunk events decoded while generating
    ignore_eos: bool = False  # never stop at EOS: exactly max_frames frames (benchmarks need a fixed count)
    codes_only: bool = False  # skip decoding: the result has codes and no audio (cannot stream audio)


@dataclass
class FrameEvent:
    """One generated 80 ms frame: its index, its 16 codec ids and timing."""

    index: int
    codes: np.ndarray  # (16,) int64
    elapsed: float  # seconds since synthesis started
    frame_seconds: float  # compute time of this frame
    max_frames: int  # the frame cap in force (an upper bound for progress display)
    estimated_frames: int  # a guess of the final length from the text, for progress display


@dataclass
class AudioChunk:
    """New output samples (24 kHz float32 in [-1, 1]) produced while generating."""

    samples: np.ndarray
    start_sample: int


@dataclass
class Timings:
    """Where the time of one synthesis went, in seconds (frames is a count, rtf a ratio)."""

    load: float = 0.0  # loading the model (once per Synthesizer, repeated here for reports)
    prefill: float = 0.0  # the talker over the prompt
    talker: float = 0.0  # talker steps (frame feedback included)
    code_predictor: float = 0.0  # codes 1..15 of every frame
    decode: float = 0.0  # codec decoder (streaming or whole)
    total: float = 0.0  # from the first step to the result
    first_audio: float = 0.0  # until the first audio was ready (total when nothing was decoded)
    frames: int = 0
    audio_seconds: float = 0.0
    rtf: float = float("inf")  # total / audio_seconds (inf without audio)


@dataclass
class SynthesisResult:
    """The final event of a synthesis."""

    audio: np.ndarray  # float32 mono at SAMPLE_RATE
    codes: np.ndarray  # (frames, 16) int64
    ended_by: str  # "eos" | "cap"
    seed: int | None
    timings: Timings = field(default_factory=Timings)
    sample_rate: int = SAMPLE_RATE

    @property
    def seconds(self) -> float:
        return len(self.audio) / self.sample_rate


SynthesisEvent = FrameEvent | AudioChunk | SynthesisResult
