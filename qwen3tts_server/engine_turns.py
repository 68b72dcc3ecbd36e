"""EngineTurns: one loaded model shared by the app and its speech server, used by one thread at a time.

The engine steps a model from one thread at a time (engine.SynthesizerContract.synthesize). When the app lets
other programs use its voices, the server speaks with the model the app has open rather than a second copy (a
full-size model is gigabytes): the app's engine jobs and the server's engine thread each take a turn before they
touch it. Turns go in the order they were asked for, so neither side waits behind a stream of the other's: the
server takes one per group of requests (or per chunk of a long text), the app one per job."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from engine import Cancelled

POLL_SECONDS = 0.1  # how often a waiting turn asks whether it is still wanted


class EngineTurns:
    def __init__(self) -> None:
        self._cv = threading.Condition()
        self._asked: deque[object] = deque()  # the turns waiting, in order
        self._held = False

    @contextmanager
    def turn(self, give_up: Callable[[], bool] = lambda: False,
             waiting: Callable[[], object] | None = None) -> Iterator[None]:
        """Hold the model for the `with` block, once the turns asked for earlier have been had. give_up() is asked
        while waiting: True stops the wait with Cancelled (a job cancelled, a server closing). waiting() is called
        once when the turn does not come at once (the app says why nothing happens yet)."""
        me = object()
        with self._cv:
            self._asked.append(me)
            try:
                if (self._held or self._asked[0] is not me) and waiting is not None:
                    waiting()
                while self._held or self._asked[0] is not me:
                    if give_up():
                        raise Cancelled("stopped while waiting for the model")
                    self._cv.wait(POLL_SECONDS)
            except BaseException:
                self._asked.remove(me)
                self._cv.notify_all()
                raise
            self._asked.popleft()
            self._held = True
        try:
            yield
        finally:
            with self._cv:
                self._held = False
                self._cv.notify_all()

    @property
    def waiting(self) -> int:
        """Turns asked for and not yet had."""
        with self._cv:
            return len(self._asked)
