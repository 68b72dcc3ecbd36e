"""Models: open a bundle, import a checkpoint, make or repair the demo model, open a downloaded model."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QMainWindow, QProgressDialog

from ..context import AppContext
from ..data.paths import candidate_paths, unique_path
from ..diagnostics import log
from ..downloads import ModelDownloader
from ..engine_adapter import (
    DEFAULT_PRECISION,
    check_q8_bundle,
    convert_checkpoint,
    installed_conversion,
    is_demo_bundle,
    make_demo_bundle,
    recognises_speech,
)
from ..widgets.download_panel import precision_label
from ..widgets.job_dialog import job_progress_dialog
from ..widgets.models_dialog import ModelsDialog
from ..widgets.welcome import WelcomeView
from ..workers import CallWorker, ProgressWorker
from .tuning import needs_tuning, start_tuning

DEMO_NAME = "demo"


class ModelController(QObject):
    """Everything that ends in a model being open. `window` is the parent of its dialogs; `status` carries a
    status-line message and how long it shows (ms; "" clears the line)."""

    status = Signal(str, int)
    recogniser_installed = Signal()  # a Whisper model was downloaded: a reference waiting for its words gets them

    def __init__(self, ctx: AppContext, window: QMainWindow, welcome: WelcomeView, downloader: ModelDownloader):
        super().__init__(window)
        self.ctx = ctx
        self.window = window
        self.welcome = welcome
        self.downloader = downloader
        self.progress_dialog: QProgressDialog | None = None
        self.demo_retried = False
        downloader.installed.connect(self._model_downloaded)

    def choose_model(self) -> None:
        start = self.ctx.settings.model_path or str(self.ctx.models_folder())
        folder = self.ctx.dialogs.open_dir(self.window, "Open model bundle folder", start)
        if folder:
            self.open_model(Path(folder))

    def open_model(self, path: Path) -> bool:
        worker = CallWorker(lambda: self.ctx.open_synth(path), "opening the model", self)
        worker.done.connect(lambda synth: self._model_loaded(path, synth))
        worker.failed.connect(lambda msg: self._model_failed(path, msg))
        if not self.ctx.start_job(worker, self.window, needs_model=False, finished=lambda: self.welcome.set_busy("")):
            return False
        self.welcome.set_busy(f"Opening {path.name}…")
        self.status.emit(f"Opening model {path}…", 0)
        return True

    def _model_loaded(self, path: Path, synth) -> None:
        self.ctx.settings.remember_model(str(path))
        self.ctx.settings.sync()  # remembered even if the app is killed later
        self.ctx.set_model(synth, path)
        where = synth.device.note if synth.device.noteworthy and synth.device.note else (
            f"on {synth.device.describe()}" if synth.device.on_gpu else "on the CPU")
        self.status.emit(f"Model {path.name} is ready (speech decoder: {synth.decoder_precision}; "
                         f"{where.rstrip('.')})", 8000)
        log.info("opened model %s", path)
        if needs_tuning(synth):  # once per model and computer: measured after the open job has ended
            self.ctx.when_idle(lambda: start_tuning(self.window, self.ctx, synth) if self.ctx.synth is synth else None)

    def _model_failed(self, path: Path, message: str) -> None:
        self.status.emit("", 0)
        if path.parent == self.ctx.models_folder() and not self.demo_retried and is_demo_bundle(path):
            # our own demo from an older build (or damaged): offer a fresh one; only a bundle holding nothing
            # but its own files is replaced (the engine checks), anything else stays untouched
            self.demo_retried = True
            if self.ctx.dialogs.question(self.window, "Cannot open the demo model",
                                         f"{message}\n\nMake a fresh demo model in its place ({path})?"):
                self.ctx.when_idle(lambda: self._build_demo(path, replace=True))
            return
        self.ctx.dialogs.error(self.window, "Cannot open the model", message)

    def show_models(self) -> ModelsDialog:
        """Installed and downloadable models (the dialog is modal; a download goes on after it closes)."""
        dialog = ModelsDialog(self.downloader, self.window)
        dialog.open_model.connect(self.open_model)
        dialog.import_checkpoint.connect(self.import_checkpoint)  # with the precision chosen in the dialog
        dialog.check_model.connect(self.check_model)
        dialog.open()
        return dialog

    def _model_downloaded(self, path: Path) -> None:
        """The first model opens by itself; with a model already open, the new one waits in File > Models.

        Downloads are not the engine job (AppContext.start_job): a long download must not stop generating.
        A Whisper model is not opened: new references' words are written down with it."""
        if recognises_speech(path):
            self.status.emit(f"Installed {path.name}: new voices' transcripts are written down with it", 8000)
            self.recogniser_installed.emit()
            return
        if self.ctx.synth is not None:
            self.status.emit(f"Installed {path.name}: open it from File > Models", 8000)
            return
        self.status.emit(f"Installed {path.name}", 5000)
        self.ctx.when_idle(lambda: self.open_model(path))

    def import_checkpoint(self, precision: str = "") -> None:
        """Convert a checkpoint folder at `precision`: the one chosen beside the Import button, else the one
        chosen last (the download precision setting), else the store's default."""
        precision = precision or self.ctx.settings.download_precision or DEFAULT_PRECISION
        start = self.ctx.settings.last_checkpoint_dir or str(Path.home())
        folder = self.ctx.dialogs.open_dir(
            self.window, "Checkpoint folder (config.json, model.safetensors, speech_tokenizer/)", start
        )
        if not folder:
            return
        src = Path(folder)
        self.ctx.settings.last_checkpoint_dir = str(src.parent)
        self.ctx.settings.download_precision = precision
        # the same checkpoint at the same precision installed already (a second 2.6 GB copy went unsaid): ask
        models = self.ctx.models_folder()
        self.run_long_job(
            lambda progress, cancel: installed_conversion(src, models, precision, progress, cancel) or "",
            "checking the checkpoint", f"Checking {src.name}…", cancellable=True,
            done=lambda found: self._convert_unless_installed(src, precision, Path(str(found)) if found else None))

    def _convert_unless_installed(self, src: Path, precision: str, installed: Path | None) -> None:
        if installed is not None:
            choice = self.ctx.dialogs.choose(
                self.window, "Already installed",
                f"{src.name} is installed already at this precision ({precision_label(precision)}), as "
                f"“{installed.name}”. Open it, or convert the checkpoint again into a second copy?",
                ["Open it", "Convert again"])
            if choice is None:
                return
            if choice == 0:
                self.open_model(installed)
                return
        # "demo" is the app's own demo model's folder, which the app may replace: an import never lands there
        name = src.name if src.name != DEMO_NAME else f"{DEMO_NAME} (imported)"
        dest = unique_path(self.ctx.models_folder() / name)
        self.run_long_job(
            lambda progress, cancel: convert_checkpoint(src, dest, precision=precision, progress=progress,
                                                        cancel=cancel),
            "converting the checkpoint", f"Converting {src.name} ({precision_label(precision)})…",
            cancellable=True,
        )

    def check_model(self, bundle: Path) -> None:
        """The 8-bit check of a model made before it: against the checkpoint folder it was converted from."""
        start = self.ctx.settings.last_checkpoint_dir or str(Path.home())
        folder = self.ctx.dialogs.open_dir(
            self.window, f"The checkpoint {bundle.name} was converted from (config.json, model.safetensors)", start
        )
        if not folder:
            return
        src = Path(folder)
        self.ctx.settings.last_checkpoint_dir = str(src.parent)
        self.run_long_job(
            lambda progress, cancel: check_q8_bundle(bundle, src, progress=progress, cancel=cancel),
            "checking the 8-bit model", f"Checking {bundle.name} against {src.name}…", cancellable=True,
            done=lambda found: self._checked(bundle, str(found)))

    def _checked(self, bundle: Path, found: str) -> None:
        """Say what the check found; a check is not a request to open the model. The open model is opened again
        when it was the one checked, since the check may have rewritten its files (layers kept float, or fp32)."""
        self.status.emit(f"Checked {bundle.name}: {found}", 10000)
        if self.ctx.model_path is not None and _same_folder(self.ctx.model_path, bundle):
            self.open_model(bundle)

    def use_demo_model(self) -> None:
        dest = self._demo_folder()
        if dest.exists():
            self.open_model(dest)
        else:
            self._build_demo(dest)

    def _demo_folder(self) -> Path:
        """models/demo, or 'demo (2)'... when a folder of that name holds something that is not the app's demo
        (an older build's demo, an import): that folder is left as it is."""
        for folder in candidate_paths(self.ctx.models_folder() / DEMO_NAME):
            if is_demo_bundle(folder) or not (folder.exists() or folder.is_symlink()):
                return folder
        raise AssertionError("unreachable")  # candidate_paths never ends

    def _build_demo(self, dest: Path, replace: bool = False) -> None:
        self.run_long_job(lambda progress, cancel: make_demo_bundle(dest, progress=progress, replace=replace),
                          "making the demo model", "Making the demo model…", cancellable=False)

    def run_long_job(self, fn, doing: str, label: str, cancellable: bool,
                     done: Callable[[object], None] | None = None) -> ProgressWorker | None:
        """Conversion-like jobs: a worker plus a progress dialog; the model it makes is opened at the end (or its
        result goes to `done`, once the job has ended)."""
        if not self.ctx.can_start(self.window, needs_model=False):
            return None
        worker = ProgressWorker(fn, doing, self)
        dialog = job_progress_dialog(self.window, label, worker, cancellable)
        then = done or (lambda path: self.open_model(Path(str(path))))
        worker.done.connect(lambda result: self.ctx.when_idle(lambda: then(result)))
        worker.failed.connect(lambda msg: self.ctx.dialogs.error(self.window, f"Failed {doing}", msg))
        worker.cancelled.connect(lambda: self.status.emit(f"Stopped {doing}", 5000))
        self.progress_dialog = dialog
        self.welcome.set_busy(label)
        dialog.show()
        self.ctx.start_job(worker, self.window, needs_model=False, finished=self._long_finished)
        return worker

    def _long_finished(self) -> None:
        if self.progress_dialog is not None:
            self.progress_dialog.close()
            self.progress_dialog.deleteLater()
        self.progress_dialog = None
        self.welcome.set_busy("")


def _same_folder(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False
