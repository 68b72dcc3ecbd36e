"""Under a new voice's transcript box: what the speech recogniser is doing (progress, Cancel) or heard, the link to
get a recogniser when none is installed, the setting that turns it off; and the coach's transcript notes.

Words it heard go into the box only while the box is empty or still holds what it put there: typed text is never
replaced, what was heard is offered beside it instead.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from ..coach import speech_seconds, transcript_notes
from ..context import AppContext
from ..controllers.transcript import TranscriptWriter
from ..engine_adapter import Transcript
from .language_combo import LanguageCombo
from .reference_coach import ReferenceCoach

WRITTEN = "Written down from the audio: check it."
# A new selection is written down again once it has rested this long (a drag on the waveform changes it many times
# a second) and only if it holds more or less speech than the part written down (trimming silence changes nothing)
SELECTION_REST_MS = 700
SPEECH_CHANGED_S = 0.25


class HeardLine(QWidget):
    get_recogniser = Signal()  # the "get a speech recognition model" link: the Models dialog's Whisper models

    def __init__(self, ctx: AppContext, transcript: QPlainTextEdit, language: LanguageCombo, coach: ReferenceCoach,
                 reference: Callable[[], tuple[np.ndarray, int] | None], parent: QWidget | None = None):
        super().__init__(parent)
        self.ctx, self.transcript, self.language, self.coach = ctx, transcript, language, coach
        self.reference = reference  # the selected part of the reference, or None without one
        self.writer = TranscriptWriter(ctx, self)
        self.writer.progress.connect(self._progress)
        self.writer.heard.connect(self._heard)
        self.writer.failed.connect(self._not_heard)
        self.writer.running_changed.connect(self._running)
        self.transcript_heard: Transcript | None = None  # what the recogniser heard in the current reference
        self._filled = ""  # the text the recogniser put in the box (any other text was typed)
        self._voiced: float | None = None  # seconds of speech in the part last written down (None: not asked)
        self._rest = QTimer(self)
        self._rest.setSingleShot(True)
        self._rest.setInterval(SELECTION_REST_MS)
        self._rest.timeout.connect(self._selection_rested)

        self.label = QLabel("")
        self.label.setObjectName("Muted")
        self.label.setWordWrap(True)
        self.label.setTextFormat(Qt.TextFormat.RichText)
        self.label.linkActivated.connect(self._link)
        self.label.hide()
        self.progress = QProgressBar()
        self.progress.setRange(0, 100)
        self.progress.setMaximumWidth(120)
        self.progress.setTextVisible(False)
        self.progress.hide()
        self.cancel_btn = QPushButton("Cancel")
        self.cancel_btn.setToolTip("Stop writing down the reference's words")
        self.cancel_btn.clicked.connect(self.cancel)
        self.cancel_btn.hide()
        self.auto = QCheckBox("Fill in from the audio")
        self.auto.setToolTip("With a speech recognition (Whisper) model installed, a new reference's words are "
                             "written into the transcript box; typed text is never replaced")
        self.auto.setChecked(ctx.settings.auto_transcript)
        self.auto.toggled.connect(self._auto_toggled)
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.label, 1)
        row.addWidget(self.progress)
        row.addWidget(self.cancel_btn)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(2)
        lay.addLayout(row)
        lay.addWidget(self.auto)

        transcript.textChanged.connect(self.check)
        language.currentIndexChanged.connect(lambda _i: self.check())
        coach.fix.connect(self.apply_fix)

    # --- what the editor tells it ----------------------------------------------------------------------------
    def new_reference(self) -> None:
        self.transcript_heard = None
        self._voiced = None
        self._rest.stop()
        self.write_down()

    def selection_changed(self) -> None:
        """The part of the reference to use changed: the coach's notes now, its words once the selection rests."""
        self.check()
        if self._voiced is not None:
            self._rest.start()

    def _selection_rested(self) -> None:
        reference = self.reference()
        if reference is not None and self._voiced is not None and self.ctx.settings.auto_transcript \
                and abs(speech_seconds(*reference) - self._voiced) > SPEECH_CHANGED_S:
            self.write_down()

    def clear(self) -> None:
        self._voiced = None
        self._rest.stop()
        self.writer.cancel()
        self.transcript_heard = None
        self._filled = ""
        self._say("")
        self.coach.set_transcript_notes([])

    def recogniser_installed(self) -> None:
        """A speech recognition model has just been installed: the open reference's words, if none were heard."""
        if self.reference() is not None and self.transcript_heard is None and not self.writer.running:
            self.write_down()

    def shutdown(self) -> None:
        self.writer.shutdown()

    # --- writing the words down ------------------------------------------------------------------------------
    def write_down(self, by_hand: bool = False) -> None:
        """Transcribe the selected part of the reference on a worker thread (when the setting is on, or asked by
        hand), or say how to get a model that can."""
        reference = self.reference()
        if reference is None or not (by_hand or self.ctx.settings.auto_transcript):
            self._say("")
            return
        chosen = self.language.language()  # a language the user chose is heard in; Auto-detect: Whisper's choice
        if self.writer.start(*reference, language=None if chosen == "auto" else chosen):
            self._voiced = speech_seconds(*reference)
        else:
            self._say("<a href='models'>Get a speech recognition model</a> to have the words written down from "
                      "the audio.")

    def cancel(self) -> None:
        if self.writer.running:
            self.writer.cancel()
            self._say("Stopped. <a href='again'>Write the words down</a>")

    def _auto_toggled(self, on: bool) -> None:
        self.ctx.settings.auto_transcript = on
        if not on:
            self.writer.cancel()
            self._say("")
        elif self.transcript_heard is None:
            self.write_down()

    def _running(self, running: bool) -> None:
        self.progress.setVisible(running)
        self.cancel_btn.setVisible(running)
        if running:
            self.progress.setValue(0)
            self._say("Listening…")  # beside the bar and Cancel: a longer line wrapped to three

    def _progress(self, fraction: float) -> None:
        self.progress.setValue(int(round(100 * fraction)))

    def _heard(self, transcript: Transcript) -> None:
        self.transcript_heard = transcript
        heard = transcript.text.strip()
        typed = self.transcript.toPlainText().strip()
        if not heard:
            self._say("No words were heard in the reference.")
        elif not typed or typed == self._filled:
            self._filled = heard
            self.transcript.setPlainText(heard)
            self._say(WRITTEN)
        elif typed == heard:
            self._say("What was heard matches the transcript.")
        else:
            self._say(f"Heard: “{_escape(heard)}” <a href='use'>Use what was heard</a>")
        self.check()

    def _not_heard(self, message: str) -> None:
        line = " ".join(message.split())
        self._say(f"The words could not be written down: {_escape(line)} <a href='again'>Try again</a>")

    def _say(self, html: str) -> None:
        self.label.setText(html)
        self.label.setVisible(bool(html))

    def _link(self, link: str) -> None:
        if link == "models":
            self.get_recogniser.emit()
        elif link == "again":
            self.write_down(by_hand=True)
        elif link == "use":
            self.apply_fix("use_heard")

    # --- the coach ---------------------------------------------------------------------------------------------
    def apply_fix(self, action: str) -> None:
        """A coach note's one-click fix."""
        if action == "use_heard" and self.transcript_heard is not None:
            self._filled = self.transcript_heard.text.strip()
            self.transcript.setPlainText(self._filled)
            self._say(WRITTEN)
        elif action == "edit_transcript":
            self.transcript.setFocus()
            self.transcript.selectAll()
        elif action.startswith("language:"):
            i = self.language.findData(action.partition(":")[2])
            if i >= 0:
                self.language.setCurrentIndex(i)

    def check(self) -> None:
        """The coach's transcript notes for the box's text, the selected audio and what was heard."""
        reference = self.reference()
        if reference is None:
            self.coach.set_transcript_notes([])
            return
        if self.label.text() == WRITTEN and self.transcript.toPlainText().strip() != self._filled:
            self._say("")  # the words are the user's now: the coach compares them with what was heard
        heard = self.transcript_heard
        languages = tuple(self.language.itemData(i) for i in range(self.language.count()))
        self.coach.set_transcript_notes(transcript_notes(
            self.transcript.toPlainText(), speech_seconds(*reference),
            heard.text if heard is not None else None,
            heard.language_name if heard is not None and heard.language_detected else "",
            self.language.language(), languages))


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
