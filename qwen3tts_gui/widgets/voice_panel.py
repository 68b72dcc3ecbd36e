"""The voice column: the voice library above, the new-voice editor below, and drops of files onto either."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QVBoxLayout, QWidget

from ..context import AppContext
from ..data.voices import SUFFIX, VoiceEntry
from ..engine_adapter import Voice
from .new_voice_editor import NewVoiceEditor
from .voice_library import VoiceLibraryView


class VoicePanel(QWidget):
    voice_changed = Signal()  # the selected voice changed

    def __init__(self, ctx: AppContext, parent: QWidget | None = None):
        super().__init__(parent)
        self.ctx = ctx
        self.library = VoiceLibraryView(ctx)
        self.editor = NewVoiceEditor(ctx)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(6)
        lay.addWidget(self.library, 1)
        lay.addWidget(self.editor)

        self.setAcceptDrops(True)
        self.library.selection_changed.connect(self.voice_changed)
        self.editor.created.connect(lambda path: self.library.refresh(select=path))
        ctx.model_changed.connect(self._model_changed)
        ctx.busy_changed.connect(lambda _: self._update_buttons())
        ctx.voices_changed.connect(self.refresh)
        ctx.player.playing_changed.connect(lambda _: self._update_buttons())
        self._model_changed()
        self.refresh()

    # --- what the window and the batch use -----------------------------------------------------------------
    def refresh(self, select: Path | None = None) -> None:
        self.library.refresh(select)

    def selected_entry(self) -> VoiceEntry | None:
        return self.library.selected_entry()

    def selected_name(self) -> str:
        return self.library.selected_name()

    def load_selected(self, then: Callable[[], object] | None = None) -> Voice | None:
        return self.library.load_selected(then)

    def voice_names(self) -> list[str]:
        return self.library.voice_names()

    def load_by_name(self, name: str) -> Voice:
        return self.library.load_by_name(name)

    def entry_by_name(self, name: str):
        return self.library.entry_by_name(name)

    def import_voice(self) -> None:
        self.library.import_voice()

    def export_selected(self) -> None:
        self.library.export_selected()

    def choose_reference_file(self) -> None:
        self.editor.choose_reference_file()

    def load_reference_file(self, path: Path) -> bool:
        return self.editor.load_reference_file(path)

    def toggle_record(self) -> None:
        self.editor.toggle_record()

    def stop_recording(self) -> None:
        self.editor.stop_recording()

    # --- drag and drop: an audio file starts a new voice, a .qvoice file is imported -------------------
    def dragEnterEvent(self, event) -> None:
        if any(u.isLocalFile() for u in event.mimeData().urls()):
            event.acceptProposedAction()

    def dropEvent(self, event) -> None:
        paths = [Path(u.toLocalFile()) for u in event.mimeData().urls() if u.isLocalFile()]
        if not paths:
            return
        event.acceptProposedAction()
        path = paths[0]
        if path.suffix.lower() == SUFFIX:
            self.library.import_path(path)
        elif not self.editor.recorder.recording:
            self.editor.load_reference_file(path)

    # --- state -------------------------------------------------------------------------------------------
    def _model_changed(self) -> None:
        self.editor.set_languages(self.ctx.synth.languages if self.ctx.synth is not None else ["auto"])
        if self.library.list.count():
            self.refresh()
        self._update_buttons()

    def _update_buttons(self) -> None:
        self.library.update_buttons()
        self.editor.update_buttons()
