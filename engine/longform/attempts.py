"""Chunks generated side by side under the runaway guard: the attempts of a set of chunks (of one request, or one
chunk each of several requests) through synth.synthesize_many, their retries with other seeds, and their events
tagged with the request they belong to. Synthesizer.speak (a long text's window of chunks) and speak_many (short
requests side by side) both run their chunks here, so a chunk gets the same seed, cap and guard either way."""

from __future__ import annotations

from collections.abc import Callable, Generator, Hashable, Iterable, Iterator
from dataclasses import dataclass, replace

from ..errors import Cancelled, EngineError
from ..text.length import estimated_frames
from ..text.splitter import TextChunk
from ..types import AudioChunk, FrameEvent, GenerationSettings, SynthesisJob, SynthesisResult
from .events import ChunkFrame, ChunkRetry, ChunkStarted, ChunkStream, LongEvent
from .recording import Recording
from .request import SynthesisRequest
from .runaway import GuardSettings, RunawayGuard

RETRY_SEED_STEP = 0x9E3779B1  # a retry's seed is far from every other chunk's seed


def chunk_seed(base: int, chunk: int, attempt: int) -> int:
    return (base + chunk + attempt * RETRY_SEED_STEP) % 2**32


@dataclass(eq=False)
class ChunkUnit:
    """One chunk to generate: whose it is (`tag`, the request its events are tagged with), the checked request,
    its chunks, the request's base seed and the recording the chunk goes into. guarded: under the runaway guard
    (retried); a streamed one-chunk text is not (its audio is heard as it comes) and keeps synthesize's cap.
    whole: the request's only chunk, so its first attempt's refusal is the request's own error, not a gap."""

    tag: Hashable
    request: SynthesisRequest
    chunks: list[TextChunk]
    chunk: int
    seed: int
    recording: Recording
    guarded: bool = True
    whole: bool = False

    def run(self, attempt: int) -> ChunkRun:
        return ChunkRun(self.chunks[self.chunk], attempt, chunk_seed(self.seed, self.chunk, attempt),
                        self.request.settings, self.request.options.guard, self.guarded)

    def job(self, run: ChunkRun) -> SynthesisJob:
        r = self.request
        return SynthesisJob(self.chunks[self.chunk].text, r.voice, r.language, max_frames=run.cap, seed=run.seed,
                            instruct=r.instruct, stream_audio=r.settings.stream_audio and not self.guarded)

    def last(self, attempt: int) -> bool:
        return attempt == self.request.options.guard.retries or not self.guarded


TaggedEvent = tuple[Hashable, LongEvent | EngineError]


def side_by_side(synth, units: list[ChunkUnit], batch_size: int, longest_first: bool = False,
                 cancelled: Callable[[], Iterable[Hashable]] | None = None) -> Generator[TaggedEvent, None, None]:
    """The attempts of `units` (whose requests share their settings but for seed and frame cap): the first
    attempts in one synth.synthesize_many run, up to batch_size side by side, then the retries in another, until
    each chunk is in its recording or left out. Yields (tag, event): a unit starts (ChunkStarted) with the first
    event of its first attempt; a chunk's ChunkAudio or ChunkSkipped come from its recording (in text order);
    an EngineError ends a tag: Cancelled once `cancelled()` (the tags cancelled so far, asked between events)
    names it (a tag with nothing left to run is not cancelled), or the refusal of a whole request's first
    attempt. A job cancelled by nobody here (the run was closed) raises Cancelled."""
    gone: set[Hashable] = set()  # tags cancelled or refused: none of their units runs again
    todo = {unit: "" for unit in units}  # unit -> why it is being tried again
    for attempt in range(max((u.request.options.guard.retries for u in units), default=0) + 1):
        for tag in _newly(cancelled, gone, {u.tag for u in todo}):  # cancelled while waiting for a retry
            yield tag, Cancelled("This request was cancelled.")
        todo = {u: why for u, why in todo.items() if u.tag not in gone}
        if not todo:
            break
        runs = {u: u.run(attempt) for u in todo}
        if attempt:
            for u, why in todo.items():
                yield u.tag, ChunkRetry(u.chunk, len(u.chunks), attempt, why, runs[u].seed)
        order = list(runs)
        settings = order[0].request.settings
        # seeds and caps are per job; a retry of a greedy run samples: argmax would only repeat the runaway
        shared = replace(settings, greedy=settings.greedy and attempt == 0, stream_audio=False, seed=None,
                         max_frames=None)
        batch = synth.synthesize_many([u.job(runs[u]) for u in order], shared, batch_size=batch_size,
                                      longest_first=longest_first)
        todo = {}
        stopped: dict[ChunkUnit, str] = {}  # unit -> the guard's reason (its job was cancelled for it)
        dropping: set[Hashable] = set()  # tags whose running jobs were cancelled at the caller's word
        ended: set[ChunkUnit] = set()
        heard: set[ChunkUnit] = set()  # units with an event in this run
        streamed: set[ChunkUnit] = set()  # units whose audio came as it was decoded
        try:
            for ev in batch:
                running = {u.tag for u in order if u not in ended}
                for tag in _newly(cancelled, gone, running | {u.tag for u in todo}):
                    if tag in running:
                        dropping.add(tag)
                        for j, u in enumerate(order):
                            if u.tag == tag and u not in ended:
                                batch.cancel(j)
                    else:
                        yield tag, Cancelled("This request was cancelled.")
                u = order[ev.job]
                run = runs[u]
                if u in ended:
                    continue
                finished = ev.error is not None or isinstance(ev.event, SynthesisResult)
                if finished:
                    ended.add(u)
                if u.tag in gone:
                    if u.tag in dropping and not any(o.tag == u.tag and o not in ended for o in order):
                        dropping.discard(u.tag)
                        yield u.tag, Cancelled("This request was cancelled.")
                    continue
                refused = attempt == 0 and u.whole and ev.error is not None
                if u not in heard and not refused:
                    heard.add(u)
                    if attempt == 0:
                        yield u.tag, ChunkStarted(u.chunk, len(u.chunks), u.chunks[u.chunk].text)
                if u in stopped and finished:  # its end after the guard's stop
                    if u.last(attempt):
                        yield from _tagged(u, u.recording.done(u.chunk, None, stopped[u], attempt + 1))
                    else:
                        todo[u] = stopped[u]
                elif ev.error is not None:
                    if isinstance(ev.error, Cancelled):
                        raise ev.error
                    if refused:  # as speak() alone refuses it
                        gone.add(u.tag)
                        yield u.tag, ev.error
                    else:
                        yield from _tagged(u, u.recording.done(u.chunk, None, str(ev.error).rstrip("."),
                                                               attempt + 1))
                elif isinstance(ev.event, FrameEvent):
                    if u in stopped:
                        continue
                    yield u.tag, ChunkFrame(u.chunk, len(u.chunks), attempt, ev.event)
                    stop = run.frame(ev.event.codes)
                    if stop:
                        stopped[u] = stop
                        batch.cancel(ev.job)
                elif isinstance(ev.event, AudioChunk):  # a streamed job's audio as it is decoded
                    if u.guarded:  # (a guarded chunk is never streamed: its audio may yet be retried)
                        continue
                    streamed.add(u)
                    yield u.tag, ChunkStream(u.chunk, len(u.chunks), ev.event)
                elif isinstance(ev.event, SynthesisResult):
                    result, why, retry = run.judge(ev.event)
                    if result is None and retry and not u.last(attempt):
                        todo[u] = why
                    else:
                        yield from _tagged(u, u.recording.done(u.chunk, result, why, attempt + 1,
                                                               streamed=u in streamed))
                    del result
        finally:
            batch.close()


def _newly(cancelled: Callable[[], Iterable[Hashable]] | None, gone: set[Hashable],
           live: set[Hashable]) -> list[Hashable]:
    """The live tags `cancelled()` names that were not gone yet, marked gone now (a tag not live has nothing left
    to run here)."""
    if cancelled is None:
        return []
    tags = [t for t in dict.fromkeys(cancelled()) if t in live and t not in gone]
    gone.update(tags)
    return tags


def _tagged(unit: ChunkUnit, events: Iterable[LongEvent]) -> Iterator[TaggedEvent]:
    for ev in events:
        yield unit.tag, ev


class ChunkRun:
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
