"""TaskQueue: the one thread that owns the engine, and the queue of SpeechTasks (task.py) it runs.

The HTTP side checks a request, makes a SpeechTask and submits it; the engine thread takes waiting tasks in
order and runs them through engine_call.py, posting each task's events (Started, Audio, Finished, Failed) back to
its request. Tasks that wait together and share their settings are generated side by side (the engine's
batching: each one's audio is what it would be alone). A long text runs chunk by chunk, and tasks that arrive
meanwhile are served between its chunks, so no one waits for a whole long text: the long texts and the waiting
tasks take the engine in turns of equal time (a chunk of a long text may take many times a group of short
requests; turns of equal count would hand the long text most of the engine). A full queue refuses at once (429
with Retry-After); a task whose client went away is cancelled before its next frame."""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from contextlib import nullcontext

from engine import Cancelled, SynthesizerContract

from . import engine_call
from .api_errors import ApiError
from .engine_turns import EngineTurns
from .task import Failed, SpeechTask

log = logging.getLogger("qwen3tts_server")


class TaskQueue:
    def __init__(self, synth: SynthesizerContract, max_waiting: int, batch_wait: float = 0.05,
                 batch_size: int | None = None, turns: EngineTurns | None = None,
                 clock: Callable[[], float] = time.monotonic):
        """turns: the model is shared (the app's): each group is served in a turn of its own (engine_turns.py).
        clock: what the turns of long texts and waiting tasks are timed with (tests)."""
        self.synth = synth
        self.turns = turns
        self.max_waiting = max_waiting
        self.batch_wait = batch_wait
        self.batch_size = batch_size if batch_size is not None else synth.suggested_batch_size
        self._engine_call = engine_call
        self._waiting: deque[SpeechTask] = deque()
        self._parked: deque[engine_call.SpeechRun] = deque()
        self._cv = threading.Condition()
        self._closed = False
        self._clock = clock
        # seconds of engine time the waiting tasks may still take before the parked long texts' next chunk: each
        # long chunk gives them as much as it took
        self._waiting_time_left = 0.0
        self._task_seconds: deque[float] = deque(maxlen=32)  # recent tasks' durations, for Retry-After
        self.running = 0  # tasks in the engine now (a group, and long texts between their chunks)
        self.cancelled = 0  # tasks stopped because their client left
        self._thread = threading.Thread(target=self._run, name="speech-engine", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------------------ the request side
    def submit(self, task: SpeechTask) -> None:
        """Queue a task, or ApiError 429 (with Retry-After) when max_waiting tasks already wait, 503 if closed."""
        with self._cv:
            if self._closed:
                raise ApiError(503, "The server is shutting down.")
            waiting = sum(not t.cancelled.is_set() for t in self._waiting)
            if waiting >= self.max_waiting:
                after = self.retry_after(waiting)
                raise ApiError(429, f"{waiting} requests are waiting already, the most this server queues; try "
                                    f"again in about {after} s.", "rate_limit_exceeded",
                               headers={"Retry-After": str(after)})
            self._waiting.append(task)
            self._cv.notify_all()

    def retry_after(self, waiting: int) -> int:
        """Seconds until a place is likely free: the recent tasks' mean time per batch of waiting tasks."""
        mean = sum(self._task_seconds) / len(self._task_seconds) if self._task_seconds else 5.0
        return max(1, math.ceil(mean * (waiting + 1) / max(1, self.batch_size) / 2))

    @property
    def waiting(self) -> int:
        with self._cv:
            return sum(not t.cancelled.is_set() for t in self._waiting)

    def close(self, timeout: float = 10.0) -> None:
        """Refuse new tasks, cancel the waiting and running ones, and wait for the engine thread."""
        with self._cv:
            self._closed = True
            for task in self._waiting:
                task.post(Failed(ApiError(503, "The server is shutting down.")))
                task.cancel()
            self._waiting.clear()
            for run in self._parked:
                run.task.cancel()
            self._cv.notify_all()
        self._thread.join(timeout)

    # ------------------------------------------------------------------------------ the engine thread
    def _run(self) -> None:
        while True:
            group = self._next_group()
            if group is None:
                break
            t0 = time.monotonic()
            started = self._clock()
            self.running = len(group) + len(self._parked)
            try:
                with self.turns.turn(lambda: self._closed) if self.turns is not None else nullcontext():
                    self._serve(group)
            except Cancelled:  # closed while the app held the model: the group never started
                for task in group:
                    task.post(Failed(ApiError(503, "The server is shutting down.")))
            except BaseException as e:  # a task's failure never stops the server
                log.exception("speech task failed")
                for task in group:
                    task.post(Failed(ApiError(500, f"The engine failed: {type(e).__name__}: {e}")))
            finally:
                if group:
                    self._task_seconds.append((time.monotonic() - t0) / len(group))
                took = self._clock() - started
                with self._cv:
                    if not group or (len(group) == 1 and group[0].long):  # the long texts' turn
                        self._waiting_time_left = took
                    else:
                        self._waiting_time_left -= took
                self.running = len(self._parked)
        for run in self._parked:  # closing: the long texts still running end here
            run.close()

    def _next_group(self) -> list[SpeechTask] | None:
        """Waiting tasks to start now (one long task, or up to batch_size that share their settings); [] when a
        parked long text goes on for one chunk (it takes turns with the waiting tasks); None when closed."""
        with self._cv:
            while not self._closed and not self._waiting and not self._parked:
                self._cv.wait()
            if self._closed:
                return None
            if self._parked and (self._waiting_time_left <= 0 or not self._waiting):
                return []  # long texts and waiting tasks take turns of equal time: neither starves the other
            if self.batch_size > 1 and self.batch_wait > 0 and not self._parked:
                # an idle engine waits a moment for companions: requests sent together run side by side
                end = time.monotonic() + self.batch_wait
                while len(self._waiting) < self.batch_size and not self._closed:
                    left = end - time.monotonic()
                    if left <= 0:
                        break
                    self._cv.wait(left)
            while self._waiting and self._waiting[0].cancelled.is_set():
                self._waiting.popleft()
            if not self._waiting:
                return []
            first = self._waiting.popleft()
            group = [first]
            if not first.long and self.batch_size > 1:
                key = first.batch_key()
                for task in list(self._waiting):
                    if len(group) >= self.batch_size:
                        break
                    if not task.long and not task.cancelled.is_set() and task.batch_key() == key:
                        self._waiting.remove(task)
                        group.append(task)
            return group

    def _serve(self, group: list[SpeechTask]) -> None:
        call = self._engine_call
        if not group:  # the first parked long text goes on for one chunk
            with self._cv:
                if not self._parked:
                    return  # the tasks that waited were all cancelled
                run = self._parked.popleft()
                self.running = len(self._parked) + 1
            if not run.advance():
                with self._cv:
                    self._parked.append(run)
            else:
                self._count([run.task])
            return
        if len(group) == 1:  # alone: the engine's one door; a long text one chunk per turn
            run = call.SpeechRun(self.synth, group[0])
            if not run.advance():
                with self._cv:
                    self._parked.append(run)
            else:
                self._count(group)
            return
        call.speak_together(self.synth, group)
        self._count(group)

    def _count(self, ended: list[SpeechTask]) -> None:
        self.cancelled += sum(t.stopped is not None and t.stopped.status == 499 for t in ended)
