"""Takes written to the history off the GUI thread, one at a time and in order.

Writing a long take (hundreds of MB, synced to the disk) took the window away for seconds; here it runs on a
single background thread and its outcome comes back as a signal. Removing, clearing and trimming the history
first wait for the writes queued before them, so a removed take is never brought back by a late write.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor

from PySide6.QtCore import QObject, Signal

from .take_store import TakeStore
from .takes import Take


class TakeKeeper(QObject):
    # number, kept, numbers removed to stay under the size limit, problems (one sentence each)
    kept = Signal(int, bool, list, list)

    def __init__(self, store: TakeStore, parent: QObject | None = None):
        super().__init__(parent)
        self.store = store
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="take-writer")
        self._pending: list[Future] = []

    def keep(self, take: Take, limit_bytes: int) -> None:
        """Write `take` and trim the oldest takes past limit_bytes (the new take always stays)."""
        self._pending = [f for f in self._pending if not f.done()]
        self._pending.append(self._pool.submit(self._keep, take, limit_bytes))

    def _keep(self, take: Take, limit_bytes: int) -> None:
        try:
            ok = self.store.save(take)
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
        self._pool.shutdown(wait=True)
