"""Making a new voice: a reference from an audio file or the microphone, trimmed, checked, named, created."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QFormLayout,
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from ..coach import voiced_range
from ..context import AppContext
from ..diagnostics import log, user_message
from ..engine_adapter import Voice, VoiceError, read_audio_file
from ..workers import CallWorker
from .elided_label import ElidedLabel
from .heard_line import HeardLine
from .language_combo import LanguageCombo
from .level_meter import LevelMeter
from .reference_coach import ReferenceCoach
from .waveform import WaveformView

AUDIO_FILTERS = "Audio files (*.wav *.flac *.ogg *.oga *.opus *.mp3);;All files (*)"


class NewVoiceEditor(QWidget):
    """The "New from file… / Record" buttons, and below them the editor, shown once there is a reference."""

    created = Signal(object)  # the Path of the new voice file in the library
    get_recogniser = Signal()  # the "get a speech recognition model" link: the Models dialog's Whisper models
    meter: LevelMeter  # made below the recorder that feeds them
    rec_time: QLabel

    def __init__(self, ctx: AppContext, parent: QWidget | None = None):
        super().__init__(parent)
        self.ctx = ctx
        self.recorder = ctx.new_recorder()
        self.recorder.level.connect(lambda db: self.meter.set_level(db))
        self.recorder.elapsed.connect(lambda s: self.rec_time.setText(f"● Recording  {s:.1f} s"))
        self.recorder.stopped.connect(self._recorded)
        self.recorder.error.connect(self._record_failed)
        self._ref: tuple[np.ndarray, int] | None = None  # reference samples (n, ch) at their own rate
        self._ref_path: Path | None = None  # the file it came from (None for recordings)
        self._play_offset = 0

        self.new_file_btn = QPushButton("New from file…")
        self.new_file_btn.clicked.connect(self.choose_reference_file)
        self.record_btn = QPushButton("● Record")
        self.record_btn.setObjectName("RecordButton")
        self.record_btn.clicked.connect(self.toggle_record)
        new_row = QHBoxLayout()
        new_row.addWidget(self.new_file_btn)
        new_row.addWidget(self.record_btn)

        self.frame = QFrame()
        self.frame.setObjectName("NewVoice")
        ed = QVBoxLayout(self.frame)
        ed.setContentsMargins(10, 10, 10, 10)
        ed.setSpacing(6)
        ed_title = QLabel("New voice")
        ed_title.setObjectName("SectionTitle")
        ed.addWidget(ed_title)
        self.rec_row = QWidget()
        rr = QHBoxLayout(self.rec_row)
        rr.setContentsMargins(0, 0, 0, 0)
        self.rec_time = QLabel("● Recording  0.0 s")
        self.rec_time.setObjectName("RecordingLabel")
        self.meter = LevelMeter()
        rr.addWidget(self.rec_time)
        rr.addWidget(self.meter, 1)
        ed.addWidget(self.rec_row)
        self.rec_row.hide()
        self.ref_wave = WaveformView(selectable=True, placeholder="Record or open a reference (3-10 s of speech)")
        self.ref_wave.setMinimumHeight(80)
        self.ref_wave.selection_changed.connect(self._trim_changed)
        ed.addWidget(self.ref_wave)
        trim_row = QHBoxLayout()
        self.play_ref_btn = QPushButton("▶ Play")
        self.play_ref_btn.clicked.connect(self.play_reference)
        self.trim_btn = QPushButton("Trim silence")
        self.trim_btn.setToolTip("Select the part between the leading and trailing silence")
        self.trim_btn.clicked.connect(self.trim_silence)
        self.select_all_btn = QPushButton("Use all")
        self.select_all_btn.clicked.connect(lambda: self.ref_wave.set_selection(0, len(self.ref_wave.samples)))
        trim_row.addWidget(self.play_ref_btn)
        trim_row.addWidget(self.trim_btn)
        trim_row.addWidget(self.select_all_btn)
        trim_row.addStretch(1)
        ed.addLayout(trim_row)
        self.coach = ReferenceCoach()
        ed.addWidget(self.coach)
        form = QFormLayout()
        form.setVerticalSpacing(6)
        self.name_edit = QLineEdit()
        self.name_edit.setPlaceholderText("e.g. Anna, calm")
        self.name_edit.returnPressed.connect(self.create_voice)  # Enter in the name: the voice is ready
        form.addRow("Name", self.name_edit)
        self.lang_combo = LanguageCombo()
        form.addRow("Language", self.lang_combo)
        self.transcript = QPlainTextEdit()
        self.transcript.setPlaceholderText("What is said in the reference (optional)")
        self.transcript.setFixedHeight(64)
        self.transcript.setTabChangesFocus(True)  # a one-line answer: Tab moves on, as in the name field
        form.addRow("Transcript", self.transcript)
        # what the speech recogniser is doing or heard, its progress and Cancel (or the link to get one), the
        # setting that turns it off; the coach's transcript notes and their fixes
        self.heard = HeardLine(ctx, self.transcript, self.lang_combo, self.coach, self._selected_reference)
        self.heard.get_recogniser.connect(self.get_recogniser)
        form.addRow("", self.heard)
        # the why, in a label that wraps: as the box's placeholder it was cut off after two lines
        self.transcript_hint = QLabel("With a transcript the voice also copies the delivery (in-context "
                                      "cloning); without it only the voice timbre is used.")
        self.transcript_hint.setObjectName("Muted")
        self.transcript_hint.setWordWrap(True)
        form.addRow("", self.transcript_hint)
        # it explains the empty box: once a transcript is typed, its room goes back to the rest of the column
        self.transcript.textChanged.connect(
            lambda: self.transcript_hint.setVisible(not self.transcript.toPlainText().strip()))
        ed.addLayout(form)
        self.create_btn = QPushButton("Create voice")
        self.create_btn.setObjectName("PrimaryButton")
        self.create_btn.setToolTip("Create the voice (Ctrl+Shift+C, or Enter in the name field)")
        self.create_btn.clicked.connect(self.create_voice)
        self.discard_btn = QPushButton("Discard")
        self.discard_btn.clicked.connect(self.discard_reference)
        self.create_status = ElidedLabel("")  # "Analysing the reference…" must not widen the pane
        self.create_status.setObjectName("Muted")
        btns = QHBoxLayout()
        btns.addWidget(self.create_status, 1)
        btns.addWidget(self.discard_btn)
        btns.addWidget(self.create_btn)
        ed.addLayout(btns)
        self.frame.hide()

        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(6)
        lay.addLayout(new_row)
        lay.addWidget(self.frame)

        ctx.player.position.connect(self._position)
        self._update_record_button()

    # --- state seen from outside ---------------------------------------------------------------------------
    def is_open(self) -> bool:
        """The editor part is shown (a reference is loaded, or being recorded)."""
        return self.frame.isVisible()

    def reference(self) -> tuple[np.ndarray, int] | None:
        """The reference samples (n, channels) at their own rate, untrimmed."""
        return self._ref

    def set_languages(self, codes: list[str]) -> None:
        self.lang_combo.set_languages(codes)

    # --- the reference: a file or the microphone -----------------------------------------------------------
    def choose_reference_file(self) -> None:
        folder = self.ctx.settings.last_reference_dir or str(Path.home())
        path = self.ctx.dialogs.open_file(self, "Open reference audio", folder, AUDIO_FILTERS)
        if path:
            self.load_reference_file(Path(path))

    def load_reference_file(self, path: Path) -> bool:
        try:
            samples, sr = read_audio_file(path)
        except Exception as e:
            self.ctx.dialogs.error(self, "Cannot use this file", user_message(e, f"reading {path.name}"))
            return False
        self.ctx.settings.last_reference_dir = str(path.parent)
        self.set_reference(samples, sr, path)
        if not self.name_edit.text():
            self.name_edit.setText(path.stem.replace("_", " "))
        self.name_edit.selectAll()  # the file's name, selected: typing replaces it
        return True

    def toggle_record(self) -> None:
        if self.recorder.recording:
            self.recorder.stop()
            return
        problem = self.recorder.problem()
        if problem:
            self._update_record_button()
            self.ctx.dialogs.error(self, "Cannot record", f"{problem}. You can open an audio file instead.")
            return
        self.ctx.player.stop()
        if self.recorder.start():
            self.frame.show()
            self.rec_row.show()
            self.meter.reset()
            self.ref_wave.clear()
            self.coach.set_notes([])
            self.record_btn.setText("■ Stop")
            self.update_buttons()

    def stop_recording(self) -> None:
        if self.recorder.recording:
            self.recorder.stop()

    def _record_failed(self, message: str) -> None:
        self.record_btn.setText("● Record")
        self.record_btn.setToolTip(message)
        self.rec_row.hide()
        self.ctx.dialogs.error(self, "Cannot record", f"{message}. You can open an audio file instead.")

    def _recorded(self, samples: np.ndarray, sr: int) -> None:
        self.record_btn.setText("● Record")
        self.rec_row.hide()
        if len(samples) == 0:
            self.ctx.dialogs.error(self, "Nothing recorded", "The microphone delivered no sound.")
            return
        self.set_reference(samples.reshape(-1, 1), sr, None)
        start, end = voiced_range(samples, sr)
        self.ref_wave.set_selection(start, end)  # suggest a trim of the silence around the speech

    def set_reference(self, samples: np.ndarray, sr: int, path: Path | None) -> None:
        self._ref = (samples, sr)
        self._ref_path = path
        self.ref_wave.set_audio(samples, sr)
        self.coach.analyze(samples, sr)
        self.create_status.setText("")
        self.heard.new_reference()
        self.frame.show()
        self.update_buttons()
        # the next step, from the keyboard too: name, Tab, language, Tab, transcript
        self.name_edit.setFocus()

    def _trim_changed(self) -> None:
        if self._ref is None:
            return
        samples, sr = self._ref
        a, b = self.ref_wave.selected_samples()
        self.coach.analyze(samples[a:b], sr)
        self.heard.selection_changed()

    def trim_silence(self) -> None:
        if self._ref is not None:
            start, end = voiced_range(*self._ref)
            self.ref_wave.set_selection(start, end)

    def play_reference(self) -> None:
        if self.ctx.player.owner == "reference" and self.ctx.player.playing:
            self.ctx.player.stop()
            return
        if self._ref is None:
            return
        samples, sr = self._ref
        a, b = self.ref_wave.selected_samples()
        mono = samples.mean(axis=1) if samples.ndim == 2 else samples
        self._play_offset = a
        if not self.ctx.player.play(mono[a:b], sr, owner="reference"):
            self.ctx.player.say_cannot_play(every_time=True)

    def _position(self, sample: int) -> None:
        if self.ctx.player.owner == "reference":
            self.ref_wave.set_position(self._play_offset + sample)

    def discard_reference(self) -> None:
        if self.recorder.recording:
            self.recorder.stop()
        self._ref = None
        self._ref_path = None
        self.heard.clear()
        self.ref_wave.clear()
        self.coach.set_notes([])
        self.name_edit.clear()
        self.transcript.clear()
        self.frame.hide()

    def _selected_reference(self) -> tuple[np.ndarray, int] | None:
        """The selected part of the reference (all of it when nothing is selected), at its own rate."""
        if self._ref is None:
            return None
        samples, sr = self._ref
        a, b = self.ref_wave.selected_samples()
        return (samples[a:b] if b > a else samples), sr

    def stop_transcribing(self) -> None:
        """Before the window closes: the speech recogniser's thread is stopped and waited for."""
        self.heard.shutdown()

    def recogniser_installed(self) -> None:
        self.heard.recogniser_installed()

    # --- creating the voice --------------------------------------------------------------------------------
    def create_voice(self) -> None:
        if self._ref is None or not self.ctx.can_start(self):
            return
        synth = self.ctx.synth
        assert synth is not None  # can_start checked that a model is open
        samples, sr = self._ref
        a, b = self.ref_wave.selected_samples()
        trimmed = (a, b) != (0, len(samples))
        # An untouched file goes in by path: exactly what the CLI's --ref does.
        audio = (samples[a:b], sr) if trimmed or self._ref_path is None else self._ref_path
        ref_text = self.transcript.toPlainText().strip() or None
        name = self.name_edit.text().strip() or (self._ref_path.stem if self._ref_path else "My voice")
        language = self.lang_combo.language()
        worker = CallWorker(lambda: synth.create_voice(audio, ref_text=ref_text, name=name, language=language),
                            "creating the voice", self)
        worker.done.connect(self._voice_created)
        worker.failed.connect(self._voice_failed)
        if self.ctx.start_job(worker, self):
            self.create_status.setText("Analysing the reference…")

    def _voice_created(self, voice: Voice) -> None:
        try:
            path = self.ctx.library.add(voice)
        except (VoiceError, OSError) as e:  # Voice.save reports a full disk as VoiceError
            self.create_status.setText("")
            self.ctx.dialogs.error(self, "Cannot save the voice", user_message(e, "saving the voice"))
            return
        log.info("created voice %s", path)
        self.discard_reference()
        self.created.emit(path)

    def _voice_failed(self, message: str) -> None:
        self.create_status.setText("")
        self.ctx.dialogs.error(self, "Cannot create the voice", message)

    # --- buttons -------------------------------------------------------------------------------------------
    def _update_record_button(self) -> None:
        problem = self.recorder.problem()
        self.record_btn.setToolTip(problem or "Record a reference from the microphone")
        if problem:
            self.record_btn.setText("● Record (no microphone)")
        # red means ready to record: without a microphone it looks like any unavailable button (style.qss)
        if self.record_btn.property("unavailable") != bool(problem):
            self.record_btn.setProperty("unavailable", bool(problem))
            self.record_btn.style().unpolish(self.record_btn)
            self.record_btn.style().polish(self.record_btn)

    def update_buttons(self) -> None:
        playing_ref = self.ctx.player.owner == "reference" and self.ctx.player.playing
        self.play_ref_btn.setText("■ Stop" if playing_ref else "▶ Play")
        has_ref = self._ref is not None and not self.recorder.recording
        for b in (self.play_ref_btn, self.trim_btn, self.select_all_btn):
            b.setEnabled(has_ref)
        self.play_ref_btn.setEnabled(has_ref and (playing_ref or self.ctx.player.problem() is None))
        self.play_ref_btn.setToolTip(self.ctx.player.play_tooltip("Play the selected part of the reference"))
        self.create_btn.setEnabled(has_ref and self.ctx.synth is not None and not self.ctx.busy)
        self.create_btn.setToolTip("" if self.ctx.synth is not None else "Open a model first")
        self.new_file_btn.setEnabled(not self.recorder.recording)

