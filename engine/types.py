"""Plain data the engine hands to its callers (CLI, GUI). No behaviour beyond validation."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar

import numpy as np

from .codec_format import SAMPLE_RATE
from .errors import EngineError, TextError
from .setting_specs import GENERATION_SETTINGS

if TYPE_CHECKING:
    from .voice import VoiceChoice

MAX_BATCH_SIZE = 8  # sequences side by side, row counts measured bit-identical to alone (tests/test_batching.py)


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
    # whole text in the prefill instead of one token per frame; None: the model's default (as the official
    # wrappers: the Base clone streams the text, CustomVoice and VoiceDesign do not)
    non_streaming_text: bool | None = None
    stream_audio: bool = False  # also yield AudioChunk events decoded while generating
    ignore_eos: bool = False  # never stop at EOS: exactly max_frames frames (benchmarks need a fixed count)
    codes_only: bool = False  # skip decoding: the result has codes and no audio (cannot stream audio)

    def check(self) -> None:
        """Raise TextError naming the first setting out of range (one line, the value included)."""
        for spec in GENERATION_SETTINGS:  # declared once, with the rule each is checked by (engine/setting_specs.py)
            value = getattr(self, spec.name)
            problem = None if value is None else spec.problem(value)
            if problem:
                raise TextError(problem)
        if self.codes_only and self.stream_audio:
            raise TextError("Streaming audio needs decoding; codes_only and stream_audio cannot both be set.")

    @classmethod
    def from_table(cls, value: object) -> GenerationSettings:
        """Settings read back from a JSON table (a take's file, a chunk journal); see settings_from_table."""
        return settings_from_table(cls, value)


class _Settings(Protocol):
    __dataclass_fields__: ClassVar[dict[str, Any]]

    def check(self) -> None: ...


S = TypeVar("S", bound=_Settings)


def settings_from_table(cls: type[S], value: object, what: str = "setting") -> S:
    """A dataclass of settings (bool, int and float fields, each maybe None, and a check()) read back from a JSON
    table: each value of its field's type and within its rule, a missing one its default. TextError names the
    first that is not, in one line ("its {what} NAME is ..."). GenerationSettings and a chunk journal's
    JoinSettings are read by it."""
    if not isinstance(value, dict):
        raise TextError(f"its {what}s are not a table of values")
    given: dict[str, Any] = {}
    for f in fields(cls):
        if f.name not in value:
            continue
        v, kind = value[f.name], str(f.type)  # "int | None" (annotations are text here)
        if v is None and "None" in kind:
            given[f.name] = None
            continue
        base = kind.split(" | ")[0]
        ok = (isinstance(v, bool) if base == "bool" else _whole_in_file(v) if base == "int"
              else _number_in_file(v) if base == "float" else False)
        if not ok:
            raise TextError(f"its {what} {f.name} is {str(v)[:20]!r}, not a {base}")
        given[f.name] = v
    settings = cls(**given)
    try:
        settings.check()
    except TextError as e:
        raise TextError(f"its {what}s are out of range ({e})") from None
    return settings


_MAX_WHOLE = 2**63 - 1  # what a settings file, a Qt item and numpy's int64 hold


def _whole_in_file(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and abs(v) <= _MAX_WHOLE


def _number_in_file(v: object) -> bool:
    return (_whole_in_file(v) or isinstance(v, float) and math.isfinite(v))


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


@dataclass(frozen=True)
class SynthesisJob:
    """One utterance of a batched run (Synthesizer.synthesize_many). voice and instruct are as for
    Synthesizer.synthesize (a Voice, a CustomVoice speaker name, or None for VoiceDesign); max_frames / seed /
    stream_audio, when given, replace the run's settings for this job only."""

    text: str
    voice: VoiceChoice
    language: str = "auto"
    max_frames: int | None = None
    seed: int | None = None
    instruct: str | None = None
    stream_audio: bool | None = None


@dataclass(frozen=True)
class JobEvent:
    """An event of job number `job` (its index in the list given to synthesize_many): `event` is a FrameEvent, an
    AudioChunk (settings.stream_audio: the job's audio as its frames are decoded) or the job's final
    SynthesisResult; `error` is set instead when the job failed or was cancelled (then it has no other events
    after this one)."""

    job: int
    event: FrameEvent | AudioChunk | SynthesisResult | None = None
    error: EngineError | None = None


def check_batch_size(batch_size: object) -> int:
    """The batch size as an int, or TextError: a whole number from 1 to MAX_BATCH_SIZE (the one check, with one
    message, that synthesize_many, long texts, the command line and the app's test fake share)."""
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or not 1 <= batch_size <= MAX_BATCH_SIZE:
        raise TextError(f"Batch size must be a whole number from 1 to {MAX_BATCH_SIZE}, not {batch_size!r}.")
    return batch_size


def check_batch_request(settings: GenerationSettings, batch_size: object) -> int:
    """What synthesize_many asks beyond one synthesis's checks (the engine and the app's test fake share it): a
    valid batch size, returned as an int. Any settings of one synthesis will do (stream_audio too: each job's
    audio then streams as its frames are decoded)."""
    return check_batch_size(batch_size)
