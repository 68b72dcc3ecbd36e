"""A horizontal input level meter (dBFS) with a short peak hold."""

from __future__ import annotations

import time

from PySide6.QtCore import QRectF, QSize
from PySide6.QtGui import QColor, QLinearGradient, QPainter, QPaintEvent
from PySide6.QtWidgets import QWidget

FLOOR_DB = -60.0


class LevelMeter(QWidget):
    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.level_db = FLOOR_DB
        self.peak_db = FLOOR_DB
        self._peak_time = 0.0
        self.setMinimumHeight(12)
        self.setToolTip("Input level; aim for peaks between -12 and -3 dBFS")

    def sizeHint(self) -> QSize:
        return QSize(200, 14)

    def set_level(self, db: float) -> None:
        db = max(FLOOR_DB, min(0.0, db))
        self.level_db = db
        now = time.monotonic()
        if db >= self.peak_db or now - self._peak_time > 1.5:
            self.peak_db, self._peak_time = db, now
        self.update()

    def reset(self) -> None:
        self.level_db = self.peak_db = FLOOR_DB
        self.update()

    def _x(self, db: float) -> float:
        return (db - FLOOR_DB) / -FLOOR_DB * self.width()

    def paintEvent(self, event: QPaintEvent) -> None:
        p = QPainter(self)
        r = QRectF(self.rect())
        p.fillRect(r, QColor("#2a303c"))
        grad = QLinearGradient(0, 0, r.width(), 0)
        grad.setColorAt(0.0, QColor("#3fbf6f"))
        grad.setColorAt(0.75, QColor("#3fbf6f"))
        grad.setColorAt(0.88, QColor("#f2c14e"))
        grad.setColorAt(1.0, QColor("#e5534b"))
        p.fillRect(QRectF(0, 0, self._x(self.level_db), r.height()), grad)
        p.fillRect(QRectF(self._x(self.peak_db) - 1, 0, 2, r.height()), QColor("#ffffff"))
        p.end()
