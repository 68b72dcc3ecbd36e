"""Every request, short or long, becomes one recording here: Synthesizer.speak(request) splits its text once
into chunks (a short text is one chunk), generates each in the same voice under the runaway guard, and joins
them with pauses and fades at the seams. The command line, the app and a batch's lines all drive it.

    speech = synth.speak(SynthesisRequest(text, voice, language, settings, instruct, options))
    for ev in speech:          # validated before the first event; cancel with speech.close()
        ChunkStarted   chunk i of n begins (its text)
        ChunkFrame     a frame of chunk i (wraps the FrameEvent; attempt > 0 on a retry)
        ChunkStream    audio of chunk i while it is generated (settings.stream_audio, a text of one chunk)
        ChunkRetry     chunk i ran away (reason); it is generated again with another seed
        ChunkAudio     chunk i is done: `samples` (its pause + audio, faded at seams) go next in the recording;
                       `result` is the chunk's own SynthesisResult (raw audio, codes, seed)
        ChunkSkipped   chunk i failed every attempt (reason); the recording goes on without it
        LongResult     last: chunk counts, skipped chunks, total samples and frames, timings
A chunk with no letter or digit (a "* * *" scene break) is passed over with no event: only its pause is kept.
ChunkAudio and ChunkSkipped come in text order. With options.batch_size > 1 several chunks are generated side by
side (their ChunkStarted/ChunkFrame events interleave) and each still gets exactly the codes it would get alone.
A text of one chunk gives the same codes and audio as Synthesizer.synthesize with the same seed (no seam, no
fade); streamed, it is not retried (audio already heard cannot be taken back) and has synthesize's frame cap.

Memory is one chunk at a time (a window of 2 x batch_size side by side): the caller writes or plays each
ChunkAudio as it arrives; engine.run_speech is the one loop over the events.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace

from ..codec_format import SAMPLE_RATE
from ..errors import Cancelled, EngineError, TextError
from ..text.length import estimated_frames
from ..text.splitter import TextChunk
from ..types import (
    AudioChunk,
    FrameEvent,
    GenerationSettings,
    SynthesisJob,
    SynthesisResult,
    Timings,
    check_batch_size,
)
from .events import (
    ChunkAudio,
    ChunkFrame,
    ChunkRetry,
    ChunkSkipped,
    ChunkStarted,
    ChunkStream,
    LongEvent,
    LongResult,
    Speech,
)
from .joining import JoinSettings, PausePlanner, joined_piece
from .request import SynthesisRequest, speakable
from .runaway import GuardSettings, RunawayGuard

RETRY_SEED_STEP = 0x9E3779B1  # a retry's seed is far from every other chunk's seed


def speak(synth, request: SynthesisRequest,
          made: Mapping[int, Callable[[], SynthesisResult]] | None = None) -> Speech:
    """Validate everything a chunk-independent check can (before the first event), split once, then generate.
    synth: what engine.SynthesizerContract offers (check_*, synthesize, synthesize_many). `made`: chunks an
    earlier run of the same request and seed finished (a journal.ChunkJournal's): each is read when its turn
    comes and put into the recording as it was (ChunkAudio with attempts 0), never generated."""
    if not isinstance(request, SynthesisRequest):
        raise TextError(f"A request must be a SynthesisRequest, not {type(request).__name__}.")
    options = request.options
    options.join.check()
    options.guard.check()
    if options.batch_size is None:
        options = replace(options, batch_size=synth.suggested_batch_size)
    check_batch_size(options.batch_size)
    language = synth.check_language(request.language)
    synth.check_voice(request.voice)
    settings = request.settings or GenerationSettings()
    synth.check_settings(settings)
    if request.instruct:
        synth.kind.check_instruct(request.instruct)
    request = replace(request, language=language, settings=settings, options=options)
    chunks = request.chunks()
    seed = settings.seed if settings.seed is not None else secrets.randbits(32)
    earlier = {i: load for i, load in (made or {}).items() if 0 <= i < len(chunks) and speakable(chunks[i])}
    to_speak = [i for i, c in enumerate(chunks) if speakable(c) and i not in earlier]
    if len(to_speak) == 1 and not earlier:  # its first attempt starts now: its own error comes before any event
        i = to_speak[0]
        run = _ChunkRun(chunks[i], 0, _seed(seed, i, 0), settings, options.guard, guarded=not settings.stream_audio)
        first = synth.synthesize(chunks[i].text, request.voice, language, run.settings(settings),
                                 instruct=request.instruct)
        return Speech(request, chunks, _one_chunk(synth, request, chunks, i, seed, run, first))
    return Speech(request, chunks, _generate(synth, request, chunks, seed, earlier))


def _one_chunk(synth, request: SynthesisRequest, chunks: list[TextChunk], i: int, seed: int, run: _ChunkRun,
               events: Iterator) -> Iterator[LongEvent]:
    """The one speakable chunk of a text through synth.synthesize: the seed and cap synthesize_many would give
    it (so the same codes), but its first attempt checked when speak() is called, and its audio streamed when
    settings.stream_audio (no seam: the streamed samples are the recording; not guarded, so not retried)."""
    t0 = time.perf_counter()
    n, text, settings, guard = len(chunks), chunks[i].text, request.settings, request.options.guard
    recording = _Recording(chunks, request.options.join)
    yield ChunkStarted(i, n, text)
    why = ""
    for attempt in range(guard.retries + 1):
        if attempt:
            run = _ChunkRun(chunks[i], attempt, _seed(seed, i, attempt), settings, guard)
            yield ChunkRetry(i, n, attempt, why, run.seed)
            try:
                events = synth.synthesize(text, request.voice, request.language, run.settings(settings),
                                          instruct=request.instruct)
            except Cancelled:
                raise
            except EngineError as e:
                yield from recording.done(i, None, str(e).rstrip("."), attempt + 1)
                break
        last = attempt == guard.retries or not run.guarded
        result: SynthesisResult | None = None
        why, retry = "", False
        try:
            for ev in events:
                if isinstance(ev, FrameEvent):
                    yield ChunkFrame(i, n, attempt, ev)
                    stop = run.frame(ev.codes)
                    if stop:
                        why, retry = stop, True
                        break
                elif isinstance(ev, AudioChunk):
                    yield ChunkStream(i, n, ev)
                elif isinstance(ev, SynthesisResult):
                    result, why, retry = run.judge(ev)
        finally:
            close = getattr(events, "close", None)
            if close is not None:
                close()
        if result is not None or not retry or last:
            yield from recording.done(i, result, why, attempt + 1, streamed=not run.guarded)
            break
    yield recording.finish(seed, time.perf_counter() - t0)


def _generate(synth, request: SynthesisRequest, chunks: list[TextChunk], seed: int,
              earlier: dict[int, Callable[[], SynthesisResult]]) -> Iterator[LongEvent]:
    """Chunks through synth.synthesize_many, a window of them at a time: the first attempts of a window in one
    run, then its retries in another. One at a time (batch size 1) the window is one chunk, so a retry follows
    its chunk at once; side by side it is 2 x batch_size chunks, so slots stay filled while memory stays at a few
    chunks. Each chunk finishes when it finishes; the recording still takes them in text order. A chunk starts
    (ChunkStarted) with the first event of its first attempt."""
    t0 = time.perf_counter()
    options, settings = request.options, request.settings
    n = len(chunks)
    size = options.batch_size or 1
    recording = _Recording(chunks, options.join)
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
            jobs = [SynthesisJob(chunks[i].text, request.voice, request.language, max_frames=runs[i].cap,
                                 seed=runs[i].seed, instruct=request.instruct) for i in order]
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


def recording_of_made(request: SynthesisRequest, made: Mapping[int, Callable[[], SynthesisResult]],
                      seed: int) -> Speech:
    """The recording of the chunks an earlier run of `request` made, nothing generated (a stopped chapter kept as
    it is): the chunks it did not make are left out (ChunkSkipped), their pauses kept. Read one chunk at a time."""
    chunks = request.chunks()

    def events() -> Iterator[LongEvent]:
        t0 = time.perf_counter()
        recording = _Recording(chunks, request.options.join)
        for i, chunk in enumerate(chunks):
            if speakable(chunk):
                load = made.get(i)
                yield from recording.done(i, load() if load is not None else None, "it was not made before the stop",
                                          0)
        yield recording.finish(seed, time.perf_counter() - t0)

    return Speech(request, chunks, events())


def _seed(base: int, chunk: int, attempt: int) -> int:
    return (base + chunk + attempt * RETRY_SEED_STEP) % 2**32


class _ChunkRun:
    """One attempt at one chunk: its seed, its frame cap and the runaway guard that judges its frames."""

    def __init__(self, chunk: TextChunk, attempt: int, seed: int, settings: GenerationSettings,
                 guard_settings: GuardSettings, guarded: bool = True):
        self.chunk, self.attempt, self.seed, self.guarded = chunk, attempt, seed, guarded
        self.guard = RunawayGuard(estimated_frames(chunk.text), guard_settings)
        limit = self.guard.frame_limit
        self.cap: int | None = limit if settings.max_frames is None else min(limit, int(settings.max_frames))
        if not guarded:  # streamed: synthesize's own cap (the caller's, else its default)
            self.cap = settings.max_frames

    def settings(self, settings: GenerationSettings) -> GenerationSettings:
        """The settings of this attempt run alone: its seed and cap; a retry of a greedy run samples (argmax
        would only repeat the runaway); audio streams only when not guarded."""
        return replace(settings, seed=self.seed, max_frames=self.cap, greedy=settings.greedy and self.attempt == 0,
                       stream_audio=settings.stream_audio and not self.guarded)

    def frame(self, codes) -> str | None:
        """A reason to stop now, or None (always None when not guarded)."""
        return self.guard.push(int(codes[0])) if self.guarded else None

    def judge(self, result: SynthesisResult | None) -> tuple[SynthesisResult | None, str, bool]:
        """(the result, or None with the reason and whether another seed may help)."""
        if result is None or result.codes.shape[0] == 0:
            return None, "the model produced no audio for it", True
        if result.ended_by == "cap" and self.guarded and self.cap == self.guard.frame_limit:
            return None, self.guard.too_long(), True  # (a cap the caller set is kept: it asked for at most that)
        return result, "", False


class _Recording:
    """Puts finished chunks into the recording in text order (they may finish in any order): a pause before
    each one (a paragraph pause when a paragraph ended since the last chunk in the recording), then its audio,
    faded where it meets another chunk (a seam), never at the recording's own start and end. A chunk waits here
    only until every chunk before it is done."""

    def __init__(self, chunks: list[TextChunk], join: JoinSettings):
        self.chunks, self.join = chunks, join
        self.next = 0  # the first chunk not yet in the recording (or left out)
        self.waiting: dict[int, tuple[SynthesisResult | None, str, int, bool]] = {}
        self.written = 0
        self.pauses = PausePlanner(join)
        self.skipped: list[ChunkSkipped] = []
        self.last = max((i for i, c in enumerate(chunks) if speakable(c)), default=-1)  # the last chunk to speak
        self.timings = Timings()
        self.ended_by = "eos"

    def done(self, i: int, result: SynthesisResult | None, reason: str, attempts: int,
             streamed: bool = False) -> Iterator[LongEvent]:
        self.waiting[i] = (result, reason, attempts, streamed)
        n = len(self.chunks)
        while self.next < n and (self.next in self.waiting or not speakable(self.chunks[self.next])):
            k, chunk = self.next, self.chunks[self.next]
            self.next += 1
            if not speakable(chunk):
                self.pauses.pass_over(chunk.ends_paragraph)
                continue
            result, reason, attempts, streamed = self.waiting.pop(k)
            if result is None:
                skip = ChunkSkipped(k, n, chunk.text, reason, attempts)
                self.skipped.append(skip)
                yield skip
                self.pauses.pass_over(chunk.ends_paragraph)
                continue
            after_audio = self.pauses.anything_before
            pause = self.pauses.place(chunk.ends_paragraph, has_audio=len(result.audio) > 0)
            piece = joined_piece(result.audio, pause, self.join, fade_in=after_audio, fade_out=k < self.last)
            self._count(result)
            yield ChunkAudio(k, n, chunk.text, piece, self.written, result, attempts, streamed)
            self.written += len(piece)
            del piece, result

    def made_before(self, below: int, made: dict[int, Callable[[], SynthesisResult]]) -> Iterator[LongEvent]:
        """Put the chunks an earlier run made, up to `below`, into the recording (read one at a time, and only
        when every chunk before them is done: memory stays at one chunk)."""
        for i in sorted(k for k in made if k < below):
            yield from self.done(i, made.pop(i)(), "", 0)

    def _count(self, result: SynthesisResult) -> None:
        if result.ended_by == "cap":
            self.ended_by = "cap"
        mine, theirs = self.timings, result.timings
        for name in ("prefill", "talker", "code_predictor", "decode"):
            setattr(mine, name, getattr(mine, name) + getattr(theirs, name))
        mine.load = theirs.load  # loading happened once
        mine.frames += int(result.codes.shape[0])
        if mine.first_audio == 0.0:
            mine.first_audio = theirs.first_audio

    def finish(self, seed: int, total: float) -> LongResult:
        seconds = self.written / SAMPLE_RATE
        timings = replace(self.timings, total=total, audio_seconds=seconds,
                          rtf=total / seconds if seconds > 0 else float("inf"))
        return LongResult(chunks=len(self.chunks), skipped=self.skipped, samples=self.written, seed=seed,
                          timings=timings, frames=timings.frames, ended_by=self.ended_by)
