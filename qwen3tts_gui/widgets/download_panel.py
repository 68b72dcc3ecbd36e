"""Pick a model from the catalogue (or type a repository id), see its sizes, download it, watch, cancel.

Used on the welcome screen and in the Models dialog; the download itself belongs to the shared
ModelDownloader, so closing the dialog does not stop it.
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from ..downloads import ModelDownloader
from ..engine_adapter import (
    CATALOGUE,
    DEFAULT_PRECISION,
    WHISPER_CATALOGUE,
    ModelStore,
    StoreError,
    find_entry,
    format_bytes,
    pending_downloads,
    precisions,
)
from .plain_height import PlainHeight

# How the precision choice reads; the fast one first, the exact one a click away. Precisions not listed show as
# they are named.
PRECISION_LABELS = {"q8": "Fast (8-bit)", "fp16": "Exact (fp16)", "fp32": "Exact, larger (fp32)"}
PRECISION_ORDER = ("q8", "fp16", "fp32")
TRADE_OFF = ("Fast (8-bit) generates speech faster and takes the least disk, with output very close to the "
             "original model's but not identical; Exact (fp16) gives exactly the original's output.")


def entry_label(entry) -> str:
    if entry.recognises_speech:
        return f"Whisper {entry.size} (speech recognition)"
    return f"Qwen3-TTS {entry.size} {entry.kind}"


def converted_size(entry, precision: str) -> tuple[int | None, str]:
    """An entry's size on disk after conversion, and the precision it is converted to (Whisper models are not
    made 8-bit: the installer converts them to fp16 then)."""
    if entry.recognises_speech and entry.bundle_size(precision) is None:
        precision = "fp16"
    return entry.bundle_size(precision), precision


def precision_label(precision: str) -> str:
    return PRECISION_LABELS.get(precision, precision)


class DownloadPanel(PlainHeight, QWidget):
    installed = Signal(object)  # Path of the new bundle

    def __init__(self, downloader: ModelDownloader, parent: QWidget | None = None, recognisers: bool = False):
        """recognisers: the Whisper models (speech recognition, for transcripts) are offered too."""
        super().__init__(parent)
        self.downloader = downloader
        self.ctx = downloader.ctx
        self.model_combo = QComboBox()
        self.model_combo.setEditable(True)  # any repository id in the same layout (fine-tunes) works too
        self.model_combo.setToolTip("A Qwen3-TTS model, or any repository id such as OWNER/NAME")
        for e in CATALOGUE + (WHISPER_CATALOGUE if recognisers else ()):
            self.model_combo.addItem(entry_label(e), e.repo_id)
        self.precision_combo = QComboBox()
        offered = precisions()
        for p in sorted(offered, key=lambda p: PRECISION_ORDER.index(p) if p in PRECISION_ORDER else len(offered)):
            self.precision_combo.addItem(precision_label(p), p)
        chosen = self.ctx.settings.download_precision or DEFAULT_PRECISION
        self.precision_combo.setCurrentIndex(max(self.precision_combo.findData(chosen), 0))
        self.precision_combo.setToolTip(TRADE_OFF)
        # the choice shown is the one used: by Download, by Import checkpoint beside it and by File > Import
        self.precision_combo.activated.connect(
            lambda _i: setattr(self.ctx.settings, "download_precision", self.precision()))
        self.trade_off = QLabel(TRADE_OFF)
        self.trade_off.setObjectName("Muted")
        self.trade_off.setWordWrap(True)
        self.sizes = QLabel("")
        self.sizes.setObjectName("Muted")
        self.sizes.setWordWrap(True)
        self.download_btn = QPushButton("Download")
        self.download_btn.setObjectName("PrimaryButton")
        self.download_btn.clicked.connect(self.start)
        self.cancel_btn = QPushButton("Cancel")
        self.cancel_btn.clicked.connect(self.downloader.cancel)
        self.bar = QProgressBar()
        self.bar.setRange(0, 1000)
        self.status = QLabel("")
        self.status.setObjectName("Muted")
        self.status.setWordWrap(True)

        row = QHBoxLayout()
        row.addWidget(self.model_combo, 1)
        row.addWidget(self.precision_combo)
        row.addWidget(self.download_btn)
        row.addWidget(self.cancel_btn)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addLayout(row)
        lay.addWidget(self.trade_off)
        lay.addWidget(self.sizes)
        lay.addWidget(self.bar)
        lay.addWidget(self.status)

        self.model_combo.currentIndexChanged.connect(self.refresh)
        self.model_combo.editTextChanged.connect(self.refresh)
        self.precision_combo.currentIndexChanged.connect(self.refresh)
        downloader.progress.connect(self._progress)
        downloader.installed.connect(self._installed)
        downloader.failed.connect(self._failed)
        downloader.cancelled.connect(self._cancelled)
        downloader.running_changed.connect(lambda _running: self.refresh())
        self._show_unfinished()
        self.refresh()

    def _show_unfinished(self) -> None:
        """After a restart, offer the download that was left unfinished (its model and precision)."""
        pending = self._pending()
        if not pending or self.downloader.running:
            return
        p = pending[0]
        i = self.model_combo.findData(p.repo_id)
        if i >= 0:
            self.model_combo.setCurrentIndex(i)
        else:
            self.model_combo.setEditText(p.repo_id)
        self.precision_combo.setCurrentIndex(max(self.precision_combo.findData(p.precision), 0))

    def source(self) -> str:
        """The repository id to download (a catalogue choice, or what the user typed)."""
        i = self.model_combo.currentIndex()
        text = self.model_combo.currentText().strip()
        if i >= 0 and text == self.model_combo.itemText(i):
            return self.model_combo.itemData(i)
        entry = find_entry(text)
        return entry.repo_id if entry is not None else text

    def precision(self) -> str:
        return self.precision_combo.currentData()

    def refresh(self) -> None:
        running = self.downloader.running
        source = self.source()
        entry = find_entry(source)
        if entry is not None:
            converted, precision = converted_size(entry, self.precision())
            on_disk = f"about {format_bytes(converted)} on disk" if converted else "on-disk size not known"
            self.sizes.setText(f"{entry.abilities[:1].upper()}{entry.abilities[1:]}. "
                               f"{format_bytes(entry.download_bytes)} to download from {entry.repo_id}, "
                               f"{on_disk} after conversion to {precision_label(precision)}.")
        else:
            self.sizes.setText(f"{source or 'OWNER/NAME'}: sizes are read from the repository when it starts")
        pending = self.pending_for(source)
        self.download_btn.setText("Resume download" if pending is not None and not running else "Download")
        if pending is not None and not running:  # otherwise the last outcome (an error, "Installed") stays
            self.status.setText(f"Unfinished download: {format_bytes(pending.done_bytes)} of "
                                f"{format_bytes(pending.total_bytes)}; it resumes where it stopped.")
        self.bar.setVisible(running or pending is not None)
        if pending is not None and not running:
            self.bar.setValue(int(850 * pending.done_bytes / max(pending.total_bytes, 1)))
        self.download_btn.setEnabled(not running and bool(source))
        self.cancel_btn.setEnabled(running)
        for w in (self.model_combo, self.precision_combo):
            w.setEnabled(not running)

    def pending_for(self, repo_id: str):
        for p in self._pending():
            if p.repo_id == repo_id:
                return p
        return None

    def _pending(self) -> list:
        """Unfinished downloads; none when the models folder cannot be read (the status line says why)."""
        try:
            return pending_downloads(ModelStore(self.ctx.models_folder()))
        except StoreError as e:
            if not self.downloader.running:
                self.status.setText(str(e))
            return []

    def start(self) -> None:
        self.ctx.settings.download_precision = self.precision()
        if self.downloader.start(self.source(), self.precision()):
            self.status.setText("Starting…")
            self.bar.setVisible(True)

    def _progress(self, fraction: float, message: str) -> None:
        self.bar.setValue(int(fraction * 1000))
        self.status.setText(message[:1].upper() + message[1:])

    def _installed(self, path) -> None:
        self.status.setText(f"Installed {path.name}.")
        self.installed.emit(path)

    def _failed(self, message: str) -> None:
        self.status.setText(message)

    def _cancelled(self) -> None:
        self.refresh()
        if self.pending_for(self.downloader.source) is not None:
            self.status.setText("Download paused. Download again to resume where it stopped.")
        else:
            self.status.setText("Cancelled.")
