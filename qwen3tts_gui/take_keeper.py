"""The take history read and written off the GUI thread, one job at a time and in order.

Writing a long take (hundreds of MB, synced to the disk) took the window away for seconds; here it runs on a
single background thread and its outcome comes back as a signal. Removing, clearing and trimming the history
first wait for the writes queued before them, so a removed take is never brought back by a late write.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from PySide6.QtCore import QObject, Signal

from .data.take_store import TakeStore
from .data.takes import Take


class TakeKeeper(QObject):
    # number, kept, numbers removed to stay under the size limit, problems (one sentence each)
    kept = Signal(int, bool, list, list)
    loaded = Signal(list, list)  # the kept takes, oldest first; problems (one sentence each)

    def __init__(self, store: TakeStore, parent: QObject | None = None):
        super().__init__(parent)
        self.store = store
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="take-writer")
        self._pending: list[Future] = []
        self._closed = False

    def load(self) -> None:
        """Read the history's metadata (before any write queued after this call); `loaded` says when it is done:
        10,000 takes kept the window from appearing for seconds when this ran on the GUI thread."""
        self._pending.append(self._pool.submit(self._load))

    def _load(self) -> None:
        try:
            takes, problems = self.store.load_all(), self.store.take_problems()
        except Exception as e:  # a bug must not leave the history silently empty
            takes, problems = [], [f"The take history in {self.store.folder} could not be read: {e}."]
        self.loaded.emit(takes, problems)

    def keep(self, take: Take, limit_bytes: int, after: Callable[[], None] | None = None) -> None:
        """Write `take` and trim the oldest takes past limit_bytes (the new take always stays). after() runs on
        the writer's thread as soon as the take is on disk (not when it could not be kept)."""
        if self._closed:  # a result that arrived as the app closed: written here and now, not lost
            self._keep(take, limit_bytes, after)
            return
        self._pending = [f for f in self._pending if not f.done()]
        self._pending.append(self._pool.submit(self._keep, take, limit_bytes, after))

    def _keep(self, take: Take, limit_bytes: int, after: Callable[[], None] | None = None) -> None:
        try:
            ok = self.store.save(take)
            if ok and after is not None:
                after()
            removed = self.store.enforce_limit(limit_bytes, keep=take.number) if ok else []
            problems = self.store.take_problems()
        except Exception as e:  # a bug must not end the writer silently: the take is then reported as not kept
            ok, removed, problems = False, [], [f"Take #{take.number} could not be kept for the next session: {e}."]
        self.kept.emit(take.number, ok, removed, problems)

    def wait(self) -> None:
        """Until every write queued so far has finished (before removing takes, and before the app quits)."""
        for f in self._pending:
            f.exception()
        self._pending.clear()

    def busy(self) -> bool:
        return any(not f.done() for f in self._pending)

    def close(self) -> None:
        self.wait()
        self._closed = True
        self._pool.shutdown(wait=True)
