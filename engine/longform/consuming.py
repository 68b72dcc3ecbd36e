"""run_speech: the one loop over the events of Synthesizer.speak, and run_speeches, the same loop over the events of
several requests (Synthesizer.speak_many). The command line (qwen3tts synth, qwen3tts batch), the app (a take from
the text box, a batch) and the speech server all consume requests through them, so which chunk progress shows,
when the expected length changes, where the recording's samples come from and what "nothing could be generated"
means are decided here once (SpeechListener, one per request).
"""
from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TypedDict, Unpack

from ..errors import EngineError
from ..types import AudioChunk
from .events import (
    ChunkAudio,
    ChunkFrame,
    ChunkProgress,
    ChunkRetry,
    ChunkSkipped,
    ChunkStream,
    LongEvent,
    LongResult,
    Speech,
    Speeches,
)
from .recording_length import RecordingLength


class SpeechHandlers(TypedDict, total=False):
    """What the caller of run_speech hears of one request, each handler optional (run_speech says when each is
    called); declared once for run_speech and SpeechListener."""

    on_frame: Callable[[ChunkFrame, int], None] | None
    on_samples: Callable[[AudioChunk], None] | None
    on_audio: Callable[[ChunkAudio], None] | None
    on_retry: Callable[[ChunkRetry], None] | None
    on_skipped: Callable[[ChunkSkipped], None] | None
    on_part: Callable[[int, int], None] | None
    on_length: Callable[[int], None] | None


class SpeechListener:
    """What one request's events mean to its caller, heard one at a time with see(ev): the handlers of run_speech
    (SpeechHandlers), then outcome(), the request's LongResult or the EngineError saying why it has none. `length`
    is the recording's expected length that on_length hears (none without on_length)."""

    def __init__(self, length: RecordingLength | None = None, **handlers: Unpack[SpeechHandlers]):
        self.handlers = handlers
        self.progress = ChunkProgress()
        on_length = handlers.get("on_length")
        self.length = length if on_length is not None else None
        if self.length is not None and on_length is not None:
            on_length(self.length.samples)
        self.shown = -1
        self.made = 0
        self.skipped: list[ChunkSkipped] = []
        self.result: LongResult | None = None

    def see(self, ev: LongEvent) -> None:
        h = self.handlers
        about_shown = self.progress.see(ev)
        on_length = h.get("on_length")
        if self.length is not None and self.length.see(ev) and on_length is not None:
            on_length(self.length.samples)
        if isinstance(ev, LongResult):
            self.result = ev
            return
        if about_shown and self.progress.chunk != self.shown and self.progress.chunk < ev.chunks:
            self.shown = self.progress.chunk
            if (on_part := h.get("on_part")) is not None:
                on_part(self.shown, ev.chunks)
        on_samples = h.get("on_samples")
        if isinstance(ev, ChunkFrame):
            if about_shown and (on_frame := h.get("on_frame")) is not None:
                on_frame(ev, self.progress.done)
        elif isinstance(ev, ChunkStream):
            if on_samples is not None:
                on_samples(ev.audio)
        elif isinstance(ev, ChunkAudio):
            self.made += 1
            if on_samples is not None and not ev.streamed:
                on_samples(AudioChunk(samples=ev.samples, start_sample=ev.start_sample))
            if (on_audio := h.get("on_audio")) is not None:
                on_audio(ev)
        elif isinstance(ev, ChunkRetry):
            if (on_retry := h.get("on_retry")) is not None:
                on_retry(ev)
        elif isinstance(ev, ChunkSkipped):
            self.skipped.append(ev)
            if (on_skipped := h.get("on_skipped")) is not None:
                on_skipped(ev)

    def outcome(self) -> LongResult | EngineError:
        if self.result is None:
            return EngineError("The text ended without a result.")
        if self.made == 0:
            reason = self.skipped[0].message if self.skipped else "The model produced no audio."
            return EngineError(f"No part of the text could be generated. {reason}")
        return self.result


def run_speech(
    speech: Speech,
    check_cancel: Callable[[], None] | None = None,
    **handlers: Unpack[SpeechHandlers],
) -> LongResult:
    """Consume the events of one request and return its LongResult. check_cancel() runs before each event (it
    raises to stop). Chunks may run side by side, so progress follows the first chunk not yet in the recording:
    on_frame(event, chunks done) hears only that chunk's frames, on_part(chunk, chunks) when it changes.
    on_samples hears the recording's samples once each, in order (streamed while a one-chunk text is made, else
    each finished chunk's piece); on_audio each finished chunk (its piece and its own result); on_retry and
    on_skipped the chunks tried again or left out. on_length hears the expected recording length in samples at
    the start and whenever a finished chunk changes it. The events are closed on every exit, which stops a
    chunk still running. EngineError when no chunk could be generated."""
    listener = SpeechListener(RecordingLength.of(speech) if handlers.get("on_length") is not None else None,
                              **handlers)
    try:
        for ev in speech:
            if check_cancel is not None:
                check_cancel()
            listener.see(ev)
    finally:
        speech.close()
    outcome = listener.outcome()
    if isinstance(outcome, EngineError):
        raise outcome
    return outcome


def run_speeches(
    speeches: Speeches,
    on_frame: Callable[[int, ChunkFrame, int], None] | None = None,
    on_samples: Callable[[int, AudioChunk], None] | None = None,
    on_audio: Callable[[int, ChunkAudio], None] | None = None,
    on_retry: Callable[[int, ChunkRetry], None] | None = None,
    on_skipped: Callable[[int, ChunkSkipped], None] | None = None,
    on_done: Callable[[int, LongResult], None] | None = None,
    on_failed: Callable[[int, EngineError], None] | None = None,
    check_cancel: Callable[[], None] | None = None,
) -> dict[int, LongResult | EngineError]:
    """Consume the events of several requests (Synthesizer.speak_many): each request's events mean what they mean
    to run_speech, and each handler hears the request's number first. on_done(i, result) when request i's
    recording is complete; on_failed(i, error) when it was refused, cancelled (Cancelled) or nothing of it could
    be generated; neither stops the others. check_cancel() runs before each event (it raises to stop them all:
    the events are closed on every exit). Returns every request's outcome: its LongResult or its EngineError."""
    listeners: dict[int, SpeechListener] = {}
    outcomes: dict[int, LongResult | EngineError] = {}

    def bound(handler: Callable[..., None] | None, i: int) -> Callable[..., None] | None:
        return partial(handler, i) if handler is not None else None

    try:
        for tagged in speeches:
            if check_cancel is not None:
                check_cancel()
            i = tagged.request
            if tagged.error is not None:
                outcome: LongResult | EngineError = tagged.error
            else:
                assert tagged.event is not None
                if i not in listeners:
                    listeners[i] = SpeechListener(on_frame=bound(on_frame, i), on_samples=bound(on_samples, i),
                                                  on_audio=bound(on_audio, i), on_retry=bound(on_retry, i),
                                                  on_skipped=bound(on_skipped, i))
                listeners[i].see(tagged.event)
                if not isinstance(tagged.event, LongResult):
                    continue
                outcome = listeners.pop(i).outcome()
            outcomes[i] = outcome
            if isinstance(outcome, EngineError):
                if on_failed is not None:
                    on_failed(i, outcome)
            elif on_done is not None:
                on_done(i, outcome)
    finally:
        speeches.close()
    return outcomes
