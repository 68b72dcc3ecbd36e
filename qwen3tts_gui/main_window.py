"""The main window: welcome view or the studio (voice, text, settings, progress, output) and the batch tab."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path

from PySide6.QtCore import QByteArray, Qt, QUrl
from PySide6.QtGui import (
    QAction,
    QCloseEvent,
    QDesktopServices,
    QGuiApplication,
    QKeySequence,
    QScreen,
    QShortcut,
)
from PySide6.QtWidgets import (
    QApplication,
    QFrame,
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QSplitter,
    QStackedWidget,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from . import APP_NAME, __version__
from .context import AppContext
from .controllers.batch_voices import BatchVoices
from .controllers.generation_controller import GenerationController
from .controllers.model_controller import ModelController
from .controllers.sharing import VoiceSharing
from .controllers.take_history import TakeHistory
from .data.folders import KeptFolder, folder_problem, unusable_folders
from .data.paths import data_dir, log_dir, takes_dir
from .data.saved_text import TEXT_FILE, restore_text, save_text
from .data.takes import Take
from .diagnostics import current_log_file, log
from .downloads import ModelDownloader
from .engine_adapter import VoiceNeed, kind_of, runs_on
from .widgets.batch_panel import BatchPanel
from .widgets.design_panel import DesignPanel
from .widgets.elided_label import ElidedLabel
from .widgets.fitting_scroll_area import FittingScrollArea
from .widgets.folders_dialog import FoldersDialog
from .widgets.language_combo import LanguageCombo
from .widgets.output_panel import OutputPanel
from .widgets.progress_panel import ProgressPanel
from .widgets.screen_fit import first_geometry, still_fits
from .widgets.settings_box import GenerationSettingsBox
from .widgets.speaker_panel import SpeakerPanel
from .widgets.voice_panel import VoicePanel
from .widgets.welcome import WelcomeView
from .widgets.wheel_guard import install_wheel_guard
from .workers import SynthesisWorker


def _section(title: str) -> QLabel:
    label = QLabel(title)
    label.setObjectName("SectionTitle")
    return label


class MainWindow(QMainWindow):
    def __init__(self, ctx: AppContext, parent: QWidget | None = None, takes_folder: Path | None = None):
        super().__init__(parent)
        self.ctx = ctx
        self.setWindowTitle(APP_NAME)
        self.setMinimumSize(960, 640)
        app = QApplication.instance()
        if app is not None:
            install_wheel_guard(app)

        self.downloader = ModelDownloader(ctx, self)
        self.downloader.failed.connect(lambda msg: self.ctx.dialogs.error(self, "Download failed", msg))
        self.welcome = WelcomeView(self.downloader)
        self.models = ModelController(ctx, self, self.welcome, self.downloader)
        self.models.status.connect(self._show_status)
        self.choose_model, self.open_model = self.models.choose_model, self.models.open_model
        self.import_checkpoint, self.use_demo_model = self.models.import_checkpoint, self.models.use_demo_model
        self.show_models = self.models.show_models
        self.welcome.open_model.connect(self.choose_model)
        self.welcome.import_checkpoint.connect(self.import_checkpoint)
        self.welcome.use_demo.connect(self.use_demo_model)

        self.voice_panel = VoicePanel(ctx)
        # a voice made: the next step is the text (then Ctrl+Return generates, Ctrl+P plays, Ctrl+S saves)
        self.voice_panel.editor.created.connect(lambda _path: self.text_edit.setFocus())
        self.voice_panel.editor.get_recogniser.connect(lambda: self.show_models().show_recognisers())
        self.models.recogniser_installed.connect(self.voice_panel.editor.recogniser_installed)
        # what the model speaks with: cloned voices (Base), preset speakers (CustomVoice), a description (VoiceDesign)
        self.speaker_panel = SpeakerPanel(ctx)
        self.design_panel = DesignPanel(ctx)
        self.voice_stack = QStackedWidget()
        for panel in (self.voice_panel, self.speaker_panel, self.design_panel):
            self.voice_stack.addWidget(panel)
        self.settings_box = GenerationSettingsBox(ctx.settings)
        self.progress = ProgressPanel()
        self.output = OutputPanel(ctx)
        ctx.player.notice.connect(lambda message: self.statusBar().showMessage(message, 15000))
        self.output.take_selected.connect(self._take_selected)
        self.history = TakeHistory(ctx, self, self.output, takes_folder or takes_dir())
        self.history.status.connect(self._show_status)
        self.clear_takes = self.history.clear

        self.text_edit: QPlainTextEdit = QPlainTextEdit()
        self.text_edit.setTabChangesFocus(True)  # Tab reaches Language and Generate; Ctrl+Return generates
        self.text_edit.setObjectName("TextEdit")
        self.text_edit.setPlaceholderText("Type what the voice should say…  (Ctrl+Enter generates)")
        self.text_edit.setMinimumHeight(72)
        self.text_edit.setMaximumHeight(150)  # long texts scroll; the rest of the height goes to the results
        self.text_file = data_dir() / TEXT_FILE
        text, problem = restore_text(self.text_file, ctx.settings)
        self.text_edit.setPlainText(text)
        if problem:
            ctx.notices.append(("The text from last time was not loaded", problem))
        self.lang_combo = LanguageCombo()
        self.lang_combo.setMinimumWidth(140)
        self.lang_combo.currentIndexChanged.connect(self._language_changed)
        self.voice_label = ElidedLabel("")
        self.voice_label.setObjectName("Muted")
        self.generate_btn = QPushButton("Generate")
        self.generate_btn.setObjectName("PrimaryButton")
        self.generate_btn.setToolTip("Generate speech (Ctrl+Enter)")
        self.generate_btn.clicked.connect(lambda: self.generate())
        self.cancel_btn = QPushButton("Cancel")
        self.cancel_btn.setToolTip("Stop generating (Esc)")
        self.cancel_btn.clicked.connect(self.cancel_generation)
        self.generation = GenerationController(
            ctx, self, self.history, text_edit=self.text_edit, lang_combo=self.lang_combo,
            settings_box=self.settings_box, voice_panel=self.voice_panel, speaker_panel=self.speaker_panel,
            design_panel=self.design_panel, progress=self.progress, output=self.output)
        self.generation.status.connect(self._show_status)
        self.generate: Callable[..., bool] = self.generation.generate
        self.regenerate: Callable[[Take], None] = self.generation.regenerate
        self.batch_voices = BatchVoices(ctx, self.voice_panel, self.speaker_panel)
        self.batch = BatchPanel(ctx, self.batch_voices.voice, self.settings_box.generation_settings)
        self.batch.voice_names = self.batch_voices.names
        self.batch.resolve_instruct = self.batch_voices.instruct

        self.tabs = QTabWidget()
        self.tabs.setDocumentMode(True)
        self.tabs.addTab(self._build_studio(), "Studio")
        self.tabs.addTab(self.batch, "Batch")
        self.stack = QStackedWidget()
        self.stack.addWidget(self.welcome)
        self.stack.addWidget(self.tabs)
        self.setCentralWidget(self.stack)
        self.model_label = QLabel("No model")
        self.model_label.setObjectName("Muted")
        self.statusBar().addPermanentWidget(self.model_label)
        self.sharing = VoiceSharing(ctx, self, defaults=self._sharing_defaults)
        self._build_menus()

        gen_keys = [QShortcut(QKeySequence(k), self) for k in ("Ctrl+Return", "Ctrl+Enter")]
        for sc in gen_keys:
            sc.activated.connect(lambda: self.generate())
        QShortcut(QKeySequence("Esc"), self).activated.connect(self.cancel_generation)

        ctx.model_changed.connect(self._model_changed)
        ctx.busy_changed.connect(lambda _: self._update_actions())
        for panel in (self.voice_panel, self.speaker_panel, self.design_panel):
            panel.voice_changed.connect(self._update_actions)
        self._model_changed()
        self._restore_window()
        self._say_what_is_not_kept()
        self.history.restore()
        problems = ctx.settings.take_problems()
        if problems:  # the values were reset to defaults and removed: this shows once, not at every start
            ctx.dialogs.notice(self, "Some settings were reset", "\n".join(problems))
        for title, text in ctx.notices:
            ctx.dialogs.notice(self, title, text)
        ctx.notices.clear()

    def _say_what_is_not_kept(self) -> None:
        """Folders that cannot keep files (a file or a looping link where a folder goes) are named once, at the
        start: the app works, but what they should keep is lost when it closes."""
        folders = [KeptFolder("Takes are not kept for the next session", self.history.store.folder),
                   KeptFolder("New voices cannot be saved", self.ctx.library.folder),
                   KeptFolder("The text box's text is not kept", self.text_file.parent)]
        settings_folder = self.ctx.settings.folder()
        if settings_folder is not None:
            folders.append(KeptFolder("Settings are not kept", settings_folder))
        folders.append(KeptFolder("The log is not written (problems are not recorded)", log_dir()))
        lost = unusable_folders(folders)
        self.history.unusable = folder_problem(self.history.store.folder)
        if lost:
            log.warning("some of the user's work will not be kept: %s", " ".join(lost))
            self.ctx.notices.insert(0, ("Some of your work will not be kept", "\n".join(lost) + (
                "\n\nMove or rename what is named, then start the app again.")))

    # --- layout ------------------------------------------------------------------------------------------
    def _build_studio(self) -> QWidget:
        left = QWidget()
        left.setObjectName("VoiceColumn")
        ll = QVBoxLayout(left)
        ll.setContentsMargins(14, 12, 10, 12)
        ll.addWidget(self.voice_stack)
        left_scroll = FittingScrollArea(left, least_width=340)  # never clips the voice column on its right

        right = QWidget()
        rl = QVBoxLayout(right)
        rl.setContentsMargins(10, 12, 14, 12)
        rl.setSpacing(8)
        rl.addWidget(_section("Text"))
        rl.addWidget(self.text_edit, 1)
        row = QHBoxLayout()
        row.setSpacing(8)
        row.addWidget(QLabel("Language"))
        row.addWidget(self.lang_combo)
        row.addSpacing(12)
        row.addWidget(self.voice_label, 1)
        row.addWidget(self.cancel_btn)
        row.addWidget(self.generate_btn)
        rl.addLayout(row)
        rl.addWidget(self.settings_box)
        rl.addWidget(_section("Progress"))
        rl.addWidget(self.progress, 2)
        rl.addWidget(_section("Output"))
        rl.addWidget(self.output, 2)

        right_scroll = QScrollArea()  # only scrolls on small screens; never lets panels overlap
        right_scroll.setWidget(right)
        right_scroll.setWidgetResizable(True)
        right_scroll.setFrameShape(QFrame.Shape.NoFrame)
        # never clip: below the smallest width the panels can take, scroll sideways
        right_scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)

        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.addWidget(left_scroll)
        self.splitter.addWidget(right_scroll)
        self.splitter.setStretchFactor(0, 2)
        self.splitter.setStretchFactor(1, 5)
        self.splitter.setSizes([400, 880])
        self.splitter.setChildrenCollapsible(False)
        return self.splitter

    def _build_menus(self) -> None:
        bar = self.menuBar()
        file_menu = bar.addMenu("&File")
        self.open_action = self._action("&Open model…", self.choose_model, QKeySequence.StandardKey.Open)
        self.import_action = self._action("&Import checkpoint…", lambda: self.import_checkpoint())
        self.demo_action = self._action("Use the &demo model", self.use_demo_model)
        self.models_action = self._action("&Models…", self.show_models)
        self.recent_menu = file_menu.addMenu("Recent models")
        self.save_action = self._action("&Save take as…", lambda: self.output.save_take(self.output.current),
                                        QKeySequence.StandardKey.Save)
        quit_action = self._action("&Quit", self.close, QKeySequence.StandardKey.Quit)
        file_menu.insertAction(self.recent_menu.menuAction(), self.open_action)
        file_menu.insertAction(self.recent_menu.menuAction(), self.import_action)
        file_menu.insertAction(self.recent_menu.menuAction(), self.demo_action)
        file_menu.insertAction(self.recent_menu.menuAction(), self.models_action)
        file_menu.addSeparator()
        file_menu.addAction(self.save_action)
        file_menu.addAction("&Folders…", self.edit_folders)
        file_menu.addAction("&Let other apps use these voices…", self.show_sharing)
        file_menu.addSeparator()
        file_menu.addAction(quit_action)
        self.recent_menu.aboutToShow.connect(self._fill_recent)

        voice_menu = bar.addMenu("&Voice")
        self._clone_actions: list[QAction] = []
        for entry in (
            ("New voice from &file…", self.voice_panel.choose_reference_file, "Ctrl+Shift+O"),
            ("&Record a new voice", self.voice_panel.toggle_record, "Ctrl+R"),
            ("&Create voice", self.voice_panel.editor.create_voice, "Ctrl+Shift+C"),
            None,
            ("&Import voice file…", self.voice_panel.import_voice, "Ctrl+I"),
            ("&Export selected voice…", self.voice_panel.export_selected, "Ctrl+E"),
        ):
            if entry is None:
                voice_menu.addSeparator()
                continue
            label, slot, keys = entry
            action = self._action(label, slot, QKeySequence(keys))
            voice_menu.addAction(action)
            if slot in (self.voice_panel.choose_reference_file, self.voice_panel.toggle_record,
                        self.voice_panel.editor.create_voice):
                self._clone_actions.append(action)  # only a Base model clones a voice

        take_menu = bar.addMenu("&Take")
        self.play_action = self._action("&Play / stop", self.output.toggle_play, QKeySequence("Ctrl+P"))
        take_menu.addAction(self.play_action)
        take_menu.addAction(self._action("&Regenerate with a new seed", self._regenerate_current,
                                         QKeySequence("Ctrl+Shift+R")))
        take_menu.addAction(self._action("&Unfinished texts…", lambda: self.generation.unfinished.offer(again=True)))
        take_menu.addSeparator()
        take_menu.addAction(self._action("&Clear all takes…", self.clear_takes))

        help_menu = bar.addMenu("&Help")
        help_menu.addAction("Open the &log folder", self._open_log_folder)
        help_menu.addAction(f"&About {APP_NAME}", self._about)

    def _action(self, text: str, slot: Callable[[], object],
                shortcut: QKeySequence | QKeySequence.StandardKey | None = None) -> QAction:
        """A menu action of this window: its text, what it does, and its shortcut."""
        action = QAction(text, self)
        if shortcut is not None:
            action.setShortcut(shortcut)
        action.triggered.connect(slot)
        return action

    def _regenerate_current(self) -> None:
        if self.output.current is not None:
            self.regenerate(self.output.current)

    def _where_it_runs(self, synth) -> str:
        """"on the CPU" or "on GPU 0: name, exact"; a GPU chosen but not used says so (a q8 model, say, runs on
        the CPU): the note why is the label's tooltip and was the status line's."""
        where = f"on {runs_on(synth.device)}"
        chosen = self.ctx.settings.device
        if chosen.startswith("gpu") and not synth.device.on_gpu:
            where += f", not the chosen GPU {chosen.partition(':')[2]}".rstrip()
        return where

    def _fill_recent(self) -> None:
        self.recent_menu.clear()
        for path in self.ctx.settings.recent_models:
            self.recent_menu.addAction(path, partial(self.open_model, Path(path)))
        if not self.ctx.settings.recent_models:
            self.recent_menu.addAction("(none yet)").setEnabled(False)

    def place_window(self, screen: QScreen | None = None) -> None:
        """Size and place the window on `screen` (the one it opens on): the saved geometry where it still fits
        there, else 1280x860 or what the screen's available area holds, centred; maximised when even the
        minimum size does not fit."""
        screen = screen or self.screen() or QGuiApplication.primaryScreen()
        available = screen.availableGeometry()
        saved = self.ctx.settings.geometry
        if not saved.isEmpty() and self.restoreGeometry(saved) and (
                self.isMaximized() or still_fits(self.geometry(), available)):
            return
        self.setWindowState(self.windowState() & ~Qt.WindowState.WindowMaximized)
        self.setScreen(screen)
        rect = first_geometry(available, self.minimumSize())
        if rect is None:
            self.setGeometry(available)
            self.setWindowState(self.windowState() | Qt.WindowState.WindowMaximized)
        else:
            self.setGeometry(rect)

    def _restore_window(self) -> None:
        s = self.ctx.settings
        self.place_window()
        if not s.window_state.isEmpty():
            self.restoreState(s.window_state)
        if not s.splitter.isEmpty():
            self.splitter.restoreState(s.splitter)
        self.tabs.setCurrentIndex(min(max(s.tab, 0), self.tabs.count() - 1))

    def _save_window(self) -> None:
        s = self.ctx.settings
        problem = save_text(self.text_file, self.text_edit.toPlainText())
        if problem:
            log.warning(problem)
        s.geometry = QByteArray(self.saveGeometry())
        s.window_state = QByteArray(self.saveState())
        s.splitter = QByteArray(self.splitter.saveState())
        s.tab = self.tabs.currentIndex()
        s.sync()

    # --- model -------------------------------------------------------------------------------------------
    @property
    def synth_worker(self) -> SynthesisWorker | None:
        """The generation running now (the engine job, when it is one)."""
        return self.generation.worker

    def _model_changed(self) -> None:
        synth = self.ctx.synth
        self.stack.setCurrentWidget(self.tabs if synth is not None else self.welcome)
        self.lang_combo.set_languages(synth.languages if synth is not None else ["auto"],
                                      select=self.ctx.settings.language)
        kind = kind_of(synth)
        panels = {VoiceNeed.SPEAKER: self.speaker_panel, VoiceNeed.DESCRIPTION: self.design_panel}
        self.voice_stack.setCurrentWidget(panels.get(kind.needs, self.voice_panel))
        if kind.needs == VoiceNeed.SPEAKER:
            self.speaker_panel.set_model(synth)
        for action in self._clone_actions:
            action.setEnabled(kind.needs == VoiceNeed.REFERENCE)
        if synth is not None:
            self.settings_box.load_defaults(synth.default_settings)
            path = self.ctx.model_path
            self.model_label.setText(f"Model: {path.name if path else '?'} · {self._where_it_runs(synth)}")
            note = synth.device.note if synth.device.noteworthy else ""
            self.model_label.setToolTip(f"{path}\n{note}".strip())
            self.setWindowTitle(f"{path.name if path else 'model'} — {APP_NAME}")
        else:
            self.model_label.setText("No model")
            self.setWindowTitle(APP_NAME)
        self._update_actions()

    # --- generate ----------------------------------------------------------------------------------------
    def _language_changed(self) -> None:
        code = self.lang_combo.currentData()
        if code:
            self.ctx.settings.language = code

    def cancel_generation(self) -> None:
        if self.synth_worker is not None:
            self.ctx.cancel_job()
            self.cancel_btn.setEnabled(False)
            self.progress.show_cancelling()

    def _take_selected(self, take: Take) -> None:
        if self.synth_worker is None:
            self.progress.show_take(take)

    def _update_actions(self) -> None:
        busy = self.ctx.busy is not None
        worker = self.synth_worker
        self.generate_btn.setEnabled(self.ctx.synth is not None and not busy)
        self.cancel_btn.setEnabled(worker is not None and not worker.cancel_requested)
        for a in (self.open_action, self.import_action, self.demo_action):
            a.setEnabled(not busy)
        self.design_panel.set_busy(busy)
        panel = self.voice_stack.currentWidget()
        name = panel.selected_name() if isinstance(panel, (VoicePanel, SpeakerPanel, DesignPanel)) else ""
        self.voice_label.setText(f"Voice: {name}" if name else "No voice selected")

    def edit_folders(self) -> None:
        dialog = FoldersDialog(self.ctx, self, history_bytes=self.history.store.size_bytes,
                               clear_history=self.clear_takes)
        if dialog.exec():
            self.history.set_limit(self.ctx.settings.takes_limit_mb)

    def _show_status(self, message: str, timeout_ms: int) -> None:
        if message:
            self.statusBar().showMessage(message, timeout_ms)
        else:
            self.statusBar().clearMessage()

    # --- misc --------------------------------------------------------------------------------------------
    def _open_log_folder(self) -> None:
        folder = current_log_file().parent
        folder.mkdir(parents=True, exist_ok=True)
        QDesktopServices.openUrl(QUrl.fromLocalFile(str(folder)))

    def _about(self) -> None:
        self.ctx.dialogs.info(
            self, f"About {APP_NAME}",
            f"{APP_NAME} {__version__}\nLocal Qwen3-TTS voice cloning on the CPU (ncnn + numpy).\n"
            f"Log file: {current_log_file()}",
        )

    def _sharing_defaults(self):
        """The settings box's values for the speech server's requests (each request draws its own seed)."""
        from dataclasses import replace

        return replace(self.settings_box.generation_settings(), seed=None, stream_audio=False)

    def show_sharing(self) -> None:
        from .widgets.sharing_dialog import SharingDialog

        dialog = SharingDialog(self.sharing, self)
        dialog.setModal(False)
        dialog.show()

    def closeEvent(self, event: QCloseEvent) -> None:
        if self.batch.running:
            if not self.ctx.dialogs.question(self, "Batch running",
                                             "A batch is still running. Stop it and quit?"):
                event.ignore()
                return
        self.ctx.cancel_job()  # whatever it is: generating, the batch, a conversion, a voice, a model load
        self.ctx.wait_for_job()  # a QThread must not be destroyed while it runs
        self.sharing.shutdown()
        self.downloader.cancel()  # the partial files stay: the next Download resumes
        self.downloader.wait()
        self.voice_panel.stop_recording()
        self.voice_panel.editor.stop_transcribing()
        self.ctx.player.stop()
        self.history.close()  # every take generated is on disk before the app quits
        self.batch.save_lines()
        self._save_window()
        event.accept()
