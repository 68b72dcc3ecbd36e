"""One model download at a time, shared by the welcome screen and the Models dialog.

The job (engine.store via engine_adapter.install_model) runs in a ProgressWorker; a cancel keeps the partial
files, so the next Download of the same model resumes where it stopped, also after the app was closed.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, Signal

from .context import AppContext
from .engine_adapter import install_model
from .workers import ProgressWorker


class ModelDownloader(QObject):
    started = Signal(str)  # what is being downloaded
    progress = Signal(float, str)
    installed = Signal(object)  # Path of the new bundle
    failed = Signal(str)
    cancelled = Signal()
    running_changed = Signal(bool)

    def __init__(self, ctx: AppContext, parent: QObject | None = None):
        super().__init__(parent)
        self.ctx = ctx
        self.token = ""  # for gated repositories; kept for this session only (HF_TOKEN / hf login also work)
        self._worker: ProgressWorker | None = None
        self.source = ""

    @property
    def running(self) -> bool:
        return self._worker is not None

    def start(self, source: str, precision: str) -> bool:
        if self._worker is not None:
            return False
        folder, endpoint, token = self.ctx.models_folder(), self.ctx.settings.hub_endpoint.strip(), self.token
        worker = ProgressWorker(
            lambda progress, cancel: install_model(source, folder, precision, endpoint, token, progress, cancel),
            f"downloading {source}", self)
        worker.progress.connect(self.progress)
        worker.done.connect(lambda path: self.installed.emit(Path(path)))
        worker.failed.connect(self.failed)
        worker.cancelled.connect(self.cancelled)
        worker.finished.connect(self._finished)
        self._worker, self.source = worker, source
        self.started.emit(source)
        self.running_changed.emit(True)
        worker.start()
        return True

    def cancel(self) -> None:
        if self._worker is not None:
            self._worker.cancel()

    def wait(self, ms: int = 30000) -> None:
        if self._worker is not None:
            self._worker.wait(ms)

    def _finished(self) -> None:
        if self._worker is not None:
            self._worker.deleteLater()
        self._worker = None
        self.running_changed.emit(False)
