"""Recording a reference voice from the microphone through an audio backend (audio_io.AudioBackend).

PortAudio calls our callback on its own thread: it only appends numpy blocks under a lock; level and elapsed
time are emitted from a QTimer poll on the GUI thread."""

from __future__ import annotations

import threading
import time

import numpy as np
from PySide6.QtCore import QObject, QTimer, Signal

from .audio_io import AudioBackend, AudioStream, AudioUnavailable, close_stream
from .diagnostics import log


class Recorder(QObject):
    """Records mono from the default input at the device's own rate; the engine resamples later."""

    level = Signal(float)  # peak dBFS since the last report
    elapsed = Signal(float)  # seconds recorded
    stopped = Signal(object, int)  # samples (n,) float32, sample rate
    error = Signal(str)

    MAX_SECONDS = 60.0

    def __init__(self, backend: AudioBackend, parent: QObject | None = None):
        super().__init__(parent)
        self.backend = backend
        self._lock = threading.Lock()
        self._blocks: list[np.ndarray] = []
        self._count = 0
        self._peak = 0.0
        self._stream: AudioStream | None = None
        self.samplerate = 48000
        self._timer = QTimer(self)
        self._timer.setInterval(50)
        self._timer.timeout.connect(self._poll)

    @property
    def recording(self) -> bool:
        return self._stream is not None

    def problem(self) -> str | None:
        return self.backend.input_problem()

    def start(self) -> bool:
        if self._stream is not None:
            return True
        with self._lock:
            self._blocks, self._count, self._peak = [], 0, 0.0
        try:
            self.samplerate = self.backend.input_samplerate()
            self._stream = self.backend.open_input(self.samplerate, self._consume)
            self._stream.start()
        except AudioUnavailable as e:
            self._stream = None
            self.error.emit(str(e))
            return False
        except Exception as e:
            log.exception("audio input failed")
            self._stream = None
            self.error.emit(f"Recording failed: {e}")
            return False
        self._started = time.monotonic()
        self._timer.start()
        return True

    def stop(self) -> tuple[np.ndarray, int]:
        stream, self._stream = self._stream, None
        self._timer.stop()
        if stream is not None:
            close_stream(stream, "input")
        with self._lock:
            samples = np.concatenate(self._blocks) if self._blocks else np.zeros(0, np.float32)
            self._blocks = []
        if stream is not None:
            self.stopped.emit(samples, self.samplerate)
        return samples, self.samplerate

    def _consume(self, block: np.ndarray) -> None:  # audio thread
        with self._lock:
            self._blocks.append(block)
            self._count += len(block)
            if len(block):
                self._peak = max(self._peak, float(np.max(np.abs(block))))

    def _poll(self) -> None:
        with self._lock:
            peak, self._peak = self._peak, 0.0
            seconds = self._count / self.samplerate
        self.level.emit(20 * np.log10(max(peak, 1e-6)))
        self.elapsed.emit(seconds)
        if seconds >= self.MAX_SECONDS:
            self.stop()
