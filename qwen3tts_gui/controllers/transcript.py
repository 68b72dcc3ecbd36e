"""Writing down a new voice's reference: the installed Whisper model transcribes it on a worker thread.

This is not the app's one engine job (AppContext.start_job): the recogniser has networks of its own, so loading a
reference while a text is being spoken transcribes it without a "Busy" dialog. One transcription runs at a time;
a newer reference replaces the one waiting, and only the newest reference's result is reported.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PySide6.QtCore import QObject, Signal

from ..context import AppContext
from ..engine_adapter import TranscriberContract
from ..workers import ProgressWorker


class TranscriptWriter(QObject):
    progress = Signal(float)  # 0..1 of the current reference
    heard = Signal(object)  # engine Transcript of the newest reference
    failed = Signal(str)  # one line: the model or the audio could not be used
    running_changed = Signal(bool)

    def __init__(self, ctx: AppContext, parent: QObject | None = None):
        super().__init__(parent)
        self.ctx = ctx
        self._loaded: tuple[Path, TranscriberContract] | None = None  # read in the worker; one worker at a time
        self._worker: ProgressWorker | None = None
        self._waiting: tuple[int, Path, np.ndarray, int, str | None] | None = None
        self._ticket = 0  # the newest reference's number: results of older ones are dropped

    @property
    def running(self) -> bool:
        return self._worker is not None or self._waiting is not None

    def recogniser(self) -> Path | None:
        """The Whisper model that would write the words down, or None without one."""
        return self.ctx.find_recogniser()

    def start(self, samples: np.ndarray, samplerate: int, language: str | None = None) -> bool:
        """Transcribe this reference (n,) or (n, channels) in `language` (a name or code; None: detect it);
        False without a Whisper model installed."""
        path = self.recogniser()
        if path is None:
            return False
        self._ticket += 1
        self._waiting = (self._ticket, path, np.array(samples, np.float32), int(samplerate), language)
        if self._worker is not None:
            self._worker.cancel()  # the waiting reference starts when it has stopped
        else:
            self._start_waiting()
        self.running_changed.emit(True)
        return True

    def cancel(self) -> None:
        """Stop now: nothing more is reported for the current reference."""
        was_running = self.running
        self._ticket += 1
        self._waiting = None
        if self._worker is not None:
            self._worker.cancel()
        if was_running:
            self.running_changed.emit(False)

    def shutdown(self, ms: int = 30000) -> None:
        """Cancel and wait for the thread (a QThread must not be destroyed while it runs)."""
        self.cancel()
        if self._worker is not None:
            self._worker.wait(ms)

    def _start_waiting(self) -> None:
        assert self._waiting is not None
        ticket, path, samples, rate, language = self._waiting
        self._waiting = None

        def work(progress, cancel):
            if self._loaded is None or self._loaded[0] != path:
                self._loaded = None
                progress(0.0, "loading the speech recognition model")
                self._loaded = (path, self.ctx.open_transcriber(path))
            mono = samples.mean(axis=1) if samples.ndim == 2 else samples
            return self._loaded[1].transcribe((mono, rate), language=language, progress=progress, cancel=cancel)

        worker = ProgressWorker(work, "writing down the reference", self)

        def report(signal):  # only the newest reference's outcome is reported
            return lambda value, *_: signal.emit(value) if ticket == self._ticket else None

        worker.progress.connect(report(self.progress))
        worker.done.connect(report(self.heard))
        worker.failed.connect(report(self.failed))
        worker.finished.connect(self._finished)
        self._worker = worker
        worker.start()

    def _finished(self) -> None:
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.deleteLater()
        if self._waiting is not None:
            self._start_waiting()
        else:
            self.running_changed.emit(False)
