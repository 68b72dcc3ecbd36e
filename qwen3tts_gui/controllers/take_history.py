"""The take history: read at start off the GUI thread, each new take numbered and kept on disk, removed, cleared,
trimmed to the size limit. The output panel shows the takes; this decides what is on disk."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QWidget

from ..context import AppContext
from ..data.take_store import TakeStore
from ..data.takes import Take
from ..take_keeper import TakeKeeper
from ..widgets.output_panel import OutputPanel


class TakeHistory(QObject):
    """`window` is the parent of its dialogs; `status` carries a status-line message and how long it shows (ms)."""

    status = Signal(str, int)

    def __init__(self, ctx: AppContext, window: QWidget, output: OutputPanel, folder: Path):
        super().__init__(window)
        self.ctx = ctx
        self.window = window
        self.output = output
        self.count = 0  # the number of the last take: the next one is count + 1
        self.writing = 0  # takes handed to the writer whose outcome has not come back yet
        self.loading = False  # the history is being read
        self.unusable: str | None = None  # why the takes folder cannot keep takes (said once, at the start)
        self._epoch = 0
        self.store = TakeStore(folder)
        self.keeper = TakeKeeper(self.store, self)
        self.keeper.kept.connect(self._kept)
        output.take_removed.connect(self.remove)
        output.clear_requested.connect(self.clear)

    def restore(self) -> None:
        """The history fills in once read (off the GUI thread); new takes are numbered past every folder now."""
        self.count = self.store.last_number()
        self.loading = True
        self._epoch += 1
        epoch = self._epoch
        self.keeper.loaded.connect(lambda takes, problems: self._loaded(epoch, takes, problems))
        self.keeper.load()

    def _loaded(self, epoch: int, takes: list, problems: list) -> None:
        self.loading = False
        if epoch != self._epoch:
            return  # cleared meanwhile
        self.output.restore_takes(takes)
        if problems:  # left where they are for the user: named at each start until they are dealt with
            self.ctx.dialogs.notice(self.window, "Some takes could not be read", "\n".join(problems))

    def next_number(self) -> int:
        """The new take's number, claimed on disk at once (another copy of the app on this folder skips it)."""
        self.count = self.store.claim_number(self.count)
        return self.count

    def keep(self, take: Take, after: Callable[[], None] | None = None) -> None:
        """Write the take into the history and trim the oldest ones past the size limit (off the GUI thread).
        after() runs on the writer's thread once the take is on disk."""
        self.writing += 1
        self.keeper.keep(take, self.ctx.settings.takes_limit_mb * 1024 * 1024, after)

    def _kept(self, number: int, kept: bool, removed: list, problems: list) -> None:
        self.writing -= 1
        self.output.drop_takes(removed)
        if not kept and self.unusable:  # named in the window at the start: not again for every take
            self.status.emit(f"Take #{number} is not kept for the next session: {self.unusable}.", 10000)
        elif not kept:  # a message that stays until read: the status line is overwritten by the next one
            self.ctx.dialogs.notice(self.window, "A take was not kept", "\n".join(problems) + (
                f"\n\nTake #{number} stays here until the app is closed: save it with File > Save take as… "
                "to keep it."))
        elif problems:
            self.status.emit(problems[-1], 10000)

    def remove(self, number: int) -> None:
        self.keeper.wait()  # a write still running would put the take back
        self.store.remove(number)

    def clear(self) -> None:
        if not self.output.takes:
            return
        if not self.ctx.dialogs.question(
                self.window, "Clear all takes",
                f"Delete all {len(self.output.takes)} takes from the history? Files you saved are not touched."):
            return
        self.output.clear_takes()
        self.keeper.wait()
        self._epoch += 1  # a history still being read is not shown after this
        self.store.clear()

    def set_limit(self, megabytes: int) -> None:
        self.ctx.settings.takes_limit_mb = megabytes
        keep = self.output.current.number if self.output.current is not None else None
        self.keeper.wait()
        self.output.drop_takes(self.store.enforce_limit(megabytes * 1024 * 1024, keep=keep))

    def close(self) -> None:
        """Every take generated is on disk before the app quits."""
        self.keeper.close()
