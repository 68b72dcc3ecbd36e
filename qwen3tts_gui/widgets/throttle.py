"""Run a refresh at most every N ms however often it is asked for (frames can arrive faster than paints)."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, QTimer


class Throttle(QObject):
    def __init__(self, interval_ms: int, callback: Callable[[], None], parent: QObject | None = None):
        super().__init__(parent)
        self._callback = callback
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(interval_ms)
        self._timer.timeout.connect(callback)

    def ping(self) -> None:
        """Refresh soon (once per interval at most)."""
        if not self._timer.isActive():
            self._timer.start()

    def stop(self) -> None:
        """Forget a pending refresh."""
        self._timer.stop()

    def flush(self) -> None:
        """Refresh now (e.g. at the end of a generation) and forget any pending one."""
        self._timer.stop()
        self._callback()
