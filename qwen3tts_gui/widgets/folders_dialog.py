"""File > Folders: where models, voices and saved audio go (platformdirs defaults, changeable), the WAV sample
format, and how much room the take history may use."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
)

from ..context import AppContext
from ..data.paths import output_dir, takes_dir
from ..data.settings import MAX_TAKES_MB, MIN_TAKES_MB
from ..engine_adapter import remember_models_dir


class FoldersDialog(QDialog):
    def __init__(self, ctx: AppContext, parent=None, history_bytes: Callable[[], int] = lambda: 0,
                 clear_history: Callable[[], None] = lambda: None):
        super().__init__(parent)
        self.ctx = ctx
        self.setWindowTitle("Folders")
        self.setMinimumWidth(620)
        s = ctx.settings
        self.models = QLineEdit(str(ctx.models_folder()))
        self.voices = QLineEdit(str(ctx.library.folder))
        self.output = QLineEdit(s.output_dir or str(output_dir()))
        grid = QGridLayout()
        grid.setHorizontalSpacing(8)
        for row, (label, edit, tip) in enumerate([
            ("Models", self.models, "Imported checkpoints and the demo model are converted into this folder"),
            ("Voices", self.voices, "The voice library: one .qvoice file per voice"),
            ("Saved audio", self.output, "Where Save as… starts"),
        ]):
            name = QLabel(label)
            name.setToolTip(tip)
            edit.setToolTip(tip)
            choose = QPushButton("Choose…")
            choose.clicked.connect(lambda _=False, e=edit, t=label: self._choose(e, t))
            grid.addWidget(name, row, 0)
            grid.addWidget(edit, row, 1)
            grid.addWidget(choose, row, 2)
        row = grid.rowCount()
        self.wav_float = QCheckBox("Save WAV files (takes and batch) as 32-bit float (the default is 16-bit PCM)")
        self.wav_float.setChecked(s.wav_float)
        grid.addWidget(self.wav_float, row, 1, 1, 2)
        self.history_bytes = history_bytes
        self.clear_history = clear_history
        self.takes_limit = QSpinBox(minimum=MIN_TAKES_MB, maximum=MAX_TAKES_MB, singleStep=100, suffix=" MB")
        self.takes_limit.setValue(s.takes_limit_mb)
        self.takes_limit.setToolTip(f"Every take is kept in {takes_dir()} so it is there after a restart; the "
                                    "oldest takes are removed when the history grows past this size")
        self.history_used = QLabel()
        self.history_used.setObjectName("Muted")
        clear = QPushButton("Clear all takes…")
        clear.clicked.connect(self._clear_history)
        limit_row = QHBoxLayout()
        limit_row.addWidget(self.takes_limit)
        limit_row.addWidget(self.history_used, 1)
        limit_row.addWidget(clear)
        takes_label = QLabel("Take history")
        takes_label.setToolTip(self.takes_limit.toolTip())
        grid.addWidget(takes_label, row + 1, 0)
        grid.addLayout(limit_row, row + 1, 1, 1, 2)
        self._show_used()
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        lay = QVBoxLayout(self)
        lay.addLayout(grid)
        lay.addWidget(buttons)

    def _clear_history(self) -> None:
        self.clear_history()
        self._show_used()

    def _show_used(self) -> None:
        self.history_used.setText(f"{self.history_bytes() / 2**20:.1f} MB used now")

    def _choose(self, edit: QLineEdit, title: str) -> None:
        folder = self.ctx.dialogs.open_dir(self, f"{title} folder", edit.text())
        if folder:
            edit.setText(folder)

    def accept(self) -> None:
        s = self.ctx.settings
        models = self.models.text().strip()
        if models and Path(models) != self.ctx.models_folder():
            remember_models_dir(Path(models))  # `qwen3tts models ...` and --model NAME look there too
        s.models_dir = models
        s.output_dir = self.output.text().strip()
        s.wav_float = self.wav_float.isChecked()
        s.takes_limit_mb = self.takes_limit.value()
        voices = Path(self.voices.text().strip()) if self.voices.text().strip() else None
        if voices is not None and voices != self.ctx.library.folder:
            self.ctx.set_voices_folder(voices)
        super().accept()
