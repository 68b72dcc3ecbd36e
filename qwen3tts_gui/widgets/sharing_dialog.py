"""File > Let other apps use these voices…: the switch, the address and the key to give other programs."""

from __future__ import annotations

from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from ..controllers.sharing import ON, STARTING, VoiceSharing

INTRO = ("Programs that speak through OpenAI's speech API (Open WebUI, SillyTavern and others) "
         "can speak with your voices: give them the address and the key below, and a voice's name as the voice. "
         "The server keeps its own copy of the open model in memory while it is on.")


class SharingDialog(QDialog):
    def __init__(self, sharing: VoiceSharing, parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("Let other apps use these voices")
        self.sharing = sharing
        self.switch = QCheckBox("Let other apps use these voices")
        self.switch.setChecked(sharing.state != "off")
        self.switch.toggled.connect(sharing.set_enabled)
        intro = QLabel(INTRO)
        intro.setWordWrap(True)
        self.address = QLineEdit()
        self.address.setReadOnly(True)
        self.key = QLineEdit()
        self.key.setReadOnly(True)
        self.port = QSpinBox()
        self.port.setRange(1024, 65535)
        self.port.setValue(sharing.port)
        self.port.editingFinished.connect(lambda: sharing.set_port(self.port.value()))
        self.everywhere = QCheckBox("Other computers and containers (Docker) may connect too, with the key")
        self.everywhere.setChecked(sharing.everywhere)
        self.everywhere.setToolTip("Listens on every network address of this computer instead of 127.0.0.1 only. "
                                   "From a Docker container use http://host.docker.internal:PORT/v1.")
        self.everywhere.toggled.connect(sharing.set_everywhere)
        copy_address = QPushButton("Copy")
        copy_address.clicked.connect(lambda: QGuiApplication.clipboard().setText(self.address.text()))
        copy_key = QPushButton("Copy")
        copy_key.clicked.connect(lambda: QGuiApplication.clipboard().setText(self.key.text()))
        new_key = QPushButton("New key")
        new_key.setToolTip("The old key stops working; give the other programs the new one.")
        new_key.clicked.connect(sharing.new_key)
        form = QFormLayout()
        form.addRow("Address", _row(self.address, copy_address))
        form.addRow("API key", _row(self.key, copy_key, new_key))
        form.addRow("Port", self.port)
        form.addRow("", self.everywhere)
        self.status = QLabel()
        self.status.setWordWrap(True)
        self.status.setObjectName("Muted")
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.close)
        layout = QVBoxLayout(self)
        layout.addWidget(intro)
        layout.addWidget(self.switch)
        layout.addLayout(form)
        layout.addWidget(self.status)
        layout.addWidget(buttons)
        sharing.changed.connect(self.refresh)
        self.refresh()

    def refresh(self) -> None:
        s = self.sharing
        self.switch.blockSignals(True)
        self.switch.setChecked(s.state != "off")
        self.switch.blockSignals(False)
        self.address.setText(s.address or f"http://127.0.0.1:{s.port}/v1")
        self.key.setText(s.key)
        if s.problem:
            self.status.setText(f"Off: {s.problem}")
        elif s.state == STARTING:
            self.status.setText("Starting: loading the model…")
        elif s.state == ON:
            reach = "this computer and the network, with the key" if s.everywhere else "this computer only"
            self.status.setText(f"On: voices from {s.ctx.library.folder}, {reach}.")
        else:
            self.status.setText("Off.")


def _row(*widgets: QWidget) -> QWidget:
    row = QWidget()
    layout = QHBoxLayout(row)
    layout.setContentsMargins(0, 0, 0, 0)
    for w in widgets:
        layout.addWidget(w)
    return row
