"""run_long_synthesis: the one loop over the events of synthesize_long, the long-text twin of run_synthesis. The
command line (qwen3tts synth of a long text) and the app (a chapter in the text box or a batch line) both consume
a long text through it, so which chunk progress shows, when the expected length changes and what "nothing could
be generated" means are decided here once.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator

from ..errors import EngineError
from .recording_length import RecordingLength
from .runner import ChunkAudio, ChunkFrame, ChunkProgress, ChunkRetry, ChunkSkipped, LongEvent, LongResult


def run_long_synthesis(
    events: Iterator[LongEvent],
    on_frame: Callable[[ChunkFrame, int], None] | None = None,
    on_audio: Callable[[ChunkAudio], None] | None = None,
    on_retry: Callable[[ChunkRetry], None] | None = None,
    on_skipped: Callable[[ChunkSkipped], None] | None = None,
    on_part: Callable[[int, int], None] | None = None,
    length: RecordingLength | None = None,
    on_length: Callable[[int], None] | None = None,
    check_cancel: Callable[[], None] | None = None,
) -> LongResult:
    """Consume the events of one long text and return its LongResult. check_cancel() runs before each event (it
    raises to stop). Chunks may run side by side, so progress follows the first chunk not yet in the recording:
    on_frame(event, chunks done) hears only that chunk's frames, on_part(chunk, chunks) when it changes.
    on_audio hears each piece of the recording in order, on_retry and on_skipped the chunks tried again or left
    out. With `length` (made for the same text), on_length hears the expected recording length in samples at
    the start and whenever a finished chunk changes it. The events are closed on every exit, which stops a
    chunk still running. EngineError when no chunk could be generated."""
    progress = ChunkProgress()
    if length is not None and on_length is not None:
        on_length(length.samples)
    shown = -1
    made = 0
    skipped: list[ChunkSkipped] = []
    result: LongResult | None = None
    try:
        for ev in events:
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
            elif isinstance(ev, ChunkAudio):
                made += 1
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
        close = getattr(events, "close", None)
        if close is not None:
            close()
    if result is None:
        raise EngineError("The long text ended without a result.")
    if made == 0:
        reason = skipped[0].message if skipped else "The model produced no audio."
        raise EngineError(f"No part of the text could be generated. {reason}")
    return result
