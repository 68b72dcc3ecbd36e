"""The batch table: its columns, the model over the batch lines and the cell delegates (a voice or language
picked from a list, the status with a thin progress line under it)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QObject, Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QComboBox, QStyledItemDelegate, QWidget

from ..data.batch_lines import BatchLine, LineState, Row
from .language_combo import language_title

COLUMNS = ["#", "Text", "Voice", "Instruction", "Language", "Status", "Duration", "Output file"]
TEXT, VOICE, INSTRUCT, LANGUAGE, STATUS, DURATION, OUTPUT = 1, 2, 3, 4, 5, 6, 7
STUDIO_INSTRUCTION = "(Studio tab's instruction)"
_ROOT = QModelIndex()
_STATE_COLORS = {LineState.DONE: "#2e9d5b", LineState.FAILED: "#d64541", LineState.RUNNING: "#2f6fde",
                 LineState.CANCELLED: "#8a93a6"}


class BatchModel(QAbstractTableModel):
    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.lines: list[BatchLine] = []
        self.locked = False  # no edits while running
        # whether a line's voice name is one the batch can use now (set by the panel; "" is always usable)
        self.voice_known: Callable[[str], bool] = lambda _name: True
        self._keys = itertools.count(1)

    def voices_changed(self) -> None:
        """The voice library or the model changed: every line's voice is checked again."""
        if self.lines:
            self.dataChanged.emit(self.index(0, VOICE), self.index(len(self.lines) - 1, VOICE))

    def _unknown_voice(self, line: BatchLine) -> bool:
        return bool(line.voice) and not self.voice_known(line.voice)

    def rowCount(self, parent=_ROOT) -> int:
        return 0 if parent.isValid() else len(self.lines)

    def columnCount(self, parent=_ROOT) -> int:
        return len(COLUMNS)

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):
        if role == Qt.ItemDataRole.DisplayRole and orientation == Qt.Orientation.Horizontal:
            return COLUMNS[section]
        if role == Qt.ItemDataRole.ToolTipRole and orientation == Qt.Orientation.Horizontal and section == VOICE:
            return "“(selected voice)” is the voice selected on the Studio tab when the batch runs"
        return None

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        line, col = self.lines[index.row()], index.column()
        if role in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.EditRole):
            if col == 0:
                return str(index.row() + 1)
            if col == TEXT:
                return line.text
            if col == VOICE:
                if role == Qt.ItemDataRole.EditRole:
                    return line.voice
                return f"⚠ {line.voice}" if self._unknown_voice(line) else (line.voice or "(selected voice)")
            if col == INSTRUCT:
                return line.instruct if role == Qt.ItemDataRole.EditRole else (line.instruct or STUDIO_INSTRUCTION)
            if col == LANGUAGE:
                return line.language if role == Qt.ItemDataRole.EditRole else language_title(line.language)
            if col == STATUS:
                return line.status_text()
            if col == DURATION:
                return f"{line.duration:.1f} s" if line.duration is not None else ""
            if col == OUTPUT:
                return Path(line.output).name if line.output else ""
        if role == Qt.ItemDataRole.ToolTipRole:
            if col == STATUS and line.error:
                return line.error
            if col == OUTPUT and line.output:
                return line.output
            if col == TEXT:
                return line.text
            if col == VOICE and not line.voice:
                return "The voice selected on the Studio tab when the batch runs (double-click to pick another)"
            if col == VOICE and self._unknown_voice(line):
                return (f"There is no voice called “{line.voice}” for this model: double-click to pick one, or add "
                        "the voice; as it is, this line fails when the batch runs")
            if col == INSTRUCT:
                return line.instruct or ("The style instruction typed on the Studio tab when the batch runs "
                                         "(double-click to give this line its own)")
        if role == Qt.ItemDataRole.ForegroundRole and col == STATUS and line.state in _STATE_COLORS:
            return QColor(_STATE_COLORS[line.state])
        if role == Qt.ItemDataRole.ForegroundRole and col == VOICE and self._unknown_voice(line):
            return QColor(_STATE_COLORS[LineState.FAILED])
        if role == Qt.ItemDataRole.TextAlignmentRole and col in (0, DURATION):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None

    def flags(self, index):
        base = Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable
        if not self.locked and index.column() in (TEXT, VOICE, INSTRUCT, LANGUAGE):
            base |= Qt.ItemFlag.ItemIsEditable
        return base

    def setData(self, index, value, role=Qt.ItemDataRole.EditRole):
        if role != Qt.ItemDataRole.EditRole or self.locked:
            return False
        line = self.lines[index.row()]
        value = str(value).strip()
        if index.column() == TEXT:
            if not value:
                return False
            line.text = value
        elif index.column() == VOICE:
            line.voice = value
        elif index.column() == INSTRUCT:
            line.instruct = value
        elif index.column() == LANGUAGE:
            line.language = value.lower() or "auto"
        else:
            return False
        line.reset()
        self.dataChanged.emit(self.index(index.row(), 0), self.index(index.row(), len(COLUMNS) - 1))
        return True

    # --- edits -------------------------------------------------------------------------------------------
    def add(self, rows: list[Row] | list[tuple[str, str, str]]) -> None:
        """Rows of (text, voice, language[, instruction])."""
        if not rows:
            return
        first = len(self.lines)
        self.beginInsertRows(QModelIndex(), first, first + len(rows) - 1)
        for text, voice, language, *instruct in rows:
            self.lines.append(BatchLine(next(self._keys), text, voice, language, instruct[0] if instruct else ""))
        self.endInsertRows()

    def remove(self, rows: list[int]) -> None:
        for r in sorted(set(rows), reverse=True):
            self.beginRemoveRows(QModelIndex(), r, r)
            del self.lines[r]
            self.endRemoveRows()

    def move(self, row: int, delta: int) -> int:
        target = row + delta
        if not (0 <= row < len(self.lines) and 0 <= target < len(self.lines)):
            return row
        dest = target + 1 if delta > 0 else target
        self.beginMoveRows(QModelIndex(), row, row, QModelIndex(), dest)
        self.lines.insert(target, self.lines.pop(row))
        self.endMoveRows()
        return target

    def row_of(self, key: int) -> int:
        return next((i for i, line in enumerate(self.lines) if line.key == key), -1)

    def line(self, key: int) -> BatchLine | None:
        row = self.row_of(key)
        return self.lines[row] if row >= 0 else None

    def changed(self, key: int) -> None:
        row = self.row_of(key)
        if row >= 0:
            self.dataChanged.emit(self.index(row, 0), self.index(row, len(COLUMNS) - 1))


class ComboDelegate(QStyledItemDelegate):
    """Edits a cell with an editable combo box (voice names or languages)."""

    def __init__(self, choices: Callable[[], list[tuple[str, str]]], parent=None):
        super().__init__(parent)
        self.choices = choices

    def createEditor(self, parent, option, index):
        combo = QComboBox(parent)
        for label, value in self.choices():
            combo.addItem(label, value)
        return combo

    def setEditorData(self, editor: QWidget, index):
        assert isinstance(editor, QComboBox)  # made by createEditor
        value = index.data(Qt.ItemDataRole.EditRole) or ""
        i = editor.findData(value)
        editor.setCurrentIndex(max(i, 0))

    def setModelData(self, editor: QWidget, model, index):
        assert isinstance(editor, QComboBox)  # made by createEditor
        model.setData(index, editor.currentData(), Qt.ItemDataRole.EditRole)


class StatusDelegate(QStyledItemDelegate):
    """The status text, with a thin progress line under it while the line is being generated."""

    def __init__(self, model: BatchModel, parent=None):
        super().__init__(parent)
        self.model = model

    def paint(self, painter, option, index):
        super().paint(painter, option, index)
        line = self.model.lines[index.row()]
        if line.state != LineState.RUNNING or not line.estimated:
            return
        r = option.rect.adjusted(6, 0, -8, -4)
        fraction = min(1.0, line.frames / max(line.estimated, 1))
        painter.save()
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(QColor("#e4e6f0"))
        painter.drawRoundedRect(r.x(), r.bottom() - 3, r.width(), 4, 2, 2)
        painter.setBrush(QColor("#4f46e5"))
        painter.drawRoundedRect(r.x(), r.bottom() - 3, int(r.width() * fraction), 4, 2, 2)
        painter.restore()
