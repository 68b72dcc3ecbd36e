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
from collections.abc import Callable, Generator, Iterator, Mapping
from dataclasses import replace

from ..errors import Cancelled, EngineError, TextError
from ..text.splitter import TextChunk
from ..types import AudioChunk, FrameEvent, GenerationSettings, SynthesisResult, check_batch_size
from .attempts import ChunkRun, ChunkUnit, chunk_seed, side_by_side
from .events import ChunkFrame, ChunkRetry, ChunkStarted, ChunkStream, LongEvent, Speech
from .recording import Recording
from .request import SynthesisRequest, speakable


def speak(synth, request: SynthesisRequest,
          made: Mapping[int, Callable[[], SynthesisResult]] | None = None) -> Speech:
    """Validate everything a chunk-independent check can (before the first event), split once, then generate.
    synth: a Synthesizer or the app's test fake (check_*, synthesize, and the side-by-side primitive
    synthesize_many, which is not in engine.SynthesizerContract). `made`: chunks an earlier run of the same
    request and seed finished (a journal.ChunkJournal's): each is read when its turn comes and put into the
    recording as it was (ChunkAudio with attempts 0), never generated."""
    request, chunks, seed = checked_request(synth, request)
    settings = request.settings
    earlier = {i: load for i, load in (made or {}).items() if 0 <= i < len(chunks) and speakable(chunks[i])}
    to_speak = [i for i, c in enumerate(chunks) if speakable(c) and i not in earlier]
    if len(to_speak) == 1 and not earlier:  # its first attempt starts now: its own error comes before any event
        i = to_speak[0]
        run = ChunkRun(chunks[i], 0, chunk_seed(seed, i, 0), settings, request.options.guard,
                       guarded=not settings.stream_audio)
        first = synth.synthesize(chunks[i].text, request.voice, request.language, run.settings(settings),
                                 instruct=request.instruct)
        return Speech(request, chunks, _one_chunk(synth, request, chunks, i, seed, run, first))
    return Speech(request, chunks, generate_chunks(synth, request, chunks, seed, earlier))


def checked_request(synth, request: SynthesisRequest) -> tuple[SynthesisRequest, list[TextChunk], int]:
    """What a chunk-independent check can find, before any work: the request with its language normalised,
    its settings and batch size filled in; the chunks its text is spoken in; its base seed (drawn when unset)."""
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
    return request, chunks, seed


def _one_chunk(synth, request: SynthesisRequest, chunks: list[TextChunk], i: int, seed: int, run: ChunkRun,
               events: Iterator) -> Iterator[LongEvent]:
    """The one speakable chunk of a text through synth.synthesize: the seed and cap synthesize_many would give
    it (so the same codes), but its first attempt checked when speak() is called, and its audio streamed when
    settings.stream_audio (no seam: the streamed samples are the recording; not guarded, so not retried)."""
    t0 = time.perf_counter()
    n, text, settings, guard = len(chunks), chunks[i].text, request.settings, request.options.guard
    recording = Recording(chunks, request.options.join)
    yield ChunkStarted(i, n, text)
    why = ""
    for attempt in range(guard.retries + 1):
        if attempt:
            run = ChunkRun(chunks[i], attempt, chunk_seed(seed, i, attempt), settings, guard)
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


def generate_chunks(synth, request: SynthesisRequest, chunks: list[TextChunk], seed: int,
                    earlier: dict[int, Callable[[], SynthesisResult]]) -> Generator[LongEvent, None, None]:
    """Chunks through synth.synthesize_many (attempts.side_by_side), a window of them at a time: the first
    attempts of a window in one run, then its retries in another. One at a time (batch size 1) the window is one
    chunk, so a retry follows its chunk at once; side by side it is 2 x batch_size chunks, so slots stay filled
    while memory stays at a few chunks. Each chunk finishes when it finishes; the recording still takes them in
    text order. A chunk starts (ChunkStarted) with the first event of its first attempt."""
    t0 = time.perf_counter()
    size = request.options.batch_size or 1
    recording = Recording(chunks, request.options.join)
    to_speak = [i for i, c in enumerate(chunks) if speakable(c) and i not in earlier]
    window = 2 * size if size > 1 else 1
    for w in range(0, len(to_speak), window):
        yield from recording.made_before(to_speak[w], earlier)
        units = [ChunkUnit(None, request, chunks, i, seed, recording) for i in to_speak[w:w + window]]
        for _, ev in side_by_side(synth, units, size):
            assert not isinstance(ev, EngineError)  # (only a whole request's refusal or a cancel: neither here)
            yield ev
    yield from recording.made_before(len(chunks), earlier)
    yield recording.finish(seed, time.perf_counter() - t0)


def recording_of_made(request: SynthesisRequest, made: Mapping[int, Callable[[], SynthesisResult]],
                      seed: int) -> Speech:
    """The recording of the chunks an earlier run of `request` made, nothing generated (a stopped chapter kept as
    it is): the chunks it did not make are left out (ChunkSkipped), their pauses kept. Read one chunk at a time."""
    chunks = request.chunks()

    def events() -> Iterator[LongEvent]:
        t0 = time.perf_counter()
        recording = Recording(chunks, request.options.join)
        for i, chunk in enumerate(chunks):
            if speakable(chunk):
                load = made.get(i)
                yield from recording.done(i, load() if load is not None else None, "it was not made before the stop",
                                          0)
        yield recording.finish(seed, time.perf_counter() - t0)

    return Speech(request, chunks, events())
