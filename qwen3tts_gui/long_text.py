"""Long texts in the app: a chapter in the Studio text box or a batch item becomes one take, generated chunk by
chunk through the engine's synthesize_long (the same code path as `qwen3tts synth --text-file`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

import numpy as np
from PySide6.QtCore import Signal

from .engine_adapter import (
    AudioChunk,
    ChunkAudio,
    ChunkFrame,
    ChunkProgress,
    ChunkRetry,
    ChunkSkipped,
    EngineError,
    FrameEvent,
    GenerationSettings,
    JoinSettings,
    LongResult,
    LongTextOptions,
    RecordingLength,
    SynthesisResult,
    SynthesizerContract,
    VoiceChoice,
    split_for_synthesis,
    synthesize_long,
)
from .settings import Settings
from .workers import SynthesisWorker


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
               ) -> tuple[SynthesisResult, list[str]]:
    """Generate every chunk; return one result (the joined recording, all codes) and the left-out messages."""
    events = synthesize_long(synth, text, voice, language, settings, options=options, instruct=instruct)
    # split the way synthesize_long did (it validated the language): the estimate covers exactly its chunks
    length = RecordingLength(text, synth.check_language(language), options, max_frames=settings.max_frames)
    if on.length:
        on.length(length.samples)
    pieces: list[np.ndarray] = []
    codes: list[np.ndarray] = []
    skipped: list[str] = []
    final: LongResult | None = None
    t0 = time.perf_counter()
    progress = ChunkProgress()  # chunks may run side by side: show the first one not yet in the recording
    shown = -1
    try:
        for ev in events:
            on.check_cancel()
            about_shown = progress.see(ev)
            if length.see(ev) and on.length:
                on.length(length.samples)
            if about_shown and progress.chunk != shown and progress.chunk < ev.chunks:
                shown = progress.chunk
                if on.part:
                    on.part(shown, ev.chunks)
            if isinstance(ev, ChunkFrame):
                if about_shown and on.frame:  # elapsed: since the start of the whole text
                    on.frame(replace(ev.frame, elapsed=time.perf_counter() - t0))
            elif isinstance(ev, ChunkAudio):
                pieces.append(ev.samples)
                codes.append(ev.result.codes)
                if on.audio:
                    on.audio(AudioChunk(samples=ev.samples, start_sample=ev.start_sample))
            elif isinstance(ev, ChunkRetry):
                if on.notice:
                    on.notice(f"Chunk {ev.chunk + 1} of {ev.chunks}: {ev.reason}; trying again with another seed.")
            elif isinstance(ev, ChunkSkipped):
                skipped.append(ev.message)
                if on.notice:
                    on.notice(ev.message)
            elif isinstance(ev, LongResult):
                final = ev
    finally:
        events.close()
    if final is None or not pieces:
        reason = skipped[0] if skipped else "The model produced no audio."
        raise EngineError(f"No part of the text could be generated. {reason}")
    audio = np.concatenate(pieces)
    pieces.clear()
    result = SynthesisResult(audio=audio, codes=np.concatenate(codes), ended_by="eos", seed=final.seed,
                             timings=replace(final.timings))
    return result, skipped


class LongSynthesisWorker(SynthesisWorker):
    """SynthesisWorker for a text of several chunks: the same signals (frames, audio as each chunk finishes, one
    result), plus which chunk is running and notices about retried or left-out chunks."""

    part = Signal(int, int)  # chunk index (0-based), number of chunks
    length = Signal(int)  # samples the whole recording is expected to have (refined as chunks finish)
    notice = Signal(str)
    left_out = Signal(list)  # messages of the chunks that are missing from the result

    def __init__(self, synth: SynthesizerContract, text: str, voice: VoiceChoice, language: str,
                 settings: GenerationSettings, parent=None, instruct: str | None = None,
                 options: LongTextOptions | None = None):
        super().__init__(synth, text, voice, language, settings, parent, instruct=instruct)
        self.options = options

    def work(self) -> None:
        handlers = LongHandlers(self.check_cancel, frame=self.frame.emit, part=self.part.emit,
                                audio=self.chunk.emit, notice=self.notice.emit, length=self.length.emit)
        result, skipped = speak_long(self.synth, self.text, self.voice, self.language, self.settings, handlers,
                                     instruct=self.instruct, options=self.options)
        if skipped:
            self.left_out.emit(skipped)
        self.done.emit(result)
