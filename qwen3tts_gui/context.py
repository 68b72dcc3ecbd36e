"""What the windows and panels share: settings, voice library, audio, dialogs, the loaded model, busy state."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import QFileDialog, QInputDialog, QMessageBox, QWidget

from .audio_io import AudioBackend, Player, Recorder
from .engine_adapter import SynthesizerLike, SynthFactory, open_synthesizer
from .paths import models_dir, voices_dir
from .settings import Settings
from .voices import VoiceLibrary


class Dialogs:
    """Every modal question the app asks goes through here, so tests can answer them without a human."""

    def error(self, parent: QWidget | None, title: str, text: str) -> None:
        QMessageBox.warning(parent, title, text)

    def info(self, parent: QWidget | None, title: str, text: str) -> None:
        QMessageBox.information(parent, title, text)

    def notice(self, parent: QWidget | None, title: str, text: str) -> None:
        """A message that does not block: the window stays usable while it is shown."""
        box = QMessageBox(QMessageBox.Icon.Information, title, text, QMessageBox.StandardButton.Ok, parent)
        box.setModal(False)
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        box.show()

    def question(self, parent: QWidget | None, title: str, text: str) -> bool:
        buttons = QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No
        answer = QMessageBox.question(parent, title, text, buttons, QMessageBox.StandardButton.No)
        return answer == QMessageBox.StandardButton.Yes

    def open_file(self, parent: QWidget | None, caption: str, folder: str, filters: str) -> str:
        return QFileDialog.getOpenFileName(parent, caption, folder, filters)[0]

    def save_file(self, parent: QWidget | None, caption: str, path: str, filters: str) -> str:
        # Overwrite is confirmed by the app itself (same wording everywhere, and testable).
        options = QFileDialog.Option.DontConfirmOverwrite
        return QFileDialog.getSaveFileName(parent, caption, path, filters, options=options)[0]

    def open_dir(self, parent: QWidget | None, caption: str, folder: str) -> str:
        return QFileDialog.getExistingDirectory(parent, caption, folder)

    def get_text(self, parent: QWidget | None, title: str, label: str, text: str = "") -> str | None:
        value, ok = QInputDialog.getText(parent, title, label, text=text)
        return value if ok else None


class AppContext(QObject):
    model_changed = Signal()
    busy_changed = Signal(bool)
    voices_changed = Signal()

    def __init__(
        self,
        settings: Settings,
        audio: AudioBackend,
        dialogs: Dialogs | None = None,
        open_synth: SynthFactory = open_synthesizer,
        library: VoiceLibrary | None = None,
        parent: QObject | None = None,
    ):
        super().__init__(parent)
        self.settings = settings
        self.audio = audio
        self.dialogs = dialogs or Dialogs()
        self.open_synth = open_synth
        self.library = library or VoiceLibrary(Path(settings.voices_dir) if settings.voices_dir else voices_dir())
        self.player = Player(audio, self)
        self.synth: SynthesizerLike | None = None
        self.model_path: Path | None = None
        self.busy: str | None = None  # what the engine is doing now ("generating", "running the batch"...)

    def models_folder(self) -> Path:
        """Where imported checkpoints and the demo model are converted to."""
        return Path(self.settings.models_dir) if self.settings.models_dir else models_dir()

    def set_voices_folder(self, folder: Path) -> None:
        self.settings.voices_dir = str(folder)
        self.library = VoiceLibrary(folder)
        self.voices_changed.emit()

    def new_recorder(self) -> Recorder:
        return Recorder(self.audio, self)

    def set_model(self, synth: SynthesizerLike | None, path: Path | None) -> None:
        self.synth, self.model_path = synth, path
        self.model_changed.emit()

    def set_busy(self, what: str | None) -> None:
        self.busy = what
        self.busy_changed.emit(what is not None)

    def can_start(self, parent: QWidget | None) -> bool:
        """One engine job at a time (the model's networks are not shared between threads)."""
        if self.synth is None:
            self.dialogs.error(parent, "No model", "Open a model first (File > Open model).")
            return False
        if self.busy:
            self.dialogs.error(parent, "Busy", f"Wait until {self.busy} has finished, or cancel it.")
            return False
        return True
