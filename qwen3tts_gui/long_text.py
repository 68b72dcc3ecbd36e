"""Long texts in the app: a chapter in the Studio text box or a batch item becomes one take, generated chunk by
chunk through the engine's synthesize_long and consumed by its run_long_synthesis (the same code path as
`qwen3tts synth --text-file`). Qt-free: workers.py runs it on a thread (LongSynthesisWorker)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from .data.settings import Settings
from .engine_adapter import (
    AudioChunk,
    ChunkAudio,
    ChunkFrame,
    ChunkJournal,
    ChunkRetry,
    ChunkSkipped,
    EngineError,
    FrameEvent,
    GenerationSettings,
    JoinSettings,
    LongTextOptions,
    RecordingLength,
    SynthesisResult,
    SynthesizerContract,
    VoiceChoice,
    os_reason,
    run_long_synthesis,
    split_for_synthesis,
    synthesize_long,
)


def long_text_options(settings: Settings) -> LongTextOptions:
    """The pauses the user chose (Generation settings) for joining the chunks of a long text, and how many
    chunks are generated side by side (the batch panel's "lines at once")."""
    return LongTextOptions(join=JoinSettings(sentence_pause=settings.sentence_pause_ms / 1000,
                                             paragraph_pause=settings.paragraph_pause_ms / 1000),
                           batch_size=settings.batch_size or None)  # 0 (Auto): the model's suggestion


def needs_chunks(text: str, language: str) -> bool:
    """True when one synthesis would not speak the text well: it splits into several chunks."""
    try:
        return len(split_for_synthesis(text, language)) > 1
    except EngineError:
        return False  # let the single synthesis report the problem in its own words


class LongHandlers:
    """What a caller wants to hear about while a long text is generated (every handler is optional). `length`
    hears the whole recording's expected length in samples: before the first chunk, then as chunks finish."""

    def __init__(self, check_cancel: Callable[[], None], frame: Callable[[FrameEvent], None] | None = None,
                 part: Callable[[int, int], None] | None = None, audio: Callable[[AudioChunk], None] | None = None,
                 notice: Callable[[str], None] | None = None, length: Callable[[int], None] | None = None):
        self.check_cancel, self.frame, self.part, self.audio, self.notice = check_cancel, frame, part, audio, notice
        self.length = length


def speak_long(synth: SynthesizerContract, text: str, voice: VoiceChoice, language: str, settings: GenerationSettings,
               on: LongHandlers, instruct: str | None = None, options: LongTextOptions | None = None,
               journal: ChunkJournal | None = None) -> tuple[SynthesisResult, list[str]]:
    """Generate every chunk; return one result (the joined recording, all codes) and the left-out messages. With
    a journal, each chunk is kept on disk as it is made, and the chunks it holds already are not made again."""
    made = {i: m.load for i, m in journal.made().items()} if journal is not None else {}
    events = synthesize_long(synth, text, voice, language, settings, options=options, instruct=instruct, made=made)
    # split the way synthesize_long did (it validated the language): the estimate covers exactly its chunks
    length = RecordingLength(text, synth.check_language(language), options, max_frames=settings.max_frames)
    pieces: list[np.ndarray] = []
    codes: list[np.ndarray] = []
    skipped: list[str] = []
    t0 = time.perf_counter()

    def frame(ev: ChunkFrame, done: int) -> None:
        if on.frame:  # elapsed: since the start of the whole text
            on.frame(replace(ev.frame, elapsed=time.perf_counter() - t0))

    def audio(ev: ChunkAudio) -> None:
        nonlocal journal
        if journal is not None and ev.attempts:  # made now (0: read back from the journal)
            try:
                journal.keep(ev.chunk, ev.result, ev.attempts)
            except OSError as e:  # the generation goes on; what is made from here on is kept only in the take
                if on.notice:
                    on.notice(f"Chunks are no longer kept on disk as they are made: {os_reason(e)}.")
                journal = None
        pieces.append(ev.samples)
        codes.append(ev.result.codes)
        if on.audio:
            on.audio(AudioChunk(samples=ev.samples, start_sample=ev.start_sample))

    def retry(ev: ChunkRetry) -> None:
        if on.notice:
            on.notice(f"Chunk {ev.chunk + 1} of {ev.chunks}: {ev.reason}; trying again with another seed.")

    def left_out(ev: ChunkSkipped) -> None:
        skipped.append(ev.message)
        if on.notice:
            on.notice(ev.message)

    final = run_long_synthesis(events, on_frame=frame, on_audio=audio, on_retry=retry, on_skipped=left_out,
                               on_part=on.part, length=length, on_length=on.length, check_cancel=on.check_cancel)
    audio_all = np.concatenate(pieces)
    pieces.clear()
    result = SynthesisResult(audio=audio_all, codes=np.concatenate(codes), ended_by="eos", seed=final.seed,
                             timings=replace(final.timings))
    return result, skipped
