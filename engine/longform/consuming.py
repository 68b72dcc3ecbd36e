"""run_speech: the one loop over the events of Synthesizer.speak. The command line (qwen3tts synth, qwen3tts
batch) and the app (a take from the text box, a batch line) all consume a request through it, so which chunk
progress shows, when the expected length changes, where the recording's samples come from and what "nothing
could be generated" means are decided here once.
"""
from __future__ import annotations

from collections.abc import Callable

from ..errors import EngineError
from ..types import AudioChunk
from .events import (
    ChunkAudio,
    ChunkFrame,
    ChunkProgress,
    ChunkRetry,
    ChunkSkipped,
    ChunkStream,
    LongResult,
    Speech,
)
from .recording_length import RecordingLength


def run_speech(
    speech: Speech,
    on_frame: Callable[[ChunkFrame, int], None] | None = None,
    on_samples: Callable[[AudioChunk], None] | None = None,
    on_audio: Callable[[ChunkAudio], None] | None = None,
    on_retry: Callable[[ChunkRetry], None] | None = None,
    on_skipped: Callable[[ChunkSkipped], None] | None = None,
    on_part: Callable[[int, int], None] | None = None,
    on_length: Callable[[int], None] | None = None,
    check_cancel: Callable[[], None] | None = None,
) -> LongResult:
    """Consume the events of one request and return its LongResult. check_cancel() runs before each event (it
    raises to stop). Chunks may run side by side, so progress follows the first chunk not yet in the recording:
    on_frame(event, chunks done) hears only that chunk's frames, on_part(chunk, chunks) when it changes.
    on_samples hears the recording's samples once each, in order (streamed while a one-chunk text is made, else
    each finished chunk's piece); on_audio each finished chunk (its piece and its own result); on_retry and
    on_skipped the chunks tried again or left out. on_length hears the expected recording length in samples at
    the start and whenever a finished chunk changes it. The events are closed on every exit, which stops a
    chunk still running. EngineError when no chunk could be generated."""
    progress = ChunkProgress()
    length = RecordingLength.of(speech) if on_length is not None else None
    if length is not None and on_length is not None:
        on_length(length.samples)
    shown = -1
    made = 0
    skipped: list[ChunkSkipped] = []
    result: LongResult | None = None
    try:
        for ev in speech:
            if check_cancel is not None:
                check_cancel()
            about_shown = progress.see(ev)
            if length is not None and length.see(ev) and on_length is not None:
                on_length(length.samples)
            if isinstance(ev, LongResult):
                result = ev
                continue
            if about_shown and progress.chunk != shown and progress.chunk < ev.chunks:
                shown = progress.chunk
                if on_part is not None:
                    on_part(shown, ev.chunks)
            if isinstance(ev, ChunkFrame):
                if about_shown and on_frame is not None:
                    on_frame(ev, progress.done)
            elif isinstance(ev, ChunkStream):
                if on_samples is not None:
                    on_samples(ev.audio)
            elif isinstance(ev, ChunkAudio):
                made += 1
                if on_samples is not None and not ev.streamed:
                    on_samples(AudioChunk(samples=ev.samples, start_sample=ev.start_sample))
                if on_audio is not None:
                    on_audio(ev)
            elif isinstance(ev, ChunkRetry):
                if on_retry is not None:
                    on_retry(ev)
            elif isinstance(ev, ChunkSkipped):
                skipped.append(ev)
                if on_skipped is not None:
                    on_skipped(ev)
    finally:
        speech.close()
    if result is None:
        raise EngineError("The text ended without a result.")
    if made == 0:
        reason = skipped[0].message if skipped else "The model produced no audio."
        raise EngineError(f"No part of the text could be generated. {reason}")
    return result
