"""Live view of the codec tokens: 16 codebook rows by frames, each cell coloured by its token id.

New frames appear on the right; the view follows them unless the user scrolled back.
"""

from __future__ import annotations

import colorsys

import numpy as np
from PySide6.QtCore import QRect, QSize, Qt
from PySide6.QtGui import QColor, QImage, QMouseEvent, QPainter, QPaintEvent
from PySide6.QtWidgets import QScrollBar, QVBoxLayout, QWidget

from ..engine_adapter import FRAME_RATE

ROWS = 16
GUTTER = 28


def _palette(size: int = 4096) -> np.ndarray:
    """id -> 0xffRRGGBB; neighbouring ids get distant hues (golden-ratio walk) so patterns stand out."""
    out = np.empty(size, np.uint32)
    for i in range(size):
        h = (i * 0.6180339887) % 1.0
        s = 0.45 + 0.4 * ((i * 7) % 11) / 10
        v = 0.62 + 0.33 * ((i * 3) % 7) / 6
        r, g, b = colorsys.hsv_to_rgb(h, s, v)
        out[i] = 0xFF000000 | (int(r * 255) << 16) | (int(g * 255) << 8) | int(b * 255)
    return out


PALETTE = _palette()


class _Canvas(QWidget):
    def __init__(self, view: TokenView):
        super().__init__(view)
        self.view = view
        self.setMouseTracking(True)
        self.setMinimumHeight(ROWS * 6)

    def sizeHint(self) -> QSize:
        return QSize(400, ROWS * 7)

    def paintEvent(self, event: QPaintEvent) -> None:
        self.view._paint(self)

    def mouseMoveEvent(self, e: QMouseEvent) -> None:
        self.view._hover(self, e.position().x(), e.position().y())


class TokenView(QWidget):
    def __init__(self, parent: QWidget | None = None, cell_width: int = 5):
        super().__init__(parent)
        self.setObjectName("TokenView")
        self.cell_width = cell_width
        self._codes = np.zeros((256, ROWS), np.int64)
        self._image = QImage(256, ROWS, QImage.Format.Format_RGB32)
        self._image.fill(QColor("#1e2430"))
        self._frames = 0
        self._following = True
        self._canvas = _Canvas(self)
        self._bar = QScrollBar(Qt.Orientation.Horizontal, self)
        self._bar.setRange(0, 0)
        self._bar.valueChanged.connect(self._canvas.update)
        # follow new frames unless the user scrolled back (range growth alone does not change the value)
        self._bar.valueChanged.connect(lambda v: setattr(self, "_following", v >= self._bar.maximum()))
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(0)
        lay.addWidget(self._canvas, 1)
        lay.addWidget(self._bar)
        self.setToolTip("Codec tokens: one column per 80 ms frame, one row per codebook, colour = token id")

    @property
    def frames(self) -> int:
        return self._frames

    def codes(self) -> np.ndarray:
        return self._codes[: self._frames].copy()

    def clear(self) -> None:
        self._frames = 0
        self._following = True
        self._image.fill(QColor("#1e2430"))
        self._update_bar(follow=True)
        self._canvas.update()

    def set_codes(self, codes: np.ndarray) -> None:
        self.clear()
        for row in np.asarray(codes).reshape(-1, ROWS):
            self.add_frame(row)

    def add_frame(self, codes: np.ndarray, update: bool = True) -> None:
        """Add one frame; with update=False the caller repaints later with refresh() (cheap per frame)."""
        codes = np.asarray(codes, np.int64).reshape(ROWS)
        if self._frames >= len(self._codes):
            self._grow()
        self._codes[self._frames] = codes
        self._pixels()[:, self._frames] = PALETTE[np.clip(codes, 0, len(PALETTE) - 1)]
        self._frames += 1
        if update:
            self.refresh()

    def refresh(self) -> None:
        self._update_bar(self._following)
        self._canvas.update()

    def _pixels(self) -> np.ndarray:
        """The image's memory as a (16, capacity) uint32 array (one pixel per token)."""
        width = self._image.width()
        return np.frombuffer(self._image.bits(), np.uint32).reshape(ROWS, self._image.bytesPerLine() // 4)[:, :width]

    def _grow(self) -> None:
        n = len(self._codes) * 2
        codes = np.zeros((n, ROWS), np.int64)
        codes[: self._frames] = self._codes[: self._frames]
        self._codes = codes
        image = QImage(n, ROWS, QImage.Format.Format_RGB32)
        image.fill(QColor("#1e2430"))
        p = QPainter(image)
        p.drawImage(0, 0, self._image)
        p.end()
        self._image = image

    def _visible_frames(self) -> int:
        return max(1, (self._canvas.width() - GUTTER) // self.cell_width)

    def _update_bar(self, follow: bool) -> None:
        maximum = max(0, self._frames - self._visible_frames())
        self._bar.setRange(0, maximum)
        self._bar.setPageStep(self._visible_frames())
        if follow:
            self._bar.setValue(maximum)

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._update_bar(follow=self._following)

    def first_visible(self) -> int:
        return self._bar.value()

    def _paint(self, canvas: QWidget) -> None:
        p = QPainter(canvas)
        w, h = canvas.width(), canvas.height()
        p.fillRect(0, 0, w, h, QColor("#1e2430"))
        row_h = h / ROWS
        p.setPen(QColor("#8a93a6"))
        font = p.font()
        # readable labels (9 px or more): every row when rows are tall enough, else every third
        font.setPixelSize(max(9, min(11, int(row_h) - 1)))
        p.setFont(font)
        for r in range(0, ROWS, 1 if row_h >= 11 else 3):
            top = min(max(int((r + 0.5) * row_h) - 6, 0), h - 12)  # centred on its row, inside the view
            p.drawText(QRect(0, top, GUTTER - 4, 12),
                       Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter, str(r))
        first = self.first_visible()
        count = min(self._visible_frames(), self._frames - first)
        if count > 0:
            src = QRect(first, 0, count, ROWS)
            dst = QRect(GUTTER, 0, count * self.cell_width, h)
            p.drawImage(dst, self._image, src)
        else:
            p.drawText(QRect(GUTTER, 0, w - GUTTER, h), Qt.AlignmentFlag.AlignCenter,
                       "Codec tokens appear here while generating")
        p.end()

    def _hover(self, canvas: QWidget, x: float, y: float) -> None:
        frame = self.first_visible() + int((x - GUTTER) // self.cell_width)
        row = int(y / max(canvas.height(), 1) * ROWS)
        if x >= GUTTER and 0 <= frame < self._frames and 0 <= row < ROWS:
            canvas.setToolTip(f"frame {frame} ({frame / FRAME_RATE:.2f} s), codebook {row}: token {self._codes[frame, row]}")
        else:
            canvas.setToolTip(self.toolTip())
