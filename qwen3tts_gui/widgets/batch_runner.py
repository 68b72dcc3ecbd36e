"""Running a batch: the lines' jobs (each voice resolved once), the question before files are replaced, the
worker, and each line's state and the overall progress as the worker reports them."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QProgressBar, QTableView, QWidget

from ..context import AppContext
from ..data.batch_lines import MERGED_NAME, LineState, output_name
from ..engine_adapter import GenerationSettings
from ..workers import BatchJob, BatchWorker, text_options
from .batch_table import BatchModel
from .throttle import Throttle


class BatchRunner(QObject):
    """The batch panel's runs: `panel` is the parent of its questions; it shows them in `model` and `progress`."""

    running_changed = Signal(bool)

    def __init__(self, ctx: AppContext, model: BatchModel, table: QTableView, progress: QProgressBar,
                 panel: QWidget):
        super().__init__(panel)
        self.ctx = ctx
        self.model = model
        self.table = table
        self.progress = progress
        self.panel = panel
        self.worker: BatchWorker | None = None
        self._t0 = 0.0
        self._done_chars = 0
        self._total_chars = 0
        self._run_keys: list[int] = []
        self._moved: set[int] = set()  # lines with new frames since the last repaint (several run at once)
        self._merged = ""  # the merged file of the last run, if one was written
        self._progress_soon = Throttle(100, self._show_progress, self)  # frames can outpace repaints

    def start(self, keys: list[int], folder: Path, merge_lines: bool, gap_seconds: float, batch_size: int | None,
              resolve_voice: Callable[[str], object], resolve_instruct: Callable[[str], str | None],
              current_settings: Callable[[], GenerationSettings]) -> bool:
        """Run the lines `keys` into `folder` (the caller has made it); False if nothing started."""
        jobs = []
        voices: dict[str, tuple] = {}  # each voice name resolved once (its file is read by the worker, once)
        for key in keys:  # no line changes before the question below is answered: "No" leaves them as they were
            row = self.model.row_of(key)
            line = self.model.lines[row]
            if line.voice not in voices:
                try:
                    voices[line.voice] = (resolve_voice(line.voice), None)
                except Exception as e:  # a missing or foreign voice fails its lines only
                    voices[line.voice] = (None, str(e).splitlines()[0] if str(e) else type(e).__name__)
            voice, problem = voices[line.voice]
            jobs.append(BatchJob(key, line.text, voice, line.language, folder / output_name(row + 1, line.text),
                                 problem, instruct=resolve_instruct(line.instruct)))
        merge = folder / MERGED_NAME if merge_lines else None
        existing = [p.name for p in [*(j.out_path for j in jobs), *([merge] if merge else [])]
                    if p.exists() or p.is_symlink()]
        for job in jobs:  # asked below; any other file that appears meanwhile is left alone
            job.may_replace = job.out_path.name in existing
        if existing and not self.ctx.dialogs.question(
            self.panel, "Replace files?", f"{len(existing)} file(s) in {folder} will be replaced, e.g. “{existing[0]}”. Go on?"
        ):
            return False
        synth = self.ctx.synth
        if synth is None:
            return False
        for key in keys:
            queued = self.model.line(key)
            if queued is not None:
                queued.reset()
                queued.state, queued.duration, queued.output = LineState.QUEUED, None, ""
                self.model.changed(key)
        settings = current_settings()
        settings.stream_audio = False
        worker = BatchWorker(synth, jobs, settings, merge, gap_seconds, self,
                             long_options=text_options(self.ctx.settings), batch_size=batch_size,
                             wav_subtype="FLOAT" if self.ctx.settings.wav_float else None)
        worker.merge_may_replace = merge is not None and merge.name in existing
        worker.line_started.connect(self._line_started)
        worker.line_progress.connect(self._line_progress)
        worker.line_done.connect(self._line_done)
        worker.line_failed.connect(self._line_failed)
        worker.failed.connect(lambda msg: self.ctx.dialogs.error(self.panel, "Batch", msg))
        worker.cancelled.connect(self._cancelled)
        worker.merged.connect(lambda path: setattr(self, "_merged", path))
        worker.done.connect(self._all_done)
        self.worker = worker
        self._merged = ""
        self._run_keys = keys
        self._t0 = time.monotonic()
        self._done_chars = 0
        self._total_chars = sum(len(ln.text) for k in keys if (ln := self.model.line(k)) is not None)
        self.model.locked = True
        self.running_changed.emit(True)
        self.progress.setRange(0, 1000)
        self.progress.setValue(0)
        self.progress.setFormat(f"0 of {len(keys)} lines")
        return self.ctx.start_job(worker, self.panel, finished=self._finished)

    def cancel(self) -> None:
        if self.worker is not None:
            self.worker.cancel()
            self.progress.setFormat("Cancelling…")

    def _line_started(self, key: int) -> None:
        line = self.model.line(key)
        if line:
            line.state = LineState.RUNNING
            self.model.changed(key)
            row = self.model.row_of(key)
            self.table.scrollTo(self.model.index(row, 0))

    def _line_progress(self, key: int, frames: int, estimated: int) -> None:
        line = self.model.line(key)
        if line:
            line.frames, line.estimated = frames, estimated
            self._moved.add(key)
            self._progress_soon.ping()

    def _show_progress(self) -> None:
        for key in self._moved:
            self.model.changed(key)
        self._moved.clear()
        self._update_overall()

    def _finish_line(self, key: int) -> None:
        self._moved.discard(key)
        line = self.model.line(key)
        if line:
            self._done_chars += len(line.text)
            self.model.changed(key)
        self._update_overall()

    def _line_done(self, key: int, path: str, seconds: float) -> None:
        line = self.model.line(key)
        if line:
            line.state, line.output, line.duration = LineState.DONE, path, seconds
        self._finish_line(key)

    def _line_failed(self, key: int, message: str) -> None:
        line = self.model.line(key)
        if line:
            line.state, line.error = LineState.FAILED, message
        self._finish_line(key)

    def _update_overall(self) -> None:
        done: float = self._done_chars
        for key in self._run_keys:  # every line generating now counts with its own progress
            line = self.model.line(key)
            if line is not None and line.state == LineState.RUNNING and line.estimated:
                done += len(line.text) * min(1.0, line.frames / max(line.estimated, 1))
        fraction = done / max(self._total_chars, 1)
        self.progress.setValue(int(1000 * fraction))
        finished = sum(1 for k in self._run_keys if (ln := self.model.line(k)) and ln.state in (LineState.DONE, LineState.FAILED))
        text = f"{finished} of {len(self._run_keys)} lines"
        elapsed = time.monotonic() - self._t0
        if fraction > 0.02 and elapsed > 1.0:
            left = elapsed / fraction - elapsed
            text += f" · about {int(left // 60)}:{int(left % 60):02d} left"
        self.progress.setFormat(text)

    def _cancelled(self) -> None:
        self._progress_soon.flush()
        for key in self._run_keys:
            line = self.model.line(key)
            if line and line.state in (LineState.QUEUED, LineState.RUNNING):
                line.state = LineState.CANCELLED
                self.model.changed(key)
        self.progress.setFormat("Cancelled")

    def _all_done(self, ok: int, failed: int) -> None:
        self._progress_soon.flush()  # a pending progress refresh would overwrite the summary below
        self.progress.setValue(1000)
        text = f"Done: {ok} {'line' if ok == 1 else 'lines'} written"
        if failed:
            text += f", {failed} failed (hover the status for the reason)"
        if self._merged:
            text += f", and the merged file {Path(self._merged).name}"
        self.progress.setFormat(text)

    def _finished(self) -> None:
        self.worker = None  # the job runner deletes it
        self.model.locked = False
        self.running_changed.emit(False)
