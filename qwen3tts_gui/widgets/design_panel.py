"""VoiceDesign models: describe a voice, preview it, regenerate until it fits, then keep it as a voice.

"Save as voice" keeps the designed audio and the sentence it speaks in the voice library. With a Base model
that voice is cloned from that recording (design once, then clone: the workflow the model's authors recommend
for a consistent character).
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from ..context import AppContext
from ..data.takes import Take
from ..diagnostics import user_message
from ..engine_adapter import EngineError, designed_voice

DEFAULT_PREVIEW = "Hello! This is how my voice sounds. I hope you like it."


class DesignPanel(QWidget):
    voice_changed = Signal()
    preview_requested = Signal(bool)  # True: regenerate (a new seed for the same description)

    def __init__(self, ctx: AppContext, parent: QWidget | None = None):
        super().__init__(parent)
        self.ctx = ctx
        self._last: tuple[Take, str] | None = None  # (take, description) of the last preview, for "Save as voice"
        title = QLabel("Design a voice")
        title.setObjectName("SectionTitle")
        hint = QLabel("Describe the voice: who speaks, how old, how it sounds, the mood.")
        hint.setObjectName("Muted")
        hint.setWordWrap(True)
        self.description = QPlainTextEdit()
        self.description.setTabChangesFocus(True)
        self.description.setObjectName("DesignDescription")
        self.description.setPlaceholderText("e.g. A warm, low female voice, calm and a little husky.")
        self.description.setMaximumHeight(110)
        self.description.textChanged.connect(self.voice_changed.emit)
        self.preview_text = QLineEdit(DEFAULT_PREVIEW)
        self.preview_text.setToolTip("The sentence the preview speaks (and the saved voice's transcript)")
        self.preview_btn = QPushButton("Preview")
        self.preview_btn.setObjectName("PrimaryButton")
        self.preview_btn.clicked.connect(lambda: self.preview_requested.emit(False))
        self.regenerate_btn = QPushButton("Regenerate")
        self.regenerate_btn.setToolTip("Another voice from the same description (a new seed)")
        self.regenerate_btn.clicked.connect(lambda: self.preview_requested.emit(True))
        self.save_btn = QPushButton("Save as voice…")
        self.save_btn.setToolTip("Keep the last preview as a voice to clone with a Base model")
        self.save_btn.clicked.connect(self.save_as_voice)
        self.status = QLabel("")
        self.status.setObjectName("Muted")
        self.status.setWordWrap(True)

        buttons = QHBoxLayout()
        buttons.addWidget(self.preview_btn)
        buttons.addWidget(self.regenerate_btn)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(title)
        layout.addWidget(hint)
        layout.addWidget(self.description)
        layout.addWidget(QLabel("Preview sentence"))
        layout.addWidget(self.preview_text)
        layout.addLayout(buttons)
        layout.addWidget(self.save_btn)
        layout.addWidget(self.status)
        layout.addStretch(1)
        self._update_buttons()

    def describe(self) -> str:
        return self.description.toPlainText().strip()

    def selected_name(self) -> str:
        text = " ".join(self.describe().split())
        return ("Designed: " + (text if len(text) <= 32 else text[:31] + "…")) if text else ""

    def preview_sentence(self) -> str:
        return self.preview_text.text().strip() or DEFAULT_PREVIEW

    def designed(self, take: Take, description: str) -> None:
        """The main window reports each finished preview (a Take) made from `description`."""
        self._last = (take, description)
        self.status.setText(f"Preview #{take.number} ready: play it in Output, regenerate, or save it as a voice.")
        self._update_buttons()

    def save_as_voice(self) -> None:
        if self._last is None or self.ctx.synth is None:
            self.ctx.dialogs.error(self, "Nothing to save", "Make a preview first.")
            return
        take, description = self._last
        name = self.ctx.dialogs.get_text(self, "Save as voice", "Name of the new voice:",
                                         " ".join(description.split())[:40])
        if name is None:
            return
        try:
            voice = designed_voice(take.audio, take.text, description, self.ctx.synth.model_id,
                                   name=name.strip(), language=take.language)
            path = self.ctx.library.add(voice)
        except (EngineError, OSError) as e:
            self.ctx.dialogs.error(self, "Cannot save the voice", user_message(e, "saving the voice"))
            return
        self.ctx.voices_changed.emit()
        self.status.setText(f"Saved “{voice.name}” ({path.name}). Open a Base model to use it: it is cloned from "
                            "this recording.")

    def set_busy(self, busy: bool) -> None:
        self._busy = busy
        self._update_buttons()

    def _update_buttons(self) -> None:
        busy = getattr(self, "_busy", False)
        self.preview_btn.setEnabled(not busy)
        self.regenerate_btn.setEnabled(not busy and self._last is not None)
        self.save_btn.setEnabled(not busy and self._last is not None)
