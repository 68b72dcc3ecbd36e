"""Waveform view: min/max envelope per pixel column, optional selectable range (trim) and a play cursor."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QColor, QImage, QMouseEvent, QPainter, QPaintEvent, QPen
from PySide6.QtWidgets import QSizePolicy, QWidget

from ..coach import to_mono
from ..data.growing_audio import GrowingAudio
from ..engine_adapter import SAMPLE_RATE
from .throttle import Throttle
from .wave_peaks import WavePeaks

_BACKGROUND = 0xFF1E2430  # xRGB
_CENTER = 0xFF3A404B
_PEAK = 0xFF7CC4FF
_RMS = 0xFF2A8BD8


def _fmt(seconds: float) -> str:
    return f"{int(seconds // 60)}:{seconds % 60:04.1f}"


class WaveformView(QWidget):
    selection_changed = Signal()

    def __init__(self, parent: QWidget | None = None, selectable: bool = False, placeholder: str = ""):
        super().__init__(parent)
        self.setObjectName("WaveformView")
        self.selectable = selectable
        self.placeholder = placeholder
        self._audio = GrowingAudio()
        self._sr = SAMPLE_RATE
        self._expected = 0  # samples the view is scaled for while audio is still arriving
        self._selection: tuple[int, int] | None = None
        self._drag_from: int | None = None
        self._cursor = -1
        self._peaks = WavePeaks()
        self._image: tuple[tuple[int, int, int, int], QImage] | None = None
        self._repaint_soon = Throttle(66, self.update, self)  # audio streaming in: ~15 repaints/s at most
        self.setMinimumHeight(70)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.setMouseTracking(False)
        if selectable:
            self.setCursor(Qt.CursorShape.IBeamCursor)
            self.setToolTip("Drag to select the part to keep; double-click to select everything")

    # --- data ---------------------------------------------------------------------------------------------
    @property
    def samplerate(self) -> int:
        return self._sr

    @property
    def samples(self) -> np.ndarray:
        return self._audio.samples

    def set_audio(self, samples: np.ndarray, samplerate: int) -> None:
        self._audio.set(to_mono(samples))
        self._sr = samplerate
        self._expected = 0
        self._selection = None
        self._cursor = -1
        self._peaks = WavePeaks()
        self.selection_changed.emit()
        self.update()

    def finish_stream(self, samples: np.ndarray) -> None:
        """The streamed recording is complete and `samples` is all of it (what was streamed, then the rest): the
        view is scaled to fit it, keeping the envelope made while streaming (a new one takes a pass over every
        sample). Samples that do not start with what was streamed are shown afresh."""
        samples = to_mono(samples)
        shown = self._audio.length
        probe = slice(0, shown, max(1, shown // 256))  # a spot check: the caller passes the same recording
        if len(samples) < shown or not np.array_equal(samples[probe], self._audio.data[probe]):
            self.set_audio(samples, self._sr)
            return
        self.append(samples[shown:])
        self._expected = 0
        self._selection = None
        self._cursor = -1
        self.selection_changed.emit()
        self.update()

    def clear(self) -> None:
        self.set_audio(np.zeros(0, np.float32), self._sr)

    def begin_stream(self, samplerate: int, expected_samples: int) -> None:
        """Start an empty, growing view (audio arriving while it is generated)."""
        self.set_audio(np.zeros(0, np.float32), samplerate)
        self._expected = expected_samples

    def set_expected(self, samples: int) -> None:
        """Scale a growing view for this many samples (it still grows past them if needed)."""
        self._expected = max(samples, self._audio.length)
        self.update()

    def append(self, samples: np.ndarray) -> None:
        # the expected length at once when it is known: one allocation, not a copy at every doubling
        self._audio.append(to_mono(samples), room=max(self._sr, self._expected))
        self._expected = max(self._expected, self._audio.length)
        self._repaint_soon.ping()

    def set_position(self, sample: int) -> None:
        self._cursor = sample
        self.update()

    # --- selection ----------------------------------------------------------------------------------------
    def selection(self) -> tuple[int, int] | None:
        return self._selection

    def set_selection(self, start: int, end: int) -> None:
        start, end = sorted((max(0, start), min(self._audio.length, end)))
        self._selection = None if end - start <= 0 or (start == 0 and end == self._audio.length) else (start, end)
        self.selection_changed.emit()
        self.update()

    def selected_samples(self) -> tuple[int, int]:
        return self._selection or (0, self._audio.length)

    def _span(self) -> int:
        return max(self._audio.length, self._expected, 1)

    def _x_to_sample(self, x: float) -> int:
        return int(np.clip(x / max(self.width(), 1) * self._span(), 0, self._audio.length))

    def _sample_to_x(self, s: int) -> float:
        return s / self._span() * self.width()

    def mousePressEvent(self, e: QMouseEvent) -> None:
        if self.selectable and self._audio.length and e.button() == Qt.MouseButton.LeftButton:
            self._drag_from = self._x_to_sample(e.position().x())
            self._selection = None
            self.update()

    def mouseMoveEvent(self, e: QMouseEvent) -> None:
        if self._drag_from is not None:
            s = self._x_to_sample(e.position().x())
            self._selection = tuple(sorted((self._drag_from, s)))  # type: ignore[assignment]
            self.update()

    def mouseReleaseEvent(self, e: QMouseEvent) -> None:
        if self._drag_from is not None:
            s = self._x_to_sample(e.position().x())
            start = self._drag_from
            self._drag_from = None
            if abs(self._sample_to_x(s) - self._sample_to_x(start)) < 3:
                self._selection = None
                self.selection_changed.emit()
                self.update()
            else:
                self.set_selection(start, s)

    def mouseDoubleClickEvent(self, e: QMouseEvent) -> None:
        if self.selectable:
            self._selection = None
            self.selection_changed.emit()
            self.update()

    # --- painting -----------------------------------------------------------------------------------------
    def _column_peaks(self, width: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per pixel column: min, max and RMS (drawn darker inside the peaks, as audio editors do)."""
        self._peaks.extend(self._audio.data, self._audio.length)
        return self._peaks.columns(self._audio.data, width, self._span())

    def _wave_image(self, w: int, h: int) -> QImage:
        """The envelope as an image made with numpy in one go: no per-column painter calls (keeps paints ~1 ms)."""
        key = (w, h, self._audio.length, self._span())
        if self._image is not None and self._image[0] == key:
            return self._image[1]
        lo, hi, rms = self._column_peaks(w)
        mid, scale = h / 2, h / 2 - 4
        rows = np.arange(h, dtype=np.float32)[:, None]
        top = (mid - hi * scale)[None, :]
        bottom = np.maximum(mid - lo * scale, top + 1)
        r = (np.minimum(rms, np.maximum(hi, -lo)) * scale)[None, :]
        pixels = np.full((h, w), _BACKGROUND, np.uint32)  # opaque: drawImage is then a plain copy
        pixels[int(mid)] = _CENTER
        n = lo.shape[0]
        view = pixels[:, :n]
        view[(rows >= np.floor(top)) & (rows < np.ceil(bottom))] = _PEAK
        view[(rows >= np.floor(mid - r)) & (rows < np.ceil(mid + r)) & (r >= 0.5)] = _RMS
        image = QImage(pixels.tobytes(), w, h, 4 * w, QImage.Format.Format_RGB32).copy()
        self._image = (key, image)
        return image

    def paintEvent(self, event: QPaintEvent) -> None:
        p = QPainter(self)
        w, h = self.width(), self.height()
        if not self._audio.length:
            p.fillRect(self.rect(), QColor("#1e2430"))
            p.setPen(QColor("#8a93a6"))
            p.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter, self.placeholder)
            p.end()
            return
        p.drawImage(0, 0, self._wave_image(w, h))
        if self._selection:
            x0, x1 = (self._sample_to_x(s) for s in self._selection)
            p.fillRect(QRectF(x0, 0, max(1.0, x1 - x0), h), QColor(120, 170, 255, 60))
            shade = QColor(15, 18, 26, 140)  # dim what the trim leaves out
            p.fillRect(QRectF(0, 0, x0, h), shade)
            p.fillRect(QRectF(x1, 0, w - x1, h), shade)
        if 0 <= self._cursor <= self._span():
            x = self._sample_to_x(self._cursor)
            p.setPen(QPen(QColor("#ffcc4d"), 2))
            p.drawLine(QPointF(x, 0), QPointF(x, h))
        label = _fmt(self._audio.length / self._sr)
        if self._selection:
            a, b = self._selection
            label = f"selected {_fmt(a / self._sr)} – {_fmt(b / self._sr)} ({(b - a) / self._sr:.1f} s) of {label}"
        # a dark pill keeps the time readable over loud audio
        text_w = p.fontMetrics().horizontalAdvance(label) + 12
        pill = QRectF(w - text_w - 6, h - 22, text_w, 18)
        p.setPen(Qt.PenStyle.NoPen)
        p.setBrush(QColor(20, 24, 32, 190))
        p.drawRoundedRect(pill, 6, 6)
        p.setPen(QColor("#e3e8f2"))
        p.drawText(pill, Qt.AlignmentFlag.AlignCenter, label)
        p.end()
