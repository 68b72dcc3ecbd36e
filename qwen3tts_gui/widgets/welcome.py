"""Shown while no model is loaded: what a model is, how to get one, and the demo model."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from ..downloads import ModelDownloader
from .download_panel import DownloadPanel

TEXT = """
<p>Qwen3-TTS Studio speaks any text in a voice you record or load, locally on this computer.
It needs a <b>model</b> first: a folder converted from the Qwen3-TTS 12 Hz checkpoint.</p>
<ol>
<li><b>Download one below</b>: it is fetched from Hugging Face (or the mirror set in File &gt; Models),
converted once, and opened. A download you cancel, or that the network interrupts, resumes where it stopped.</li>
<li><b>Already have a converted model?</b> Open its folder (it contains <tt>manifest.json</tt>).
<b>Downloaded the checkpoint yourself?</b> Import its folder.</li>
<li><b>Just looking?</b> The demo model is tiny and made of random numbers: it speaks noise, but shows
every part of the app within seconds.</li>
</ol>
"""


class WelcomeView(QWidget):
    open_model = Signal()
    import_checkpoint = Signal(str)  # the precision chosen beside the button ("" without a download panel)
    use_demo = Signal()

    def __init__(self, downloader: ModelDownloader | None = None, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("Welcome")
        card = QFrame()
        card.setObjectName("WelcomeCard")
        card.setMaximumWidth(640)
        title = QLabel("Welcome to Qwen3-TTS Studio")
        title.setObjectName("WelcomeTitle")
        body = QLabel(TEXT)
        body.setObjectName("WelcomeBody")
        body.setWordWrap(True)
        body.setTextFormat(Qt.TextFormat.RichText)
        self.open_btn = QPushButton("Open model folder…")
        self.open_btn.setObjectName("PrimaryButton")
        self.open_btn.clicked.connect(self.open_model)
        self.import_btn = QPushButton("Import checkpoint…")
        self.import_btn.clicked.connect(
            lambda: self.import_checkpoint.emit(self.download.precision() if self.download is not None else ""))
        self.demo_btn = QPushButton("Try the demo model")
        self.demo_btn.clicked.connect(self.use_demo)
        self.status = QLabel("")
        self.status.setObjectName("Muted")
        self.status.setWordWrap(True)
        buttons = QHBoxLayout()
        buttons.setSpacing(10)
        buttons.addWidget(self.open_btn)
        buttons.addWidget(self.import_btn)
        buttons.addWidget(self.demo_btn)
        buttons.addStretch(1)
        inner = QVBoxLayout(card)
        inner.setContentsMargins(32, 28, 32, 28)
        inner.setSpacing(14)
        inner.addWidget(title)
        inner.addWidget(body)
        self.download: DownloadPanel | None = None
        if downloader is not None:
            heading = QLabel("Download a model")
            heading.setObjectName("SectionTitle")
            self.download = DownloadPanel(downloader)
            inner.addWidget(heading)
            inner.addWidget(self.download)
        inner.addLayout(buttons)
        inner.addWidget(self.status)
        outer = QVBoxLayout(self)
        outer.addStretch(1)
        row = QHBoxLayout()
        row.addStretch(1)
        row.addWidget(card, 4)
        row.addStretch(1)
        outer.addLayout(row)
        outer.addStretch(2)

    def set_busy(self, message: str) -> None:
        self.status.setText(message)
        for b in (self.open_btn, self.import_btn, self.demo_btn):
            b.setEnabled(not message)
