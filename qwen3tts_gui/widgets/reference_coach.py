"""Shows the reference coach's notes under the reference waveform: the clip's (length, clipping, silence, level)
and its transcript's, each with its one-click fix where there is one."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from ..coach import CoachNote, analyze_reference

_MARK = {"ok": ("✓", "#2e9d5b"), "warn": ("!", "#c98a00"), "bad": ("✕", "#d64541")}


class ReferenceCoach(QWidget):
    fix = Signal(str)  # a note's action (CoachNote.action), asked for by its button

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("ReferenceCoach")
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self._layout.setSpacing(2)
        self.clip_notes: list[CoachNote] = []
        self.transcript_notes: list[CoachNote] = []
        self.fix_buttons: dict[str, QPushButton] = {}  # by action, for the keyboard and tests

    @property
    def notes(self) -> list[CoachNote]:
        return self.clip_notes + self.transcript_notes

    def analyze(self, samples: np.ndarray, samplerate: int) -> list[CoachNote]:
        self.set_notes(analyze_reference(samples, samplerate))
        return self.notes

    def set_notes(self, notes: list[CoachNote]) -> None:
        """The clip's notes (the transcript's stay)."""
        self.clip_notes = list(notes)
        self._show()

    def set_transcript_notes(self, notes: list[CoachNote]) -> None:
        self.transcript_notes = list(notes)
        self._show()

    def _show(self) -> None:
        while self._layout.count():
            item = self._layout.takeAt(0)
            widget = item.widget() if item is not None else None
            if widget:
                widget.hide()  # deleteLater alone leaves it painted until the next event loop turn
                widget.deleteLater()
        self.fix_buttons = {}
        for note in self.notes:
            mark, color = _MARK.get(note.level, _MARK["warn"])
            label = QLabel(f"<span style='color:{color}; font-weight:600'>{mark}</span>&nbsp; {note.text}")
            label.setWordWrap(True)
            label.setProperty("coachLevel", note.level)
            if not note.fix:
                self._layout.addWidget(label)
                continue
            row = QWidget()
            lay = QHBoxLayout(row)
            lay.setContentsMargins(0, 0, 0, 0)
            lay.addWidget(label, 1)
            button = QPushButton(note.fix)
            button.setObjectName("CoachFix")
            button.clicked.connect(lambda _=False, action=note.action: self.fix.emit(action))
            lay.addWidget(button)
            self.fix_buttons[note.action] = button
            self._layout.addWidget(row)

    def has_blocking_problem(self) -> bool:
        return any(n.level == "bad" for n in self.notes)
