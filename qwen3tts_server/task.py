"""SpeechTask: the unit of work (one request's speech), and the events the engine thread posts back to its request
(Started, Audio, Finished, Failed). The HTTP side makes a task; the queue (tasks.py) runs it through engine_call.py."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from engine import GenerationSettings, VoiceChoice

from .api_errors import ApiError


@dataclass
class Started:
    batched: int  # how many tasks are generated side by side with this one (itself included)
    seed: int | None


@dataclass
class Audio:
    samples: np.ndarray  # float32 at SAMPLE_RATE, in order


@dataclass
class Finished:
    seconds: float  # audio seconds sent


@dataclass
class Failed:
    error: ApiError


TaskEvent = Started | Audio | Finished | Failed


@dataclass(eq=False)
class SpeechTask:
    text: str
    voice: VoiceChoice
    language: str
    instruct: str | None
    settings: GenerationSettings  # the seed is fixed by now (every task's seed is known before it starts)
    long: bool  # more than one chunk: the long-text path
    stream: bool  # audio events as the frames are decoded (streamed formats); else one Audio at the end
    post: Callable[[TaskEvent], None]  # delivers an event to the request (thread-safe)
    deadline: float  # time.monotonic() by which the task must end
    cancelled: threading.Event = field(default_factory=threading.Event)
    timeout_seconds: float = 0.0
    stopped: ApiError | None = None  # why the engine stopped it early, if it did

    def cancel(self) -> None:
        self.cancelled.set()

    def stop_reason(self) -> ApiError | None:
        """Why the task must stop now (its client left, or it ran out of time), else None."""
        if self.cancelled.is_set():
            self.stopped = ApiError(499, "The client closed the connection.")
        elif time.monotonic() > self.deadline:
            self.stopped = ApiError(504, f"The speech took longer than this server's limit of "
                                         f"{self.timeout_seconds:g} s per request; send a shorter text.", "timeout")
        return self.stopped

    def batch_key(self) -> GenerationSettings:
        """Tasks with equal keys may run side by side: one run's settings, with each task's seed and frame cap."""
        return replace(self.settings, seed=None, max_frames=None)
