"""The one-time "Tuning for this computer…" step after a model is opened (the engine's Synthesizer.tune: thread
counts and decoding measured on this CPU, kept in the cache folder; up to about 15 s at full size).

It runs as the engine job (ProgressWorker), in a dialog with Cancel. Cancelled or failed, the model keeps its
default settings and is tuned again the next time it is opened; the result goes to the status line.
"""

from __future__ import annotations

from PySide6.QtWidgets import QMainWindow

from ..context import AppContext
from ..diagnostics import log
from ..widgets.job_dialog import job_progress_dialog
from ..workers import ProgressWorker

TITLE = "Tuning for this computer…"


def needs_tuning(synth) -> bool:
    """Whether the open model has no tuning for this computer yet."""
    return bool(getattr(synth, "tuning_needed", False))


def start_tuning(window: QMainWindow, ctx: AppContext, synth) -> ProgressWorker | None:
    """Tune `synth` as the engine job, with a cancellable progress dialog; None when another job runs."""
    worker = ProgressWorker(lambda progress, cancel: synth.tune(progress=progress, cancel=cancel),
                            "tuning for this computer", window)
    dialog = job_progress_dialog(
        window, f"{TITLE}\nOnce per model and computer: the fastest thread counts are measured.", worker,
        heading=TITLE)
    status = window.statusBar()

    def done(record) -> None:
        status.showMessage(record.summary()[0].upper() + record.summary()[1:], 15000)
        log.info("tuning: %s", record.summary())

    worker.done.connect(done)
    worker.cancelled.connect(lambda: status.showMessage(
        "Tuning cancelled: default settings until the model is opened again", 8000))
    worker.failed.connect(lambda msg: status.showMessage(f"Tuning failed ({msg}); default settings in use", 8000))

    def finished() -> None:
        dialog.close()
        dialog.deleteLater()

    if not ctx.start_job(worker, window, needs_model=True, finished=finished):
        dialog.deleteLater()
        return None
    status.showMessage(TITLE)
    dialog.show()
    return worker
