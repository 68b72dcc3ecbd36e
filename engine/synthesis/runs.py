"""How a caller consumes a synthesis: run_synthesis() for the events of one, BatchRun for the events of several.

Plain consumers of the event types in engine/types.py; they know nothing of models or networks, so the long-text
runner, the CLI and the GUI share one loop over the events.
"""
from __future__ import annotations

from collections.abc import Callable, Generator, Iterator

from ..errors import EngineError
from ..longform.events import EventStream
from ..types import AudioChunk, FrameEvent, JobEvent, SynthesisEvent, SynthesisResult


def run_synthesis(
    events: Iterator[SynthesisEvent],
    on_frame: Callable[[FrameEvent], None] | None = None,
    on_audio: Callable[[AudioChunk], None] | None = None,
    check_cancel: Callable[[], None] | None = None,
) -> SynthesisResult:
    """Consume the events of one synthesis and return its result: on_frame / on_audio see each event,
    check_cancel() runs before each one (it raises to stop). The generator is closed on every exit, which
    cancels a synthesis still running."""
    try:
        for event in events:
            if check_cancel is not None:
                check_cancel()
            if isinstance(event, FrameEvent):
                if on_frame is not None:
                    on_frame(event)
            elif isinstance(event, AudioChunk):
                if on_audio is not None:
                    on_audio(event)
            elif isinstance(event, SynthesisResult):
                return event
    finally:
        close = getattr(events, "close", None)
        if close is not None:
            close()
    raise EngineError("The synthesis ended without a result.")


class BatchRun(EventStream[JobEvent]):
    """The events of Synthesizer.synthesize_many, in the order they happen: iterate it for JobEvents.

    Per job: FrameEvents (index 0, 1, ...; elapsed counts from the start of the run) and, when the settings ask
    stream_audio, AudioChunks (in order, each after the frames it decodes), then either one JobEvent with the
    SynthesisResult (after the job's last chunk; a job decoded whole at its end is decoded while the others go
    on, so its result may come some frames after its last frame), or one with `error` (a job whose text, voice or settings are invalid
    fails at once with its own message; a cancelled job gets Cancelled). Jobs that fail never stop the others.
    cancel(job) drops one job before the next frame; close() (or leaving the loop) cancels everything.
    Each job's codes are exactly those it would get from synthesize() alone with the same settings and seed."""

    def __init__(self, events: Callable[[BatchRun], Generator[JobEvent, None, None]]):
        """events(run): the generator of the run's JobEvents; it reads run.take_cancelled() between steps."""
        self._cancelled: set[int] = set()
        super().__init__(events(self))

    def cancel(self, job: int) -> None:
        """Stop job number `job` between frames (a finished or unknown job is ignored)."""
        self._cancelled.add(int(job))

    def take_cancelled(self) -> list[int]:
        out = sorted(self._cancelled)
        self._cancelled.clear()
        return out
