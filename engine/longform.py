"""A long text -> one recording: split into chunks, each generated in the same voice under the runaway guard,
joined with pauses and fades. The CLI and the GUI both drive it through synthesize_long().

    events = synthesize_long(synth, text, voice, language="auto", settings=None, options=None)
    for ev in events:          # validated before the first event; cancel with events.close()
        ChunkStarted   chunk i of n begins (its text)
        ChunkFrame     a frame of chunk i (wraps the FrameEvent; attempt > 0 on a retry)
        ChunkRetry     chunk i ran away (reason); it is generated again with another seed
        ChunkAudio     chunk i is done: `samples` (its pause + faded audio) go next in the recording;
                       `result` is the chunk's own SynthesisResult (raw audio, codes, seed)
        ChunkSkipped   chunk i failed every attempt (reason); the recording goes on without it
    (a chunk with no letter or digit, such as a "* * *" scene break, is passed over with no event: only its
    pause is kept)
        LongResult     last: chunk counts, skipped chunks, total samples, timings

Memory is one chunk at a time: the caller writes or plays each ChunkAudio as it arrives.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

import numpy as np

from .errors import Cancelled, EngineError, TextError
from .joining import JoinSettings, joined_piece, pause_samples
from .runaway import FRAME_RATE, GuardSettings, RunawayGuard
from .splitter import DEFAULT_MAX_CHARS, LANGUAGE_CODES, TextChunk, split_text
from .synthesizer import estimate_seconds
from .types import SAMPLE_RATE, FrameEvent, GenerationSettings, SynthesisResult, Timings

RETRY_SEED_STEP = 0x9E3779B1  # a retry's seed is far from every other chunk's seed


@dataclass(frozen=True)
class LongTextOptions:
    max_chars: int = DEFAULT_MAX_CHARS
    join: JoinSettings = field(default_factory=JoinSettings)
    guard: GuardSettings = field(default_factory=GuardSettings)


@dataclass
class ChunkStarted:
    chunk: int
    chunks: int
    text: str


@dataclass
class ChunkFrame:
    chunk: int
    chunks: int
    attempt: int
    frame: FrameEvent


@dataclass
class ChunkRetry:
    chunk: int
    chunks: int
    attempt: int  # the attempt about to start (1 = first retry)
    reason: str
    seed: int


@dataclass
class ChunkAudio:
    chunk: int
    chunks: int
    text: str
    samples: np.ndarray  # what this chunk adds to the recording: pause, then its faded audio
    start_sample: int  # where `samples` start in the recording
    result: SynthesisResult  # the chunk alone: raw audio, codes, seed, timings
    attempts: int


@dataclass
class ChunkSkipped:
    chunk: int
    chunks: int
    text: str
    reason: str
    attempts: int

    @property
    def message(self) -> str:
        return f"Chunk {self.chunk + 1} of {self.chunks} was left out: {self.reason}."


@dataclass
class LongResult:
    chunks: int
    skipped: list[ChunkSkipped]
    samples: int
    seed: int  # the base seed: chunk i's first attempt uses seed + i
    timings: Timings  # total, audio_seconds and rtf of the whole text
    sample_rate: int = SAMPLE_RATE

    @property
    def seconds(self) -> float:
        return self.samples / self.sample_rate


LongEvent = ChunkStarted | ChunkFrame | ChunkRetry | ChunkAudio | ChunkSkipped | LongResult


def split_for_synthesis(text: str, language: str = "auto", max_chars: int = DEFAULT_MAX_CHARS) -> list[TextChunk]:
    """The chunks synthesize_long will speak (a model language the splitter does not know splits as "auto")."""
    rules = language if (language or "auto").strip().lower() in LANGUAGE_CODES else "auto"
    return split_text(text, max_chars=max_chars, language=rules)


def synthesize_long(synth, text: str, voice, language: str = "auto", settings: GenerationSettings | None = None,
                    options: LongTextOptions | None = None, instruct: str | None = None) -> Iterator[LongEvent]:
    """Validate everything a chunk-independent check can (before the first event), then generate."""
    options = options or LongTextOptions()
    options.join.check()
    options.guard.check()
    language = synth.check_language(language)
    synth.check_voice(voice)
    settings = settings or GenerationSettings()
    synth.check_settings(settings)
    if instruct:
        synth.check_instruct(instruct)
    chunks = split_for_synthesis(text, language, options.max_chars)
    if not chunks:
        raise TextError("The text is empty; type something to speak.")
    seed = settings.seed if settings.seed is not None else secrets.randbits(32)
    return _generate(synth, chunks, voice, language, settings, options, seed, instruct)


def _generate(synth, chunks: list[TextChunk], voice, language: str, settings: GenerationSettings,
              options: LongTextOptions, seed: int, instruct: str | None = None) -> Iterator[LongEvent]:
    t0 = time.perf_counter()
    n = len(chunks)
    written = 0
    skipped: list[ChunkSkipped] = []
    after_paragraph = False  # did a paragraph end since the last chunk that made it into the recording?
    for i, chunk in enumerate(chunks):
        if not any(ch.isalnum() for ch in chunk.text):  # "* * *", "—": nothing to say, only its pause
            after_paragraph = after_paragraph or chunk.ends_paragraph
            continue
        yield ChunkStarted(i, n, chunk.text)
        result, reason, attempts = None, "", 0
        for attempt in range(options.guard.retries + 1):
            attempts = attempt + 1
            attempt_seed = (seed + i + attempt * RETRY_SEED_STEP) % 2**32
            if attempt:
                yield ChunkRetry(i, n, attempt, reason, attempt_seed)
            result, reason, retry = yield from _attempt(synth, chunk, voice, language, settings, options.guard,
                                                        i, n, attempt, attempt_seed, instruct)
            if result is not None or not retry:
                break
        if result is None:
            skip = ChunkSkipped(i, n, chunk.text, reason, attempts)
            skipped.append(skip)
            yield skip
            after_paragraph = after_paragraph or chunk.ends_paragraph
            continue
        pause = pause_samples(after_paragraph, options.join) if written else 0
        piece = joined_piece(result.audio, pause, options.join)
        yield ChunkAudio(i, n, chunk.text, piece, written, result, attempts)
        written += len(piece)
        del piece, result  # not held while the next chunk is generated: memory stays at one chunk
        after_paragraph = chunk.ends_paragraph
    total = time.perf_counter() - t0
    seconds = written / SAMPLE_RATE
    yield LongResult(chunks=n, skipped=skipped, samples=written, seed=seed,
                     timings=Timings(total=total, audio_seconds=seconds,
                                     rtf=total / seconds if seconds > 0 else float("inf")))


def _attempt(synth, chunk: TextChunk, voice, language: str, settings: GenerationSettings, guard_settings,
             i: int, n: int, attempt: int, seed: int, instruct: str | None = None):
    """One generation of one chunk. Returns (result or None, reason, worth retrying)."""
    guard = RunawayGuard(int(round(estimate_seconds(chunk.text) * FRAME_RATE)), guard_settings)
    cap = guard.frame_limit if settings.max_frames is None else min(guard.frame_limit, int(settings.max_frames))
    # a retry of a greedy run samples: argmax would only repeat the same runaway
    chunk_settings = replace(settings, seed=seed, greedy=settings.greedy and attempt == 0, max_frames=cap,
                             stream_audio=False)
    try:
        extra = {"instruct": instruct} if instruct else {}  # Base-only callers (and fakes) never see it
        events = synth.synthesize(chunk.text, voice, language, chunk_settings, **extra)
    except Cancelled:
        raise
    except EngineError as e:
        return None, str(e).rstrip("."), False
    result = None
    try:
        for ev in events:
            if isinstance(ev, FrameEvent):
                yield ChunkFrame(i, n, attempt, ev)
                why = guard.push(int(ev.codes[0]))
                if why:
                    return None, why, True
            elif isinstance(ev, SynthesisResult):
                result = ev
    except Cancelled:
        raise
    except EngineError as e:
        return None, str(e).rstrip("."), False
    finally:
        events.close()
    if result is None or result.codes.shape[0] == 0:
        return None, "the model produced no audio for it", True
    if result.ended_by == "cap" and cap == guard.frame_limit:
        return None, guard.too_long(), True  # (a cap the caller set is kept: it asked for at most that)
    return result, "", False
