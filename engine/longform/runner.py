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
        LongResult     last: chunk counts, skipped chunks, total samples, timings
A chunk with no letter or digit (a "* * *" scene break) is passed over with no event: only its pause is kept.
ChunkAudio and ChunkSkipped come in text order. With options.batch_size > 1 several chunks are generated side by
side (their ChunkStarted/ChunkFrame events interleave) and each still gets exactly the codes it would get alone.

Memory is one chunk at a time (a window of 2 x batch_size side by side): the caller writes or plays each
ChunkAudio as it arrives.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace

import numpy as np

from ..codec_format import SAMPLE_RATE
from ..errors import Cancelled, TextError
from ..text.length import estimated_frames
from ..text.splitter import DEFAULT_MAX_CHARS, LANGUAGE_CODES, TextChunk, split_text
from ..types import FrameEvent, GenerationSettings, SynthesisJob, SynthesisResult, Timings, check_batch_size
from .joining import JoinSettings, PausePlanner, joined_piece
from .runaway import GuardSettings, RunawayGuard

RETRY_SEED_STEP = 0x9E3779B1  # a retry's seed is far from every other chunk's seed


@dataclass(frozen=True)
class LongTextOptions:
    max_chars: int = DEFAULT_MAX_CHARS
    join: JoinSettings = field(default_factory=JoinSettings)
    guard: GuardSettings = field(default_factory=GuardSettings)
    # chunks generated side by side (Synthesizer.synthesize_many); 1: one after the other, the first audio
    # soonest; None: the model's suggested_batch_size. Either way every chunk gets the same codes.
    batch_size: int | None = 1


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
    attempts: int  # 0: an earlier run made it (synthesize_long's `made`)


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


class ChunkProgress:
    """What progress should show while chunks may run side by side: the first chunk not yet in the recording
    (`chunk`), and `done`, how many are in it or left out. Feed it every event with see()."""

    def __init__(self) -> None:
        self._running: set[int] = set()
        self._next = 0  # the chunk after the last one put into the recording (or left out)
        self.done = 0

    @property
    def chunk(self) -> int:
        return min(self._running) if self._running else self._next

    def see(self, ev: LongEvent) -> bool:
        """Take in an event; True when it concerns the chunk on show (a frame worth displaying, or a move on)."""
        if isinstance(ev, (ChunkStarted, ChunkFrame)):
            self._running.add(ev.chunk)
            return ev.chunk == self.chunk
        if isinstance(ev, (ChunkAudio, ChunkSkipped)):
            self._running.discard(ev.chunk)
            self._next = max(self._next, ev.chunk + 1)
            self.done += 1
            return True
        return False


def split_for_synthesis(text: str, language: str = "auto", max_chars: int = DEFAULT_MAX_CHARS) -> list[TextChunk]:
    """The chunks synthesize_long will speak (a model language the splitter does not know splits as "auto")."""
    rules = language if (language or "auto").strip().lower() in LANGUAGE_CODES else "auto"
    return split_text(text, max_chars=max_chars, language=rules)


def synthesize_long(synth, text: str, voice, language: str = "auto", settings: GenerationSettings | None = None,
                    options: LongTextOptions | None = None, instruct: str | None = None,
                    made: Mapping[int, Callable[[], SynthesisResult]] | None = None) -> Iterator[LongEvent]:
    """Validate everything a chunk-independent check can (before the first event), then generate. `made`: chunks
    an earlier run of the same text, voice, settings and seed finished (a journal.ChunkJournal's): each is read
    when its turn comes and put into the recording as it was (ChunkAudio with attempts 0), never generated."""
    options = options or LongTextOptions()
    options.join.check()
    options.guard.check()
    if options.batch_size is None:
        options = replace(options, batch_size=synth.suggested_batch_size)
    check_batch_size(options.batch_size)
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
    return _generate(synth, chunks, voice, language, settings, options, seed, instruct, made or {})


def _generate(synth, chunks: list[TextChunk], voice, language: str, settings: GenerationSettings,
              options: LongTextOptions, seed: int, instruct: str | None = None,
              made: Mapping[int, Callable[[], SynthesisResult]] | None = None) -> Iterator[LongEvent]:
    """Chunks through synth.synthesize_many, a window of them at a time: the first attempts of a window in one
    run, then its retries in another. One at a time (batch size 1) the window is one chunk, so a retry follows
    its chunk at once; side by side it is 2 x batch_size chunks, so slots stay filled while memory stays at a few
    chunks. Each chunk finishes when it finishes; the recording still takes them in text order. A chunk starts
    (ChunkStarted) with the first event of its first attempt."""
    t0 = time.perf_counter()
    n = len(chunks)
    size = options.batch_size or 1
    recording = _Recording(chunks, options.join)
    earlier = {i: load for i, load in (made or {}).items() if 0 <= i < n and speakable(chunks[i])}
    to_speak = [i for i, c in enumerate(chunks) if speakable(c) and i not in earlier]
    window = 2 * size if size > 1 else 1
    for w in range(0, len(to_speak), window):
        yield from recording.made_before(to_speak[w], earlier)
        todo = {i: "" for i in to_speak[w:w + window]}  # chunk -> why it is being tried again
        for attempt in range(options.guard.retries + 1):
            if not todo:
                break
            runs = {i: _ChunkRun(chunks[i], attempt, _seed(seed, i, attempt), settings, options.guard) for i in todo}
            if attempt:
                for i, why in todo.items():
                    yield ChunkRetry(i, n, attempt, why, runs[i].seed)
            order = list(runs)
            jobs = [SynthesisJob(chunks[i].text, voice, language, max_frames=runs[i].cap, seed=runs[i].seed,
                                 instruct=instruct) for i in order]
            # seeds and caps are per job; a retry of a greedy run samples: argmax would only repeat the runaway
            shared = replace(settings, greedy=settings.greedy and attempt == 0, stream_audio=False, seed=None,
                             max_frames=None)
            todo = {}
            stopped: dict[int, str] = {}  # chunk -> the guard's reason (its job was cancelled for it)
            ended: set[int] = set()
            heard: set[int] = set()  # chunks with an event in this run
            last = attempt == options.guard.retries
            batch = synth.synthesize_many(jobs, shared, batch_size=size)
            try:
                for ev in batch:
                    i = order[ev.job]
                    run = runs[i]
                    if i in ended:
                        continue
                    if i not in heard:
                        heard.add(i)
                        if attempt == 0:
                            yield ChunkStarted(i, n, chunks[i].text)
                    if not isinstance(ev.event, FrameEvent):
                        ended.add(i)
                    if i in stopped and not isinstance(ev.event, FrameEvent):  # its end after the guard's stop
                        if last:
                            yield from recording.done(i, None, stopped[i], attempt + 1)
                        else:
                            todo[i] = stopped[i]
                    elif ev.error is not None:
                        if isinstance(ev.error, Cancelled):
                            raise ev.error
                        else:
                            yield from recording.done(i, None, str(ev.error).rstrip("."), attempt + 1)
                    elif isinstance(ev.event, FrameEvent):
                        if i in stopped:
                            continue
                        yield ChunkFrame(i, n, attempt, ev.event)
                        stop = run.frame(ev.event.codes)
                        if stop:
                            stopped[i] = stop
                            batch.cancel(ev.job)
                    elif isinstance(ev.event, SynthesisResult):
                        result, why, retry = run.judge(ev.event)
                        if result is None and retry and not last:
                            todo[i] = why
                        else:
                            yield from recording.done(i, result, why, attempt + 1)
                        del result
            finally:
                batch.close()
    yield from recording.made_before(n, earlier)
    yield recording.finish(seed, time.perf_counter() - t0)


def recording_of_made(chunks: list[TextChunk], join: JoinSettings, made: Mapping[int, Callable[[], SynthesisResult]],
                      seed: int) -> Iterator[LongEvent]:
    """The recording of the chunks an earlier run made, nothing generated (a stopped chapter kept as it is):
    the chunks it did not make are left out (ChunkSkipped), their pauses kept. Read one chunk at a time."""
    t0 = time.perf_counter()
    recording = _Recording(chunks, join)
    for i, chunk in enumerate(chunks):
        if speakable(chunk):
            load = made.get(i)
            yield from recording.done(i, load() if load is not None else None, "it was not made before the stop", 0)
    yield recording.finish(seed, time.perf_counter() - t0)


def speakable(chunk: TextChunk) -> bool:
    """A chunk with no letter or digit ("* * *", "—") has nothing to say: only its pause is kept."""
    return any(ch.isalnum() for ch in chunk.text)


def _seed(base: int, chunk: int, attempt: int) -> int:
    return (base + chunk + attempt * RETRY_SEED_STEP) % 2**32


class _ChunkRun:
    """One attempt at one chunk: its seed, its frame cap and the runaway guard that judges its frames."""

    def __init__(self, chunk: TextChunk, attempt: int, seed: int, settings: GenerationSettings,
                 guard_settings: GuardSettings):
        self.chunk, self.attempt, self.seed = chunk, attempt, seed
        self.guard = RunawayGuard(estimated_frames(chunk.text), guard_settings)
        limit = self.guard.frame_limit
        self.cap = limit if settings.max_frames is None else min(limit, int(settings.max_frames))

    def frame(self, codes) -> str | None:
        """A reason to stop now, or None."""
        return self.guard.push(int(codes[0]))

    def judge(self, result: SynthesisResult | None) -> tuple[SynthesisResult | None, str, bool]:
        """(the result, or None with the reason and whether another seed may help)."""
        if result is None or result.codes.shape[0] == 0:
            return None, "the model produced no audio for it", True
        if result.ended_by == "cap" and self.cap == self.guard.frame_limit:
            return None, self.guard.too_long(), True  # (a cap the caller set is kept: it asked for at most that)
        return result, "", False


class _Recording:
    """Puts finished chunks into the recording in text order (they may finish in any order): a pause before
    each one (a paragraph pause when a paragraph ended since the last chunk in the recording), then its faded
    audio. A chunk waits here only until every chunk before it is done."""

    def __init__(self, chunks: list[TextChunk], join: JoinSettings):
        self.chunks, self.join = chunks, join
        self.next = 0  # the first chunk not yet in the recording (or left out)
        self.waiting: dict[int, tuple[SynthesisResult | None, str, int]] = {}
        self.written = 0
        self.pauses = PausePlanner(join)
        self.skipped: list[ChunkSkipped] = []

    def done(self, i: int, result: SynthesisResult | None, reason: str, attempts: int) -> Iterator[LongEvent]:
        self.waiting[i] = (result, reason, attempts)
        n = len(self.chunks)
        while self.next < n and (self.next in self.waiting or not speakable(self.chunks[self.next])):
            k, chunk = self.next, self.chunks[self.next]
            self.next += 1
            if not speakable(chunk):
                self.pauses.pass_over(chunk.ends_paragraph)
                continue
            result, reason, attempts = self.waiting.pop(k)
            if result is None:
                skip = ChunkSkipped(k, n, chunk.text, reason, attempts)
                self.skipped.append(skip)
                yield skip
                self.pauses.pass_over(chunk.ends_paragraph)
                continue
            pause = self.pauses.place(chunk.ends_paragraph, has_audio=len(result.audio) > 0)
            piece = joined_piece(result.audio, pause, self.join)
            yield ChunkAudio(k, n, chunk.text, piece, self.written, result, attempts)
            self.written += len(piece)
            del piece, result

    def made_before(self, below: int, made: dict[int, Callable[[], SynthesisResult]]) -> Iterator[LongEvent]:
        """Put the chunks an earlier run made, up to `below`, into the recording (read one at a time, and only
        when every chunk before them is done: memory stays at one chunk)."""
        for i in sorted(k for k in made if k < below):
            yield from self.done(i, made.pop(i)(), "", 0)

    def finish(self, seed: int, total: float) -> LongResult:
        seconds = self.written / SAMPLE_RATE
        return LongResult(chunks=len(self.chunks), skipped=self.skipped, samples=self.written, seed=seed,
                          timings=Timings(total=total, audio_seconds=seconds,
                                          rtf=total / seconds if seconds > 0 else float("inf")))
