"""Several requests in one run: speak_many(synth, requests) gives the events each request would give alone
(Synthesizer.speak), each tagged with its request's number, in one stream.

    speeches = synth.speak_many([SynthesisRequest(...), ...], batch_size=None, longest_first=True)
    for ev in speeches:         # RequestEvent(request, event) or RequestEvent(request, error=...)
        ...                     # speeches.cancel(i) stops request i; speeches.close() stops them all
engine.run_speeches is the one loop over them.

Requests of one chunk run side by side, up to batch_size sharing every model step (synth.synthesize_many, the
frame loop's continuous batching: a finished one leaves, the next waiting one takes its place), longest first
when longest_first (all done sooner); requests whose settings differ (but for seed and frame cap) run in turns.
Each is a one-chunk speak(): the same seed, frame cap and runaway guard (a streamed one is not guarded and keeps
synthesize's cap; its audio comes as ChunkStream while it is made, decoded between the model steps), so its codes
and audio are exactly what speak(request) alone gives with the same seed. Longer requests follow, one after the
other, through the runner that speaks a long text (their chunks side by side per their options.batch_size). A
request that fails its checks gets its error at once and never stops the others.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import closing
from dataclasses import replace

from ..errors import Cancelled, EngineError
from ..text.splitter import TextChunk
from ..types import check_batch_size
from .attempts import ChunkUnit, side_by_side
from .events import ChunkAudio, ChunkSkipped, LongResult, RequestEvent, Speeches
from .recording import Recording
from .request import SynthesisRequest, speakable
from .runner import checked_request, generate_chunks


def speak_many(synth, requests: Sequence[SynthesisRequest], batch_size: int | None = None,
               longest_first: bool = True) -> Speeches:
    """Check every request now (a refused one's error is its first event), then speak them all (see above).
    synth: what speak() drives (check_*, suggested_batch_size and the side-by-side primitive synthesize_many).
    batch_size: requests of one chunk side by side (None: synth.suggested_batch_size)."""
    if batch_size is None:
        batch_size = synth.suggested_batch_size
    check_batch_size(batch_size)
    given = list(requests)
    checked: list[tuple[int, SynthesisRequest, list[TextChunk], int]] = []
    refused: list[tuple[int, EngineError]] = []
    for i, request in enumerate(given):
        try:
            checked.append((i, *checked_request(synth, request)))
        except EngineError as e:
            refused.append((i, e))
    shown = list(given)
    for i, request, _, _ in checked:
        shown[i] = request
    return Speeches(shown, {i: chunks for i, _, chunks, _ in checked},
                    lambda speeches: _events(synth, speeches, checked, refused, batch_size, longest_first))


def _events(synth, speeches: Speeches, checked: list[tuple[int, SynthesisRequest, list[TextChunk], int]],
            refused: list[tuple[int, EngineError]], batch_size: int, longest_first: bool) -> Iterator[RequestEvent]:
    t0 = time.perf_counter()
    for i, error in refused:
        yield RequestEvent(i, error=error)
    groups: list[list[ChunkUnit]] = []  # one-chunk requests that may share a run (equal but for seed and cap)
    longer: list[tuple[int, SynthesisRequest, list[TextChunk], int]] = []
    for i, request, chunks, seed in checked:
        to_speak = [k for k, chunk in enumerate(chunks) if speakable(chunk)]
        if len(to_speak) > 1:
            longer.append((i, request, chunks, seed))
            continue
        unit = ChunkUnit(i, request, chunks, to_speak[0], seed, Recording(chunks, request.options.join),
                         guarded=not request.settings.stream_audio, whole=True)
        group = next((g for g in groups if _shared(g[0].request) == _shared(request)), None)
        if group is None:
            groups.append([unit])
        else:
            group.append(unit)
    for group in groups:
        units = {u.tag: u for u in group}
        with closing(side_by_side(synth, group, batch_size, longest_first, lambda: speeches.cancelled)) as events:
            for tag, ev in events:
                assert isinstance(tag, int)
                if isinstance(ev, EngineError):
                    yield RequestEvent(tag, error=ev)
                    continue
                yield RequestEvent(tag, ev)
                if isinstance(ev, (ChunkAudio, ChunkSkipped)):  # its one chunk: the recording is complete
                    unit = units[tag]
                    yield RequestEvent(tag, unit.recording.finish(unit.seed, time.perf_counter() - t0))
    for i, request, chunks, seed in longer:
        if i in speeches.cancelled:
            yield RequestEvent(i, error=Cancelled("This request was cancelled."))
            continue
        with closing(generate_chunks(synth, request, chunks, seed, {})) as chunk_events:
            for ev in chunk_events:
                yield RequestEvent(i, ev)
                if i in speeches.cancelled and not isinstance(ev, LongResult):
                    yield RequestEvent(i, error=Cancelled("This request was cancelled."))
                    break


def _shared(request: SynthesisRequest):
    """What the requests of one side-by-side run must share: their settings but for seed, frame cap and streaming
    (each job has its own)."""
    return replace(request.settings, seed=None, max_frames=None, stream_audio=False)
