"""Voice panel: the voice library, and making a new voice from a recording or an audio file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QFormLayout,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from ..coach import voiced_range
from ..context import AppContext
from ..diagnostics import log, user_message
from ..engine_adapter import SAMPLE_RATE, Voice, VoiceError, read_audio_file
from ..voices import SUFFIX, VoiceEntry
from ..workers import CallWorker
from .language_combo import LanguageCombo, language_title
from .level_meter import LevelMeter
from .reference_coach import ReferenceCoach
from .waveform import WaveformView

AUDIO_FILTERS = "Audio files (*.wav *.flac *.ogg *.oga *.opus *.mp3);;All files (*)"


class VoicePanel(QWidget):
    voice_changed = Signal()

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

        title = QLabel("Voice")
        title.setObjectName("SectionTitle")
        self.list = QListWidget()
        self.list.setObjectName("VoiceList")
        self.list.currentItemChanged.connect(lambda *_: self._selection_changed())
        self.list.itemDoubleClicked.connect(lambda _: self.play_selected())

        self.new_file_btn = QPushButton("New from file…")
        self.new_file_btn.clicked.connect(self.choose_reference_file)
        self.record_btn = QPushButton("● Record")
        self.record_btn.setObjectName("RecordButton")
        self.record_btn.clicked.connect(self.toggle_record)
        new_row = QHBoxLayout()
        new_row.addWidget(self.new_file_btn)
        new_row.addWidget(self.record_btn)

        self.play_voice_btn = QPushButton("▶ Play")
        self.play_voice_btn.setToolTip("Play the selected voice's reference recording")
        self.play_voice_btn.clicked.connect(self.play_selected)
        self.rename_btn = QPushButton("Rename…")
        self.rename_btn.clicked.connect(self.rename_selected)
        self.delete_btn = QPushButton("Delete")
        self.delete_btn.clicked.connect(self.delete_selected)
        self.import_btn = QPushButton("Import…")
        self.import_btn.clicked.connect(self.import_voice)
        self.export_btn = QPushButton("Export…")
        self.export_btn.clicked.connect(self.export_selected)
        lib_row = QGridLayout()
        lib_row.setSpacing(4)
        for i, b in enumerate([self.play_voice_btn, self.rename_btn, self.delete_btn]):
            lib_row.addWidget(b, 0, i)
        lib_row.addWidget(self.import_btn, 1, 0, 1, 1)
        lib_row.addWidget(self.export_btn, 1, 1, 1, 1)
        self.details = QLabel("")
        self.details.setObjectName("Muted")
        self.details.setWordWrap(True)

        # New-voice editor: shown once a reference is recorded or loaded.
        self.editor = QFrame()
        self.editor.setObjectName("NewVoice")
        ed = QVBoxLayout(self.editor)
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
        form.addRow("Name", self.name_edit)
        self.lang_combo = LanguageCombo()
        form.addRow("Language", self.lang_combo)
        self.transcript = QPlainTextEdit()
        self.transcript.setPlaceholderText(
            "What is said in the reference (optional). With a transcript the voice also copies the "
            "delivery (in-context cloning); without it only the voice timbre is used."
        )
        self.transcript.setFixedHeight(64)
        form.addRow("Transcript", self.transcript)
        ed.addLayout(form)
        self.create_btn = QPushButton("Create voice")
        self.create_btn.setObjectName("PrimaryButton")
        self.create_btn.clicked.connect(self.create_voice)
        self.discard_btn = QPushButton("Discard")
        self.discard_btn.clicked.connect(self.discard_reference)
        self.create_status = QLabel("")
        self.create_status.setObjectName("Muted")
        btns = QHBoxLayout()
        btns.addWidget(self.create_status, 1)
        btns.addWidget(self.discard_btn)
        btns.addWidget(self.create_btn)
        ed.addLayout(btns)
        self.editor.hide()

        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(6)
        lay.addWidget(title)
        lay.addWidget(self.list, 1)
        lay.addLayout(lib_row)
        lay.addWidget(self.details)
        lay.addLayout(new_row)
        lay.addWidget(self.editor)

        self.setAcceptDrops(True)
        ctx.model_changed.connect(self._model_changed)
        ctx.busy_changed.connect(lambda _: self._update_buttons())
        ctx.voices_changed.connect(self.refresh)
        ctx.player.playing_changed.connect(lambda _: self._update_buttons())
        ctx.player.position.connect(self._position)
        self._model_changed()
        self.refresh()
        self._update_record_button()

    # --- library -----------------------------------------------------------------------------------------
    def refresh(self, select: Path | None = None) -> None:
        keep = select or (self.selected_entry().path if self.selected_entry() else None)
        if keep is None and self.ctx.settings.last_voice:
            keep = Path(self.ctx.settings.last_voice)
        self.list.blockSignals(True)
        self.list.clear()
        for entry in self.ctx.library.entries():
            kind = "with transcript" if entry.icl else "timbre only"
            date = entry.created[:10]
            item = QListWidgetItem(f"{entry.name}\n{language_title(entry.language)} · {kind} · {date}")
            item.setData(Qt.ItemDataRole.UserRole, entry)
            if self.ctx.synth is not None and entry.model_id != self.ctx.synth.model_id:
                item.setForeground(Qt.GlobalColor.gray)
                item.setToolTip("Made with a different model: create it again from its reference audio")
            self.list.addItem(item)
            if keep is not None and entry.path == keep:
                self.list.setCurrentItem(item)
        if self.list.currentItem() is None and self.list.count():
            self.list.setCurrentRow(0)
        self.list.blockSignals(False)
        self._selection_changed()
        problems = self.ctx.library.take_problems()
        if problems:
            self.ctx.dialogs.notice(self, "Some voice files were skipped", "\n".join(problems))

    def selected_entry(self) -> VoiceEntry | None:
        item = self.list.currentItem()
        return item.data(Qt.ItemDataRole.UserRole) if item else None

    def selected_name(self) -> str:
        entry = self.selected_entry()
        return entry.name if entry else ""

    def load_selected(self) -> Voice | None:
        """The selected voice, checked against the loaded model; shows a message and returns None if unusable."""
        entry = self.selected_entry()
        if entry is None:
            self.ctx.dialogs.error(self, "No voice", "Create a voice first: record one or open an audio file.")
            return None
        try:
            voice = self.ctx.library.load(entry.path)
        except VoiceError as e:
            self.ctx.dialogs.error(self, "Cannot use this voice", user_message(e))
            return None
        synth = self.ctx.synth
        if synth is not None and voice.model_id != synth.model_id:
            self._offer_recreate(entry, voice)
            return None
        return voice

    def _offer_recreate(self, entry: VoiceEntry, voice: Voice) -> None:
        """A voice from another model cannot be used as is, but its saved reference can make it again."""
        if voice.ref_audio is None or len(voice.ref_audio) == 0:
            self.ctx.dialogs.error(self, "Cannot use this voice",
                                   f"“{entry.name}” was made with a different model and has no reference audio "
                                   "to make it again; create a new voice from a recording.")
            return
        if not self.ctx.dialogs.question(
            self, "Voice from another model",
            f"“{entry.name}” was made with a different model. Make it again for this model from its saved "
            "reference recording? (Then press Generate again.)",
        ) or not self.ctx.can_start(self):
            return
        synth = self.ctx.synth
        worker = CallWorker(lambda: synth.create_voice((voice.ref_audio, SAMPLE_RATE), ref_text=voice.ref_text,
                                                       name=voice.name or entry.name, language=voice.language),
                            "making the voice again", self)
        worker.done.connect(lambda new: self._voice_recreated(entry.path, new))
        worker.failed.connect(self._voice_failed)
        if self.ctx.start_job(worker, self):
            self.details.setText(f"Making “{entry.name}” again for this model…")

    def _voice_recreated(self, path: Path, voice: Voice) -> None:
        try:
            voice.save(path)  # same file, same name: it simply works with the new model now
        except OSError as e:
            self.ctx.dialogs.error(self, "Cannot save the voice", user_message(e, "saving the voice"))
            return
        self.refresh(select=path)

    def voice_names(self) -> list[str]:
        return [self.list.item(i).data(Qt.ItemDataRole.UserRole).name for i in range(self.list.count())]

    def load_by_name(self, name: str) -> Voice:
        """For the batch: a voice by name (the selected one when name is empty). Raises VoiceError."""
        entries = [self.list.item(i).data(Qt.ItemDataRole.UserRole) for i in range(self.list.count())]
        entry = self.selected_entry() if not name else next((e for e in entries if e.name == name), None)
        if entry is None:
            raise VoiceError(f"there is no voice called “{name}”" if name else "no voice is selected")
        model_id = self.ctx.synth.model_id if self.ctx.synth is not None else None
        return self.ctx.library.load(entry.path, model_id=model_id)

    def _selection_changed(self) -> None:
        entry = self.selected_entry()
        if entry is not None:
            self.ctx.settings.last_voice = str(entry.path)
            transcript = f"Transcript: “{entry.ref_text}”" if entry.ref_text else "No transcript: timbre only."
            length = f"Reference {entry.ref_seconds:.1f} s. " if entry.ref_seconds else ""
            self.details.setText(length + transcript)
        else:
            self.details.setText("No voices yet. Record a few seconds of speech or open an audio file.")
        self._update_buttons()
        self.voice_changed.emit()

    def play_selected(self) -> None:
        entry = self.selected_entry()
        if entry is None:
            return
        if self.ctx.player.owner == ("voice", entry.path) and self.ctx.player.playing:
            self.ctx.player.stop()
            return
        voice = self.ctx.library.load(entry.path)
        if voice.ref_audio is None:
            self.ctx.dialogs.info(self, "No reference audio", "This voice file has no reference audio to play.")
            return
        self._play(voice.ref_audio, SAMPLE_RATE, ("voice", entry.path))

    def rename_selected(self) -> None:
        entry = self.selected_entry()
        if entry is None:
            return
        name = self.ctx.dialogs.get_text(self, "Rename voice", "New name:", entry.name)
        if not name or name.strip() == entry.name:
            return
        try:
            path = self.ctx.library.rename(entry.path, name)
        except (VoiceError, OSError) as e:
            self.ctx.dialogs.error(self, "Cannot rename", user_message(e, "renaming the voice"))
            return
        self.refresh(select=path)

    def delete_selected(self) -> None:
        entry = self.selected_entry()
        if entry is None:
            return
        if not self.ctx.dialogs.question(self, "Delete voice", f"Delete the voice “{entry.name}”? This cannot be undone."):
            return
        try:
            self.ctx.library.delete(entry.path)
        except OSError as e:
            self.ctx.dialogs.error(self, "Cannot delete", user_message(e, "deleting the voice"))
        self.refresh()

    def import_voice(self) -> None:
        src = self.ctx.dialogs.open_file(self, "Import voice", str(Path.home()), f"Voice files (*{SUFFIX})")
        if not src:
            return
        try:
            path = self.ctx.library.import_file(Path(src))
        except (VoiceError, OSError) as e:
            self.ctx.dialogs.error(self, "Cannot import voice", user_message(e, "importing the voice"))
            return
        self.refresh(select=path)

    def export_selected(self) -> None:
        entry = self.selected_entry()
        if entry is None:
            return
        dest = self.ctx.dialogs.save_file(self, "Export voice", str(Path.home() / entry.path.name),
                                          f"Voice files (*{SUFFIX})")
        if not dest:
            return
        dest_path = Path(dest) if dest.endswith(SUFFIX) else Path(dest + SUFFIX)
        if dest_path.exists() and not self.ctx.dialogs.question(
            self, "Replace file?", f"“{dest_path.name}” already exists. Replace it?"
        ):
            return
        try:
            self.ctx.library.export(entry.path, dest_path)
        except OSError as e:
            self.ctx.dialogs.error(self, "Cannot export voice", user_message(e, "exporting the voice"))

    # --- new voice: reference from a file or the microphone ----------------------------------------------
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
        self._set_reference(samples, sr, path)
        if not self.name_edit.text():
            self.name_edit.setText(path.stem.replace("_", " "))
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
            self.editor.show()
            self.rec_row.show()
            self.meter.reset()
            self.ref_wave.clear()
            self.coach.set_notes([])
            self.record_btn.setText("■ Stop")
            self._update_buttons()

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
        self._set_reference(samples.reshape(-1, 1), sr, None)
        start, end = voiced_range(samples, sr)
        self.ref_wave.set_selection(start, end)  # suggest a trim of the silence around the speech

    def _set_reference(self, samples: np.ndarray, sr: int, path: Path | None) -> None:
        self._ref = (samples, sr)
        self._ref_path = path
        self.ref_wave.set_audio(samples, sr)
        self.coach.analyze(samples, sr)
        self.create_status.setText("")
        self.editor.show()
        self._update_buttons()

    def _trim_changed(self) -> None:
        if self._ref is None:
            return
        samples, sr = self._ref
        a, b = self.ref_wave.selected_samples()
        self.coach.analyze(samples[a:b], sr)

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
        self._play(mono[a:b], sr, "reference", start_offset=a)

    def _play(self, audio: np.ndarray, sr: int, owner: object, start_offset: int = 0) -> None:
        self._play_offset = start_offset
        if not self.ctx.player.play(audio, sr, owner=owner):
            problem = self.ctx.player.problem() or "Audio output is not available"
            self.ctx.dialogs.error(self, "Cannot play", problem)

    def _position(self, sample: int) -> None:
        if self.ctx.player.owner == "reference":
            self.ref_wave.set_position(getattr(self, "_play_offset", 0) + sample)

    def discard_reference(self) -> None:
        if self.recorder.recording:
            self.recorder.stop()
        self._ref = None
        self._ref_path = None
        self.ref_wave.clear()
        self.coach.set_notes([])
        self.name_edit.clear()
        self.transcript.clear()
        self.editor.hide()

    def create_voice(self) -> None:
        if self._ref is None or not self.ctx.can_start(self):
            return
        synth = self.ctx.synth
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
        except OSError as e:
            self.create_status.setText("")
            self.ctx.dialogs.error(self, "Cannot save the voice", user_message(e, "saving the voice"))
            return
        log.info("created voice %s", path)
        self.discard_reference()
        self.refresh(select=path)

    def _voice_failed(self, message: str) -> None:
        self.create_status.setText("")
        self.ctx.dialogs.error(self, "Cannot create the voice", message)

    # --- drag and drop: an audio file starts a new voice, a .qvoice file is imported -------------------
    def dragEnterEvent(self, event) -> None:
        if any(u.isLocalFile() for u in event.mimeData().urls()):
            event.acceptProposedAction()

    def dropEvent(self, event) -> None:
        paths = [Path(u.toLocalFile()) for u in event.mimeData().urls() if u.isLocalFile()]
        if not paths:
            return
        event.acceptProposedAction()
        path = paths[0]
        if path.suffix.lower() == SUFFIX:
            try:
                self.refresh(select=self.ctx.library.import_file(path))
            except (VoiceError, OSError) as e:
                self.ctx.dialogs.error(self, "Cannot import voice", user_message(e, "importing the voice"))
        elif not self.recorder.recording:
            self.load_reference_file(path)

    # --- state -------------------------------------------------------------------------------------------
    def _model_changed(self) -> None:
        self.lang_combo.set_languages(self.ctx.synth.languages if self.ctx.synth is not None else ["auto"])
        if self.list.count():
            self.refresh()
        self._update_buttons()

    def _update_record_button(self) -> None:
        problem = self.recorder.problem()
        self.record_btn.setToolTip(problem or "Record a reference from the microphone")
        if problem:
            self.record_btn.setText("● Record (no microphone)")

    def _update_buttons(self) -> None:
        has = self.selected_entry() is not None
        for b in (self.play_voice_btn, self.rename_btn, self.delete_btn, self.export_btn):
            b.setEnabled(has)
        playing_ref = self.ctx.player.owner == "reference" and self.ctx.player.playing
        self.play_ref_btn.setText("■ Stop" if playing_ref else "▶ Play")
        has_ref = self._ref is not None and not self.recorder.recording
        for b in (self.play_ref_btn, self.trim_btn, self.select_all_btn):
            b.setEnabled(has_ref)
        self.create_btn.setEnabled(has_ref and self.ctx.synth is not None and not self.ctx.busy)
        self.create_btn.setToolTip("" if self.ctx.synth is not None else "Open a model first")
        self.new_file_btn.setEnabled(not self.recorder.recording)
