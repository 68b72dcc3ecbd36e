"""Models: the installed models (open, set default, remove), where they live (move the folder), the catalogue
to download from (hub or mirror address, token), and importing a local checkpoint."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLineEdit,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
)

from ..downloads import ModelDownloader
from ..engine_adapter import (
    CATALOGUE,
    WHISPER_CATALOGUE,
    EngineError,
    ModelStore,
    StoreError,
    format_bytes,
    move_store,
    pending_downloads,
)
from .download_panel import DownloadPanel, converted_size
from .plain_height import WrappedLabel

RECOGNISER_SHOWN = "openai/whisper-base"


class ModelsDialog(QDialog):
    open_model = Signal(object)  # Path
    import_checkpoint = Signal(str)  # the precision chosen in the Download section
    check_model = Signal(object)  # Path of an 8-bit bundle made before the 8-bit check

    def __init__(self, downloader: ModelDownloader, parent=None):
        super().__init__(parent)
        self.downloader = downloader
        self.ctx = downloader.ctx
        self.setWindowTitle("Models")
        self.setMinimumWidth(760)

        self.table = QTreeWidget()
        self.table.setHeaderLabels(["Name", "Precision", "On disk", "From"])
        self.table.setRootIsDecorated(False)
        self.table.setColumnWidth(0, 280)
        self.table.itemSelectionChanged.connect(self._update_buttons)
        self.table.itemDoubleClicked.connect(lambda *_: self._open())
        self.open_btn = QPushButton("Open")
        self.open_btn.clicked.connect(self._open)
        self.default_btn = QPushButton("Set as default")
        self.default_btn.setToolTip("Opened when the app starts")
        self.default_btn.clicked.connect(self._set_default)
        self.remove_btn = QPushButton("Remove…")
        self.remove_btn.clicked.connect(self._remove)
        self.check_btn = QPushButton("Check 8-bit…")
        self.check_btn.setToolTip("Measure an 8-bit model made before the 8-bit check against the checkpoint it "
                                  "came from (layers that need it are kept in full precision)")
        self.check_btn.clicked.connect(self._check)
        import_btn = QPushButton("Import checkpoint…")
        import_btn.setToolTip("Convert a checkpoint folder you already have (config.json, model.safetensors, "
                              "speech_tokenizer/)")
        import_btn.clicked.connect(self._import)
        row = QHBoxLayout()
        for b in (self.open_btn, self.default_btn, self.remove_btn, self.check_btn):
            row.addWidget(b)
        row.addStretch(1)
        row.addWidget(import_btn)
        self.folder_label = WrappedLabel("")
        self.folder_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        move_btn = QPushButton("Move…")
        move_btn.clicked.connect(self._move)
        folder_row = QHBoxLayout()
        folder_row.addWidget(self.folder_label, 1)
        folder_row.addWidget(move_btn)
        installed = QGroupBox("Installed")
        il = QVBoxLayout(installed)
        il.addLayout(folder_row)
        il.addWidget(self.table)
        il.addLayout(row)

        self.available = QTreeWidget()
        self.available.setHeaderLabels(["Model", "Can do", "Download", "On disk", ""])
        self.available.setRootIsDecorated(False)
        self.available.setColumnWidth(0, 250)
        self.available.setColumnWidth(1, 250)
        self.available.itemSelectionChanged.connect(self._pick_available)
        self.panel = DownloadPanel(downloader, recognisers=True)
        self.panel.installed.connect(lambda _path: self.refresh())
        self.panel.precision_combo.currentIndexChanged.connect(lambda _i: self._fill_available())
        self.endpoint = QLineEdit(self.ctx.settings.hub_endpoint)
        self.endpoint.setPlaceholderText("https://huggingface.co (or HF_ENDPOINT)")
        self.endpoint.setToolTip("A mirror of the Hugging Face hub, for networks that cannot reach it")
        self.endpoint.editingFinished.connect(self._save_endpoint)
        self.token = QLineEdit(downloader.token)
        self.token.setEchoMode(QLineEdit.EchoMode.Password)
        self.token.setPlaceholderText("only for gated or private repositories (HF_TOKEN also works)")
        self.token.editingFinished.connect(lambda: setattr(downloader, "token", self.token.text().strip()))
        form = QFormLayout()
        form.addRow("Hub address", self.endpoint)
        form.addRow("Token", self.token)
        available = QGroupBox("Download")
        al = QVBoxLayout(available)
        al.addWidget(self.available)
        al.addWidget(self.panel)
        al.addLayout(form)

        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        lay = QVBoxLayout(self)
        lay.addWidget(installed, 1)
        lay.addWidget(available, 1)
        lay.addWidget(buttons)
        self.refresh()
        self._show_whole_catalogue()

    def _show_whole_catalogue(self) -> None:
        """The catalogue's rows all show at the dialog's first size (it showed half a row): the download list is
        the reason most people open this dialog."""
        tree = self.available
        rows = tree.topLevelItemCount()
        if rows:
            height = tree.header().sizeHint().height() + 2 * tree.frameWidth() + 4
            height += tree.horizontalScrollBar().sizeHint().height()  # the columns are wider than the dialog
            height += sum(tree.sizeHintForRow(i) for i in range(rows))
            tree.setMinimumHeight(height)
        # and three installed models above it: with the Whisper models in the catalogue, the installed list
        # was squeezed to half a row
        table = self.table
        row = table.sizeHintForRow(0) if table.topLevelItemCount() else tree.sizeHintForRow(0)
        table.setMinimumHeight(table.header().sizeHint().height() + 2 * table.frameWidth() + 3 * max(row, 1) + 4)

    def store(self) -> ModelStore:
        return ModelStore(self.ctx.models_folder())

    def refresh(self) -> None:
        store = self.store()
        try:
            models = store.installed()
        except StoreError as e:  # a folder that cannot be read: say so where the list would be
            models, used = [], str(e)
        else:
            used = (f"{len(models)} models, {format_bytes(sum(m.disk_bytes for m in models))}" if models
                    else "no models yet")
        self.folder_label.setText(f"Folder: {store.root}  ({used})")
        default = self.ctx.settings.model_path
        self.table.clear()
        for m in models:
            name = f"{m.name} (default)" if default and Path(default) == m.path else m.name
            precision = f"{m.precision} ({m.accuracy})" if m.accuracy else m.precision
            if m.recognises_speech:  # not a voice model: it writes down new references' words
                precision = f"{precision} (speech recognition)"
            item = QTreeWidgetItem([name, precision, format_bytes(m.disk_bytes), m.source])
            item.setData(0, Qt.ItemDataRole.UserRole, str(m.path))
            item.setData(1, Qt.ItemDataRole.UserRole, m.check_offered)
            item.setData(2, Qt.ItemDataRole.UserRole, m.recognises_speech)
            if m.note:  # an 8-bit bundle from before outlier smoothing or the 8-bit check: say what to do
                if not m.accuracy:
                    item.setText(1, f"{m.precision} (old)")
                for column in range(4):
                    item.setToolTip(column, m.note[:1].upper() + m.note[1:] + ".")
            self.table.addTopLevelItem(item)
        self._update_buttons()
        self.panel.refresh()
        self._fill_available(models)

    def _fill_available(self, models=None) -> None:
        """The catalogue: sizes at the chosen precision, and whether each is installed or half downloaded."""
        try:
            models = self.store().installed() if models is None else models
            pending = {p.repo_id: p for p in pending_downloads(self.store())}
        except StoreError:  # refresh() shows why
            models, pending = [], {}
        have = {m.repo_id for m in models}
        precision = self.panel.precision()
        self.available.clear()
        for e in CATALOGUE + WHISPER_CATALOGUE:
            if e.repo_id in have:
                state = "installed"
            elif e.repo_id in pending:
                p = pending[e.repo_id]
                state = f"{100 * p.done_bytes // max(p.total_bytes, 1)} % downloaded"
            else:
                state = ""
            size, converted = converted_size(e, precision)
            item = QTreeWidgetItem([e.name, e.abilities, format_bytes(e.download_bytes),
                                    f"{format_bytes(size)} ({converted})" if size else "?", state])
            item.setToolTip(1, e.abilities)
            item.setData(0, Qt.ItemDataRole.UserRole, e.repo_id)
            self.available.addTopLevelItem(item)

    def show_recognisers(self) -> None:
        """Select Whisper base in the download list and scroll to it (the new voice's "get a speech recognition
        model" link): quick and good on clear speech, the model the store picks first."""
        for i in range(self.available.topLevelItemCount()):
            item = self.available.topLevelItem(i)
            if item is not None and item.data(0, Qt.ItemDataRole.UserRole) == RECOGNISER_SHOWN:
                self.available.setCurrentItem(item)
                self.available.scrollToItem(item)
                return

    def _pick_available(self) -> None:
        items = self.available.selectedItems()
        if items:
            i = self.panel.model_combo.findData(items[0].data(0, Qt.ItemDataRole.UserRole))
            if i >= 0 and not self.downloader.running:
                self.panel.model_combo.setCurrentIndex(i)

    def selected(self) -> Path | None:
        items = self.table.selectedItems()
        return Path(items[0].data(0, Qt.ItemDataRole.UserRole)) if items else None

    def _update_buttons(self) -> None:
        chosen = self.selected() is not None
        items = self.table.selectedItems()
        voice_model = chosen and not items[0].data(2, Qt.ItemDataRole.UserRole)
        self.open_btn.setEnabled(voice_model)  # a Whisper model is not opened: the new voice editor uses it
        self.default_btn.setEnabled(voice_model)
        self.remove_btn.setEnabled(chosen)
        self.check_btn.setEnabled(bool(items) and bool(items[0].data(1, Qt.ItemDataRole.UserRole)))

    def _check(self) -> None:
        path = self.selected()
        if path is not None:
            self.check_model.emit(path)
            self.accept()

    def _open(self) -> None:
        path = self.selected()
        if path is not None and self.open_btn.isEnabled():
            self.open_model.emit(path)
            self.accept()

    def _set_default(self) -> None:
        path = self.selected()
        if path is not None:
            self.ctx.settings.model_path = str(path)
            self.refresh()

    def _remove(self) -> None:
        path = self.selected()
        if path is None:
            return
        if self.ctx.model_path is not None and Path(self.ctx.model_path) == path:
            self.ctx.dialogs.error(self, "Model in use", f"{path.name} is open; open another model first.")
            return
        if not self.ctx.dialogs.question(self, "Remove model", f"Delete {path.name} ({path})? "
                                         "Downloading it again takes a while."):
            return
        try:
            self.store().remove(path.name)
        except (EngineError, OSError) as e:
            self.ctx.dialogs.error(self, "Cannot remove the model", str(e))
        if self.ctx.settings.model_path and Path(self.ctx.settings.model_path) == path:
            self.ctx.settings.forget_model(str(path))
        self.refresh()

    def _move(self) -> None:
        if self.downloader.running:
            self.ctx.dialogs.error(self, "Busy", "Wait until the download has finished, or cancel it.")
            return
        store = self.store()
        folder = self.ctx.dialogs.open_dir(self, "Move the models to", str(store.root.parent))
        if not folder:
            return
        old = str(self.ctx.models_folder())

        def switch(new_root: Path) -> None:  # at the move's switch: a kill after it finds the new folder
            self.ctx.settings.models_dir = str(new_root)
            for key in ("model_path",):  # the default model moved with the folder
                value = getattr(self.ctx.settings, key)
                if value and value.startswith(old):
                    setattr(self.ctx.settings, key, str(new_root) + value[len(old):])
            self.ctx.settings.sync()

        try:
            move_store(store, Path(folder), on_switch=switch)
        except (EngineError, OSError) as e:
            self.ctx.dialogs.error(self, "Cannot move the models", str(e))
        self.refresh()

    def _import(self) -> None:
        self.import_checkpoint.emit(self.panel.precision())
        self.accept()

    def _save_endpoint(self) -> None:
        self.ctx.settings.hub_endpoint = self.endpoint.text().strip()
