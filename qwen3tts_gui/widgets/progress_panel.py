"""Progress of one generation: frame n of the estimate, elapsed, ms per frame, real-time factor, live tokens."""

from __future__ import annotations

from PySide6.QtWidgets import QGridLayout, QLabel, QProgressBar, QVBoxLayout, QWidget

from ..data.takes import Take
from ..engine_adapter import FRAME_RATE, FrameEvent, SynthesisResult
from .throttle import Throttle
from .token_view import TokenView

FRAME_SECONDS = 1 / FRAME_RATE


class ProgressPanel(QWidget):
    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("ProgressPanel")
        self._estimate: int | None = None  # the take's (or chunk's) estimated length, as its first frame said
        self.bar = QProgressBar()
        self.bar.setTextVisible(True)
        self.bar.setFormat("Ready")
        self.bar.setValue(0)
        self.elapsed = QLabel("–")
        self.ms_per_frame = QLabel("–")
        self.rtf = QLabel("–")
        self.audio_len = QLabel("–")
        stats = QGridLayout()
        stats.setHorizontalSpacing(18)
        for col, (title, value, tip) in enumerate(
            [
                ("Elapsed", self.elapsed, "Time since Generate"),
                ("Per frame", self.ms_per_frame, "Elapsed time / frames so far (start-up included): each frame is "
                 "80 ms of speech"),
                ("Real-time factor", self.rtf, "Elapsed time / audio time: below 1 is faster than real time"),
                ("Audio", self.audio_len, "Length of the speech generated so far; when done, of the recording "
                 "(a long text's pauses between chunks included)"),
            ]
        ):
            head = QLabel(title)
            head.setObjectName("StatTitle")
            head.setToolTip(tip)
            value.setObjectName("StatValue")
            value.setToolTip(tip)
            stats.addWidget(head, 0, col)
            stats.addWidget(value, 1, col)
        self.tokens = TokenView()
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(6)
        lay.addWidget(self.bar)
        lay.addLayout(stats)
        lay.addWidget(self.tokens, 1)
        self.frames = 0
        self._last: FrameEvent | None = None
        self._part = ""  # "Chunk i of n · " while a long text runs
        self._earlier_frames = 0
        # Frames may come faster than it is worth repainting: numbers and tokens refresh at most ~20 times/s.
        self._throttle = Throttle(50, self._refresh, self)

    def show_cancelling(self) -> None:
        self.bar.setFormat("Cancelling…")

    def set_part(self, chunk: int, chunks: int) -> None:
        """A long text: chunk (0-based) of chunks is being generated; frames count within it."""
        self._part = f"Chunk {chunk + 1} of {chunks} · "
        self._earlier_frames += self.frames  # the earlier chunks' audio, for the audio length and RTF
        self.frames = 0
        self._estimate = None
        self.bar.setFormat(f"{self._part}starting…")

    def begin(self) -> None:
        self._part = ""
        self._earlier_frames = 0
        self.frames = 0
        self._estimate = None
        self._last = None
        self.tokens.clear()
        self.bar.setRange(0, 0)  # busy indicator until the first frame (prefill)
        self.bar.setFormat("Starting…")
        for label in (self.elapsed, self.ms_per_frame, self.rtf, self.audio_len):
            label.setText("–")

    def on_frame(self, ev: FrameEvent) -> None:
        if self._estimate is None:  # the engine's estimate follows the frame count once passed: keep the first
            self._estimate = ev.estimated_frames
        self.frames = ev.index + 1
        self._last = ev
        self.tokens.add_frame(ev.codes, update=False)
        self._throttle.ping()

    def _refresh(self) -> None:
        ev = self._last
        if ev is None:
            return
        name = "frame" if self._part else "Frame"
        estimate = self._estimate or ev.estimated_frames
        if ev.max_frames and self.frames > estimate:
            # past the estimate (a runaway take, say): the bar runs to the length limit, which it names; kept at
            # the estimate it showed "Frame 143 of ~143" and a full bar for minutes, like a hung window
            total = max(ev.max_frames, self.frames)
            text = f"{name} {self.frames} of at most {total} (longer than the ~{estimate} expected)"
        else:
            total = max(min(estimate, ev.max_frames) if ev.max_frames else estimate, self.frames)
            text = f"{name} {self.frames} of ~{total}"
        self.bar.setRange(0, total)
        self.bar.setValue(self.frames)
        self.bar.setFormat(self._part + text)
        self._show_stats(ev.elapsed, self._earlier_frames + self.frames)
        self.tokens.refresh()

    def _show_stats(self, elapsed: float, frames: int, recording_seconds: float | None = None) -> None:
        """One source for all four numbers, so they agree: per frame x frames = elapsed, RTF = per frame / 80 ms.
        recording_seconds: the finished recording's length, which a long text's pauses make longer than its
        frames; the Audio figure shows that (27.8 s of frames are a 31.7 s recording with their pauses)."""
        self.elapsed.setText(f"{elapsed:.1f} s" if elapsed > 0 else "–")
        if frames <= 0:
            return
        audio_s = frames * FRAME_SECONDS
        self.ms_per_frame.setText(f"{1000 * elapsed / frames:.0f} ms" if elapsed > 0 else "–")
        self.rtf.setText(f"{elapsed / audio_s:.2f}" if elapsed > 0 else "–")
        self.audio_len.setText(f"{audio_s if recording_seconds is None else recording_seconds:.1f} s")

    def finish(self, result: SynthesisResult, wall_seconds: float) -> None:
        self._throttle.flush()
        self._last = None
        frames = len(result.codes)
        self._show_done(frames, result.ended_by, "Done")
        self._show_stats(wall_seconds, frames, result.seconds)
        if self.tokens.frames != frames:  # e.g. a take shown again from the history
            self.tokens.set_codes(result.codes)

    def show_take(self, take: Take) -> None:
        """A take chosen in the history: its own figures (as measured when it was made) and its codes, not those
        of the last run."""
        self._throttle.flush()
        self._last = None
        result = take.result
        self._show_done(take.frames, result.ended_by, f"Take #{take.number}")
        for label in (self.elapsed, self.ms_per_frame, self.rtf, self.audio_len):
            label.setText("–")
        self._show_stats(result.timings.total, take.frames, result.seconds)
        self.tokens.set_codes(result.codes)

    def _show_done(self, frames: int, ended_by: str, title: str) -> None:
        self.bar.setRange(0, max(frames, 1))
        self.bar.setValue(frames)
        why = "end of speech" if ended_by == "eos" else "length limit reached"
        self.bar.setFormat(f"{title}: {frames} frames ({why})")

    def stop(self, text: str) -> None:
        self._throttle.flush()
        self._last = None
        self.bar.setRange(0, 1)
        self.bar.setValue(0)
        self.bar.setFormat(text)
