"""The voice library: the saved voices, with play, rename, delete, import and export."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QGridLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from ..context import AppContext
from ..data.voices import SUFFIX, VoiceEntry
from ..diagnostics import user_message
from ..engine_adapter import SAMPLE_RATE, Voice, VoiceError, is_designed
from ..workers import CallWorker
from .language_combo import language_title


class VoiceLibraryView(QWidget):
    selection_changed = Signal()

    def __init__(self, ctx: AppContext, parent: QWidget | None = None):
        super().__init__(parent)
        self.ctx = ctx
        title = QLabel("Voice")
        title.setObjectName("SectionTitle")
        self.list = QListWidget()
        self.list.setObjectName("VoiceList")
        self.list.currentItemChanged.connect(lambda *_: self._selection_changed())
        self.list.itemDoubleClicked.connect(lambda _: self.play_selected())

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
        buttons = QGridLayout()
        buttons.setSpacing(4)
        for i, b in enumerate([self.play_voice_btn, self.rename_btn, self.delete_btn]):
            buttons.addWidget(b, 0, i)
        buttons.addWidget(self.import_btn, 1, 0, 1, 1)
        buttons.addWidget(self.export_btn, 1, 1, 1, 1)
        self.details = QLabel("")
        self.details.setObjectName("Muted")
        self.details.setWordWrap(True)

        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(6)
        lay.addWidget(title)
        lay.addWidget(self.list, 1)
        lay.addLayout(buttons)
        lay.addWidget(self.details)

    def refresh(self, select: Path | None = None) -> None:
        selected = self.selected_entry()
        keep = select or (selected.path if selected else None)
        if keep is None and self.ctx.settings.last_voice:
            keep = Path(self.ctx.settings.last_voice)
        self.list.blockSignals(True)
        self.list.clear()
        for entry in self.ctx.library.entries():
            kind = "with transcript" if entry.icl else "timbre only"
            date = entry.created[:10]
            item = QListWidgetItem(f"{entry.name}\n{language_title(entry.language)} · {kind} · {date}")
            item.setData(Qt.ItemDataRole.UserRole, entry)
            if self.ctx.synth is not None and self.ctx.synth.model_id not in entry.made_for:
                if is_designed(entry):  # usable: it is cloned from its recording when first used, not greyed out
                    item.setToolTip("A designed voice (made with a VoiceDesign model from a description): this "
                                    "model clones it from its recording the first time you use it")
                else:
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

    def voice_names(self) -> list[str]:
        return [e.name for e in self._entries()]

    def _entries(self) -> list[VoiceEntry]:
        return [self.list.item(i).data(Qt.ItemDataRole.UserRole) for i in range(self.list.count())]

    def load_selected(self, then: Callable[[], object] | None = None) -> Voice | None:
        """The selected voice, checked against the loaded model; shows a message and returns None if unusable.
        A voice from another model is offered to be made again from its reference; `then` runs once it has
        been (Generate goes on by itself)."""
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
        fitted = voice.for_model(synth.model_id) if synth is not None else voice
        if fitted is None:
            self._offer_recreate(entry, voice, then)
        return fitted

    def load_by_name(self, name: str) -> Voice:
        """For the batch: a voice by name (the selected one when name is empty). Raises VoiceError."""
        model_id = self.ctx.synth.model_id if self.ctx.synth is not None else None
        return self.ctx.library.load(self.entry_by_name(name).path, model_id=model_id)

    def entry_by_name(self, name: str) -> VoiceEntry:
        """The library entry of a voice by name (the selected one when name is empty). Raises VoiceError."""
        entry = self.selected_entry() if not name else next((e for e in self._entries() if e.name == name), None)
        if entry is None:
            raise VoiceError(f"there is no voice called “{name}”" if name else "no voice is selected")
        return entry

    def _offer_recreate(self, entry: VoiceEntry, voice: Voice, then: Callable[[], object] | None = None) -> None:
        """A voice from another model cannot be used as is, but its saved reference can make it again."""
        ref_audio = voice.ref_audio
        if ref_audio is None or len(ref_audio) == 0:
            self.ctx.dialogs.error(self, "Cannot use this voice",
                                   f"“{entry.name}” was made with a different model and has no reference audio "
                                   "to make it again; create a new voice from a recording.")
            return
        designed = is_designed(voice)
        goes_on = " (Then it speaks.)" if then is not None else ""
        question = (f"“{entry.name}” is a designed voice. Clone it with this model from its recording?{goes_on}"
                    if designed else
                    f"“{entry.name}” was made with a different model. Make it again for this model from its saved "
                    f"reference recording?{goes_on}")
        if not self.ctx.dialogs.question(
            self, "Designed voice" if designed else "Voice from another model", question,
        ) or not self.ctx.can_start(self):
            return
        synth = self.ctx.synth
        assert synth is not None  # can_start checked that a model is open
        worker = CallWorker(lambda: synth.create_voice((ref_audio, SAMPLE_RATE), ref_text=voice.ref_text,
                                                       name=voice.name or entry.name, language=voice.language),
                            "making the voice again", self)
        # what it was made for so far stays in the file beside the new making: switching back needs nothing
        worker.done.connect(lambda new: self._voice_recreated(entry.path, new if designed else new.keeping(voice),
                                                              then))
        worker.failed.connect(lambda message: self.ctx.dialogs.error(self, "Cannot create the voice", message))
        if self.ctx.start_job(worker, self):
            self.details.setText(f"Making “{entry.name}” again for this model…")

    def _voice_recreated(self, path: Path, voice: Voice, then: Callable[[], object] | None = None) -> None:
        try:
            voice.save(path, own_file=True)  # same file, same name: it works with the new model (and the old)
        except (VoiceError, OSError) as e:  # Voice.save reports a full disk as VoiceError
            self.ctx.dialogs.error(self, "Cannot save the voice", user_message(e, "saving the voice"))
            return
        self.refresh(select=path)
        if then is not None:
            self.ctx.when_idle(then)  # once the job that made it has ended

    def _selection_changed(self) -> None:
        entry = self.selected_entry()
        if entry is not None:
            self.ctx.settings.last_voice = str(entry.path)
            transcript = f"Transcript: “{entry.ref_text}”" if entry.ref_text else "No transcript: timbre only."
            length = f"Reference {entry.ref_seconds:.1f} s. " if entry.ref_seconds else ""
            self.details.setText(length + transcript)
        else:
            self.details.setText("No voices yet. Record a few seconds of speech or open an audio file.")
        self.update_buttons()
        self.selection_changed.emit()

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
        if not self.ctx.player.play(voice.ref_audio, SAMPLE_RATE, owner=("voice", entry.path)):
            self.ctx.player.say_cannot_play(every_time=True)

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
        if src:
            self.import_path(Path(src))

    def import_path(self, src: Path) -> None:
        try:
            path = self.ctx.library.import_file(src)
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
        except (VoiceError, OSError) as e:  # Voice.save reports a full disk as VoiceError
            self.ctx.dialogs.error(self, "Cannot export voice", user_message(e, "exporting the voice"))

    def update_buttons(self) -> None:
        has = self.selected_entry() is not None
        for b in (self.play_voice_btn, self.rename_btn, self.delete_btn, self.export_btn):
            b.setEnabled(has)
        self.play_voice_btn.setEnabled(has and self.ctx.player.problem() is None)
        self.play_voice_btn.setToolTip(self.ctx.player.play_tooltip("Play the voice's reference audio"))
