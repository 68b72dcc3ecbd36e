"""Shows the reference coach's notes (length, clipping, silence, level) under the reference waveform."""

from __future__ import annotations

import numpy as np
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from ..coach import CoachNote, analyze_reference

_MARK = {"ok": ("✓", "#2e9d5b"), "warn": ("!", "#c98a00"), "bad": ("✕", "#d64541")}


class ReferenceCoach(QWidget):
    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("ReferenceCoach")
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self._layout.setSpacing(2)
        self.notes: list[CoachNote] = []

    def analyze(self, samples: np.ndarray, samplerate: int) -> list[CoachNote]:
        self.set_notes(analyze_reference(samples, samplerate))
        return self.notes

    def set_notes(self, notes: list[CoachNote]) -> None:
        self.notes = list(notes)
        while self._layout.count():
            item = self._layout.takeAt(0)
            widget = item.widget() if item is not None else None
            if widget:
                widget.hide()  # deleteLater alone leaves it painted until the next event loop turn
                widget.deleteLater()
        for note in notes:
            mark, color = _MARK.get(note.level, _MARK["warn"])
            label = QLabel(f"<span style='color:{color}; font-weight:600'>{mark}</span>&nbsp; {note.text}")
            label.setWordWrap(True)
            label.setProperty("coachLevel", note.level)
            self._layout.addWidget(label)

    def has_blocking_problem(self) -> bool:
        return any(n.level == "bad" for n in self.notes)
