"""What the windows and panels share: settings, voice library, audio, dialogs, the loaded model, the engine job."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import QFileDialog, QInputDialog, QMessageBox, QWidget

from .audio_io import AudioBackend, Player
from .data.paths import data_dir, models_dir, voices_dir
from .data.settings import Settings
from .data.voices import VoiceLibrary
from .engine_adapter import (
    SynthesizerContract,
    SynthFactory,
    TranscriberContract,
    open_synthesizer,
    open_transcriber,
    speech_recogniser,
)
from .recorder import Recorder
from .workers import EngineTurns, Worker

MODELS_DIR_VARIABLE = "QWEN3TTS_MODELS_DIR"


def _path_problem(path: Path) -> str | None:
    """Why no file or folder can ever be at `path` (too long, a NUL, a loop), or None."""
    try:
        os.stat(path)
    except ValueError:
        return "its name holds a NUL character"
    except OSError as e:
        if e.errno in (errno.ENAMETOOLONG, errno.ELOOP):
            return (e.strerror or str(e)).lower()
    return None


MAX_DIALOG_CHARS = 2000  # a message box shows this much of a text at most (a 1 MB path once filled the screen)


def shown_in_dialog(text: str) -> str:
    """`text` as a message box shows it: whole up to MAX_DIALOG_CHARS, else its start and end around a note of
    what was left out (the end often names the file)."""
    if len(text) <= MAX_DIALOG_CHARS:
        return text
    head, tail = MAX_DIALOG_CHARS * 3 // 4, MAX_DIALOG_CHARS // 8
    return f"{text[:head]} … ({len(text) - head - tail:,} characters left out) … {text[-tail:]}"


class Dialogs:
    """Every modal question the app asks goes through here, so tests can answer them without a human. What a box
    shows is capped (shown_in_dialog)."""

    def error(self, parent: QWidget | None, title: str, text: str) -> None:
        QMessageBox.warning(parent, title, shown_in_dialog(text))

    def info(self, parent: QWidget | None, title: str, text: str) -> None:
        QMessageBox.information(parent, title, shown_in_dialog(text))

    def notice(self, parent: QWidget | None, title: str, text: str) -> None:
        """A message that does not block: the window stays usable while it is shown."""
        box = QMessageBox(QMessageBox.Icon.Information, title, shown_in_dialog(text), QMessageBox.StandardButton.Ok,
                          parent)
        box.setModal(False)
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        box.setAttribute(Qt.WidgetAttribute.WA_QuitOnClose, False)  # closing the main window still quits
        box.show()

    def question(self, parent: QWidget | None, title: str, text: str) -> bool:
        buttons = QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No
        answer = QMessageBox.question(parent, title, shown_in_dialog(text), buttons, QMessageBox.StandardButton.No)
        return answer == QMessageBox.StandardButton.Yes

    def choose(self, parent: QWidget | None, title: str, text: str, choices: list[str]) -> int | None:
        """A question answered by buttons that name the choices (the first is the default; Cancel is added):
        the index of the one pressed, or None for Cancel."""
        box = QMessageBox(QMessageBox.Icon.Question, title, shown_in_dialog(text), QMessageBox.StandardButton.Cancel,
                          parent)
        buttons = [box.addButton(choice, QMessageBox.ButtonRole.AcceptRole) for choice in choices]
        box.setDefaultButton(buttons[0])
        box.exec()
        clicked = box.clickedButton()
        return buttons.index(clicked) if clicked in buttons else None

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
        open_synth: SynthFactory | None = None,
        library: VoiceLibrary | None = None,
        parent: QObject | None = None,
    ):
        super().__init__(parent)
        self.settings = settings
        self.audio = audio
        self.dialogs = dialogs or Dialogs()
        # the default factory reads the thread and decoder settings each time a model is opened
        self.open_synth = open_synth or (lambda path: open_synthesizer(
            path, threads=self.settings.threads or None, decoder_precision=self.settings.decoder_precision,
            device=self.settings.device, gpu_precision=self.settings.gpu_precision))
        self.library = library or VoiceLibrary(Path(settings.voices_dir) if settings.voices_dir else voices_dir())
        # speech recognition (a new voice's transcript): which installed Whisper model, and how it is loaded
        self.find_recogniser: Callable[[], Path | None] = lambda: speech_recogniser(self.models_folder())
        self.open_transcriber: Callable[[Path], TranscriberContract] = lambda path: open_transcriber(
            path, threads=self.settings.threads or None)
        self.player = Player(audio, self)
        self.synth: SynthesizerContract | None = None
        self.model_path: Path | None = None
        self.job: Worker | None = None  # the one engine job running now (see start_job)
        # the open model used by one thread at a time: the app's jobs and the speech server's engine thread, when
        # the server is on, take turns (the server speaks with this model, never a second copy)
        self.engine_turns = EngineTurns()
        self._when_idle: list[Callable[[], object]] = []
        self._models_folder_checked = False
        self.notices: list[tuple[str, str]] = []  # (title, text) found before the window could show them

    def models_folder(self) -> Path:
        """Where imported checkpoints and the demo model are converted to: QWEN3TTS_MODELS_DIR first, as for the
        command line, then the folder chosen in the app. A path no folder can have (too long, a NUL) is named
        once and the default folder is used instead: it must never stop the app from starting."""
        folder = models_dir(self.settings.models_dir)
        problem = _path_problem(folder)
        if problem is None:
            return folder
        default = data_dir() / "models"
        if not self._models_folder_checked:
            self._models_folder_checked = True
            if os.environ.get(MODELS_DIR_VARIABLE):
                self.notices.append(("The models folder cannot be used", f"QWEN3TTS_MODELS_DIR names a folder "
                                     f"that cannot exist ({problem}); models are kept in {default} instead."))
            elif self.settings.models_dir:
                self.settings.report(f"The setting folders/models named a folder that cannot exist ({problem}); "
                                     f"it was reset to {default}.")
                self.settings.models_dir = ""
        return default

    def set_voices_folder(self, folder: Path) -> None:
        self.settings.voices_dir = str(folder)
        self.library = VoiceLibrary(folder)
        self.voices_changed.emit()

    def new_recorder(self) -> Recorder:
        return Recorder(self.audio, self)

    def set_model(self, synth: SynthesizerContract | None, path: Path | None) -> None:
        self.synth, self.model_path = synth, path
        self.model_changed.emit()

    # --- the one engine job ---------------------------------------------------------------------------------
    @property
    def busy(self) -> str | None:
        """What the engine is doing now ("generating", "opening the model"...), or None."""
        return self.job.doing if self.job is not None else None

    def can_start(self, parent: QWidget | None, needs_model: bool = True) -> bool:
        """One engine job at a time (the model's networks are not shared between threads)."""
        if needs_model and self.synth is None:
            self.dialogs.error(parent, "No model", "Open a model first (File > Open model).")
            return False
        if self.job is not None:
            self.dialogs.error(parent, "Busy", f"Wait until {self.busy} has finished, or cancel it.")
            return False
        return True

    def start_job(self, worker: Worker, parent: QWidget | None, needs_model: bool = True,
                  finished: Callable[[], object] | None = None) -> bool:
        """Start `worker` as the engine job, unless one is running (then say so and return False).

        finished() runs when its thread has ended, right after the job is released (so it may start the next
        one); the worker is deleted afterwards. Connect to its result signals before calling this."""
        if not self.can_start(parent, needs_model):
            worker.deleteLater()
            return False
        self.job = worker
        if needs_model:  # a job that uses the open model takes its turn with the speech server
            worker.engine_turns = self.engine_turns
        worker.finished.connect(lambda: self._job_finished(finished))
        self.busy_changed.emit(True)
        worker.start()
        return True

    def when_idle(self, fn: Callable[[], object]) -> None:
        """Run fn once no job runs: now, or when the current one has finished (e.g. open the model a conversion
        has just made: its result arrives before its thread has ended)."""
        if self.job is None:
            fn()
        else:
            self._when_idle.append(fn)

    def cancel_job(self) -> None:
        if self.job is not None:
            self.job.cancel()

    def wait_for_job(self, ms: int = 60000) -> None:
        """Block until the job's thread has ended (a QThread must not be destroyed while it runs)."""
        if self.job is not None:
            self.job.wait(ms)

    def _job_finished(self, finished: Callable[[], object] | None) -> None:
        worker, self.job = self.job, None
        if finished is not None:
            finished()
        if worker is not None:
            worker.deleteLater()
        self.busy_changed.emit(False)
        waiting, self._when_idle = self._when_idle, []
        for fn in waiting:
            fn()
