"""The result: waveform, play/stop, save, and the session's take history."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from ..context import AppContext
from ..data.take_file import StoredResult
from ..data.takes import Take
from ..engine_adapter import SAMPLE_RATE, SAMPLES_PER_FRAME, AudioChunk
from ..save import ask_and_save
from .elided_label import ElidedLabel
from .waveform import WaveformView


class OutputPanel(QWidget):
    regenerate = Signal(object)  # Take
    take_selected = Signal(object)  # Take
    take_removed = Signal(int)  # its number
    clear_requested = Signal()
    _audio_read = Signal(object)  # a kept take whose audio has been read (from the reader thread)

    def __init__(self, ctx: AppContext, parent: QWidget | None = None):
        super().__init__(parent)
        self.ctx = ctx
        self.takes: list[Take] = []
        self.current: Take | None = None
        self._reader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="take-reader")
        self._audio_read.connect(self._show)
        self._before_stream: Take | None = None  # shown again when a generation ends without a take
        self.streaming = False
        self._streamed: Take | None = None  # the take end_stream has just shown in the view
        self._expected_samples = 0  # the length being generated, as last estimated
        self._adding = False

        self.wave = WaveformView(placeholder="The generated speech appears here")
        self.play_btn = QPushButton("▶  Play")
        self.play_btn.setObjectName("PlayButton")
        self.play_btn.clicked.connect(self.toggle_play)
        self.save_btn = QPushButton("Save…")
        self.save_btn.setToolTip("Save as WAV, FLAC or Ogg (Ctrl+S)")
        self.save_btn.clicked.connect(lambda: self.save_take(self.current))
        self.info = ElidedLabel("")
        self.info.setObjectName("Muted")
        # Playback caught up with generation and waits for enough speech to go on without stuttering.
        self.buffering_note = QLabel("Buffering…")
        self.buffering_note.setObjectName("Muted")
        self.buffering_note.setContentsMargins(0, 0, 10, 0)  # apart from the info after it, only while shown
        self.buffering_note.setToolTip("Playback caught up with generation; it goes on when enough speech is ready")
        self.buffering_note.hide()
        controls = QHBoxLayout()
        controls.addWidget(self.play_btn)
        controls.addWidget(self.save_btn)
        controls.addSpacing(10)
        controls.addWidget(self.buffering_note)  # after the buttons: showing it moves no button
        controls.addWidget(self.info, 1)

        self.history = QListWidget()
        self.history.setObjectName("TakeList")
        self.history.setAlternatingRowColors(True)
        self.history.setMinimumHeight(80)
        self.history.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.history.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.history.currentRowChanged.connect(self._row_changed)
        self.history.itemDoubleClicked.connect(lambda _: self.play_take(self.current))
        self.history.setContextMenuPolicy(Qt.ContextMenuPolicy.ActionsContextMenu)
        self.clear_action = QAction("Clear all takes…", self.history)
        self.clear_action.triggered.connect(self.clear_requested.emit)
        self.history.addAction(self.clear_action)
        self.regen_btn = QPushButton("Regenerate with new seed")
        self.regen_btn.clicked.connect(lambda: self.current and self.regenerate.emit(self.current))
        self.remove_btn = QPushButton("Remove")
        self.remove_btn.clicked.connect(self.remove_current)
        take_buttons = QHBoxLayout()
        take_buttons.addWidget(self.regen_btn)
        take_buttons.addWidget(self.remove_btn)
        take_buttons.addStretch(1)
        head = QLabel("Takes")
        head.setObjectName("SectionTitle")

        # Waveform and its controls on the left, the session's takes beside it.
        left = QVBoxLayout()
        left.setSpacing(6)
        left.addWidget(self.wave, 1)
        left.addLayout(controls)
        right = QVBoxLayout()
        right.setSpacing(6)
        right.addWidget(head)
        right.addWidget(self.history, 1)
        right.addLayout(take_buttons)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(12)
        lay.addLayout(left, 3)
        lay.addLayout(right, 2)

        ctx.player.playing_changed.connect(self._update_buttons)
        ctx.player.position.connect(self._position)
        ctx.player.buffering.connect(self._update_buttons)
        self._update_buttons()

    # --- streaming while generating ----------------------------------------------------------------------
    def begin_stream(self, expected_frames: int) -> None:
        if self.ctx.player.owner is self:
            self.ctx.player.stop()
        self.streaming = True
        self._before_stream, self.current = self.current, None
        # no current row either: otherwise clicking the row that was current changes nothing (no signal)
        self.history.setCurrentRow(-1)
        self._expected_samples = expected_frames * SAMPLES_PER_FRAME
        self.wave.begin_stream(SAMPLE_RATE, self._expected_samples)
        self.info.setText("Generating…")
        self._update_buttons()

    @property
    def expected_samples(self) -> int:
        return self._expected_samples

    def expect_frames(self, frames: int) -> None:
        self.expect_samples(frames * SAMPLES_PER_FRAME)

    def expect_samples(self, samples: int) -> None:
        """A better guess of the length being generated (the waveform scales to it, playback rebuffers for it)."""
        self._expected_samples = samples
        self.wave.set_expected(self._expected_samples)
        if self.ctx.player.owner is self and self.streaming:
            self.ctx.player.expect_length(self._expected_samples)

    def add_chunk(self, chunk: AudioChunk) -> None:
        self.wave.append(chunk.samples)
        if self.ctx.player.owner is self and self.streaming:
            self.ctx.player.append(chunk.samples)
        self._update_buttons()

    def end_stream(self, take: Take | None) -> None:
        """Generation is over: with a take, show it (and let a running stream play to its end)."""
        streamed = len(self.wave.samples)
        was_streaming, self.streaming = self.streaming, False
        if take is None:  # cancelled or failed: show the take that was shown before
            if self.ctx.player.owner is self:
                self.ctx.player.mark_complete()
            before, self._before_stream = self._before_stream, None
            row = self._row_of(before.number) if before is not None and before in self.takes else -1
            if row >= 0:
                self._adding = True  # a partial stream still playing is left to finish
                try:
                    self.history.setCurrentRow(row)
                finally:
                    self._adding = False
            else:
                self.wave.clear()
                self.info.setText("")
            self._update_buttons()
            return
        self._before_stream = None
        if was_streaming and self.ctx.player.owner is self:
            self.ctx.player.append(take.audio[streamed:], complete=True)
        if was_streaming:
            self.wave.finish_stream(take.audio)
            self._streamed = take  # already in the view: showing it again would redo its envelope
        self.add_take(take)

    # --- takes -------------------------------------------------------------------------------------------
    def restore_takes(self, takes: list[Take]) -> None:
        """Takes kept from before, oldest first; none is selected (the waveform stays empty). They go below any
        take made since the app started (the history may be read after the first new take)."""
        self.takes[:0] = takes
        for take in reversed(takes):
            self.history.insertItem(self.history.count(), self._item(take))
        self._update_buttons()

    def _insert(self, take: Take) -> None:
        self.takes.append(take)
        self.history.insertItem(0, self._item(take))

    @staticmethod
    def _item(take: Take) -> QListWidgetItem:
        item = QListWidgetItem(take.label())
        item.setToolTip(take.details())
        item.setData(Qt.ItemDataRole.UserRole, take.number)
        return item

    def _row_of(self, number: int) -> int:
        for row in range(self.history.count()):
            if self.history.item(row).data(Qt.ItemDataRole.UserRole) == number:
                return row
        return -1

    def drop_takes(self, numbers: list[int]) -> None:
        """Forget takes the history no longer keeps (the size limit removed them from disk)."""
        for number in numbers:
            take = next((t for t in self.takes if t.number == number), None)
            if take is None or take is self.current:
                continue
            self.takes.remove(take)
            self.history.takeItem(self._row_of(number))

    def clear_takes(self) -> None:
        if self.ctx.player.owner is self:
            self.ctx.player.stop()
        self.takes.clear()
        self.history.clear()
        self.current = self._before_stream = None
        if not self.streaming:
            self.wave.clear()
            self.info.setText("")
        self._update_buttons()

    def add_take(self, take: Take) -> None:
        self._insert(take)
        self._adding = True  # a stream still playing goes on playing into its finished take
        try:
            self.history.setCurrentRow(0)
        finally:
            self._adding = False

    def _row_changed(self, row: int) -> None:
        if row < 0:
            return
        number = self.history.item(row).data(Qt.ItemDataRole.UserRole)
        take = next((t for t in self.takes if t.number == number), None)
        if take is None or take is self.current:
            return
        if self.ctx.player.owner is self and not self._adding:
            self.ctx.player.stop()  # the cursor would run over the wrong take otherwise
        self.current = take
        streamed, self._streamed = self._streamed, None
        if isinstance(take.result, StoredResult) and not take.result.loaded:
            # a kept take's audio is read off the GUI thread (a long take is hundreds of MB); shown when read
            self.wave.clear()
            self.info.setText(f"Reading take #{take.number}…")
            self._update_buttons()

            def read() -> None:
                take.result.audio  # noqa: B018 (reading it loads it)
                self._audio_read.emit(take)

            self._reader.submit(read)
            return
        self._show(take, in_view=take is streamed)

    def _show(self, take: Take, in_view: bool = False) -> None:
        """in_view: the take is the stream end_stream has just completed in the view (its envelope is made)."""
        if take is not self.current:
            return  # another take was chosen while this one was read
        if not in_view:
            self.wave.set_audio(take.audio, SAMPLE_RATE)
        settings = "greedy" if take.settings.greedy else f"seed {take.seed}"
        where = f" · on {take.device}" if take.device else ""
        self.info.setText(f"{take.result.seconds:.1f} s · {take.voice_name} · {take.language} · {settings}{where}")
        self.info.setToolTip(take.details())
        self.take_selected.emit(take)
        self._update_buttons()

    def remove_current(self) -> None:
        row = self.history.currentRow()
        if row < 0 or self.current is None:
            return
        if self.ctx.player.owner is self:
            self.ctx.player.stop()
        number = self.current.number
        self.takes.remove(self.current)
        self.history.takeItem(row)
        self.current = None
        self.take_removed.emit(number)
        if self.history.count():
            self.history.setCurrentRow(min(row, self.history.count() - 1))
        else:
            self.wave.clear()
            self.info.setText("")
        self._update_buttons()

    # --- play / save -------------------------------------------------------------------------------------
    def toggle_play(self) -> None:
        if self.ctx.player.owner is self and self.ctx.player.playing:
            self.ctx.player.stop()
        elif self.streaming:
            self._play(self.wave.samples, complete=False)
            self.ctx.player.expect_length(self._expected_samples)
        else:
            self.play_take(self.current)

    def play_take(self, take: Take | None) -> None:
        if take is not None:
            self._play(take.audio, complete=True)

    def _play(self, audio: np.ndarray, complete: bool) -> None:
        if not self.ctx.player.play(audio, SAMPLE_RATE, complete=complete, owner=self):
            self.ctx.player.say_cannot_play(every_time=True)

    def save_take(self, take: Take | None) -> None:
        if take is not None:
            ask_and_save(self.ctx, self, take.audio, take.file_stem())

    def _position(self, sample: int) -> None:
        if self.ctx.player.owner is self:
            self.wave.set_position(sample)

    def _update_buttons(self, *_) -> None:
        playing = self.ctx.player.owner is self and self.ctx.player.playing
        has_audio = self.current is not None or (self.streaming and len(self.wave.samples) > 0)
        self.play_btn.setText("■  Stop" if playing else "▶  Play")
        no_output = self.ctx.player.problem() is not None
        self.play_btn.setEnabled(playing or (has_audio and not no_output))
        if not playing:
            self.wave.set_position(-1)
        self.buffering_note.setVisible(playing and self.ctx.player.is_buffering)
        self.play_btn.setToolTip(self.ctx.player.play_tooltip("Play / stop"))
        if no_output and self.current is not None:  # the first take Play could play: say once why it cannot
            self.ctx.player.say_cannot_play()
        has_take = self.current is not None
        self.save_btn.setEnabled(has_take)
        self.regen_btn.setEnabled(has_take)
        self.remove_btn.setEnabled(has_take)
