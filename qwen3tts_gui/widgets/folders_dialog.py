"""File > Folders: where models, voices and saved audio go (platformdirs defaults, changeable)."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QGridLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
)

from ..context import AppContext
from ..paths import output_dir


class FoldersDialog(QDialog):
    def __init__(self, ctx: AppContext, parent=None):
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
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        lay = QVBoxLayout(self)
        lay.addLayout(grid)
        lay.addWidget(buttons)

    def _choose(self, edit: QLineEdit, title: str) -> None:
        folder = self.ctx.dialogs.open_dir(self, f"{title} folder", edit.text())
        if folder:
            edit.setText(folder)

    def accept(self) -> None:
        s = self.ctx.settings
        s.models_dir = self.models.text().strip()
        s.output_dir = self.output.text().strip()
        voices = Path(self.voices.text().strip()) if self.voices.text().strip() else None
        if voices is not None and voices != self.ctx.library.folder:
            self.ctx.set_voices_folder(voices)
        super().accept()
