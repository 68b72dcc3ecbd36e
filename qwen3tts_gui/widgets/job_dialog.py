"""The progress dialog of a long engine job (conversion, the demo model, tuning): modal, 0-1000, kept open until
the job ends, Cancel asks the worker to stop; its bar and text follow the worker's progress signal."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QProgressDialog, QWidget

from .. import APP_NAME
from ..workers import ProgressWorker


def job_progress_dialog(parent: QWidget, label: str, worker: ProgressWorker, cancellable: bool = True,
                        heading: str = "") -> QProgressDialog:
    """A dialog for `worker`, showing `label` until the first progress; each progress message shows under
    `heading` when one is given."""
    dialog = QProgressDialog(label, "Cancel" if cancellable else "", 0, 1000, parent)
    dialog.setWindowTitle(APP_NAME)
    dialog.setWindowModality(Qt.WindowModality.WindowModal)
    dialog.setMinimumDuration(0)
    dialog.setAutoClose(False)
    dialog.setAutoReset(False)
    dialog.setMinimumWidth(460)
    if not cancellable:
        dialog.setCancelButton(None)
    dialog.canceled.connect(worker.cancel)
    dialog.canceled.connect(lambda: dialog.setLabelText("Cancelling…"))

    def show_progress(fraction: float, message: str) -> None:
        dialog.setValue(int(fraction * 1000))
        dialog.setLabelText(f"{heading}\n{message}" if heading else message)

    worker.progress.connect(show_progress)
    return dialog
