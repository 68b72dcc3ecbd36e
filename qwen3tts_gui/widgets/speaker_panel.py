"""CustomVoice models: pick one of the model's preset speakers, optionally with a style instruction.

The 1.7B CustomVoice model follows the instruction; the 0.6B one ignores it (the official implementation drops
it), so the field is disabled there and says why.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QLabel, QListWidget, QListWidgetItem, QPlainTextEdit, QVBoxLayout, QWidget

from ..context import AppContext

INSTRUCT_IGNORED = ("This 0.6B CustomVoice model ignores style instructions (the official implementation drops "
                    "them). The 1.7B CustomVoice model follows them.")


class SpeakerPanel(QWidget):
    voice_changed = Signal()

    def __init__(self, ctx: AppContext, parent: QWidget | None = None):
        super().__init__(parent)
        self.ctx = ctx
        title = QLabel("Speaker")
        title.setObjectName("SectionTitle")
        self.list = QListWidget()
        self.list.setObjectName("SpeakerList")
        self.list.currentItemChanged.connect(lambda *_: self._selection_changed())
        self.details = QLabel("")
        self.details.setObjectName("Muted")
        self.details.setWordWrap(True)
        instruct_title = QLabel("Style instruction (optional)")
        instruct_title.setObjectName("SectionTitle")
        self.instruct_edit = QPlainTextEdit()
        self.instruct_edit.setTabChangesFocus(True)
        self.instruct_edit.setObjectName("InstructEdit")
        self.instruct_edit.setPlaceholderText("e.g. Speak slowly and sadly, almost whispering.")
        self.instruct_edit.setMaximumHeight(90)
        self.instruct_note = QLabel("")
        self.instruct_note.setObjectName("Muted")
        self.instruct_note.setWordWrap(True)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(title)
        layout.addWidget(self.list, 1)
        layout.addWidget(self.details)
        layout.addWidget(instruct_title)
        layout.addWidget(self.instruct_edit)
        layout.addWidget(self.instruct_note)

    def set_model(self, synth) -> None:
        """Fill the list from the loaded CustomVoice model (keeps the selected speaker when it still exists)."""
        keep = self.selected_speaker()
        self.list.blockSignals(True)
        self.list.clear()
        for speaker in synth.kind.speakers if synth is not None else []:
            item = QListWidgetItem(speaker.label)
            item.setData(Qt.ItemDataRole.UserRole, speaker.name)
            if speaker.dialect:
                item.setToolTip(f"Speaks {speaker.dialect_name} when the language is Chinese or Auto-detect.")
            self.list.addItem(item)
            if speaker.name == keep:
                self.list.setCurrentItem(item)
        if self.list.currentItem() is None and self.list.count():
            self.list.setCurrentRow(0)
        self.list.blockSignals(False)
        honours = bool(synth is not None and synth.kind.honours_instruct)
        self.instruct_edit.setEnabled(honours)
        self.instruct_edit.setToolTip("" if honours else INSTRUCT_IGNORED)
        self.instruct_note.setText("" if honours else INSTRUCT_IGNORED)
        self._selection_changed()

    def selected_speaker(self) -> str | None:
        item = self.list.currentItem()
        return item.data(Qt.ItemDataRole.UserRole) if item else None

    def selected_name(self) -> str:
        return self.selected_speaker() or ""

    def speaker_names(self) -> list[str]:
        return [self.list.item(i).data(Qt.ItemDataRole.UserRole) for i in range(self.list.count())]

    def instruct(self) -> str | None:
        """The instruction to send (None when empty or when this model ignores it)."""
        text = self.instruct_edit.toPlainText().strip()
        return text if text and self.instruct_edit.isEnabled() else None

    def _selection_changed(self) -> None:
        item = self.list.currentItem()
        self.details.setText(item.toolTip() if item is not None else "This model lists no speakers.")
        self.voice_changed.emit()
