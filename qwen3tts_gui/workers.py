"""QThread workers: the engine runs here, never on the GUI thread, and reports through Qt signals.

Every worker catches everything at its boundary: an EngineError becomes its one line, anything else a short
message (the traceback goes to the log file). Cancel is a flag checked between frames / progress reports.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from PySide6.QtCore import QObject, QThread, Signal

from qwen3tts_server.engine_turns import EngineTurns

from .data.paths import candidate_paths, unique_path
from .data.settings import Settings
from .diagnostics import user_message
from .engine_adapter import (
    SAMPLE_RATE,
    AudioChunk,
    Cancelled,
    ChunkAudio,
    ChunkFrame,
    ChunkJournal,
    ChunkRetry,
    ChunkSkipped,
    EngineError,
    FrameEvent,
    GenerationSettings,
    JoinSettings,
    LongResult,
    LongTextOptions,
    SynthesisRequest,
    SynthesisResult,
    SynthesizerContract,
    Voice,
    VoiceChoice,
    audio_file_writer,
    os_reason,
    read_audio_file,
    run_speech,
    run_speeches,
    save_audio,
)


class Worker(QThread):
    failed = Signal(str)
    cancelled = Signal()
    waiting = Signal()  # the open model is busy with a request of another app (the speech server): the job waits

    doing = "working"

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self._cancel = threading.Event()
        # the open model's turns when it is shared with the speech server (AppContext.start_job sets it): the job
        # runs once the server's request in progress is done, the server's next ones wait for the job
        self.engine_turns: EngineTurns | None = None

    def cancel(self) -> None:
        self._cancel.set()

    @property
    def cancel_requested(self) -> bool:
        return self._cancel.is_set()

    def check_cancel(self) -> None:
        if self._cancel.is_set():
            raise Cancelled(f"{self.doing} cancelled")

    def run(self) -> None:
        try:
            turn = (self.engine_turns.turn(self._cancel.is_set, self.waiting.emit) if self.engine_turns is not None
                    else nullcontext())
            with turn:
                self.work()
        except Cancelled:
            self.cancelled.emit()
        except BaseException as e:  # the worker boundary: nothing escapes as a traceback
            self.failed.emit(user_message(e, self.doing))

    def work(self) -> None:
        raise NotImplementedError


class CallWorker(Worker):
    """Runs one function (load a model, create a voice...) and emits its return value."""

    done = Signal(object)

    def __init__(self, fn: Callable[[], Any], doing: str, parent: QObject | None = None):
        super().__init__(parent)
        self.fn, self.doing = fn, doing

    def work(self) -> None:
        result = self.fn()
        self.check_cancel()
        self.done.emit(result)


class ProgressWorker(Worker):
    """Runs fn(progress, cancel) for long jobs that report progress (checkpoint conversion, demo model)."""

    progress = Signal(float, str)
    done = Signal(object)

    def __init__(self, fn: Callable[[Callable[[float, str], None], Callable[[], bool]], Any], doing: str,
                 parent: QObject | None = None):
        super().__init__(parent)
        self.fn, self.doing = fn, doing
        self._last = 0.0

    def _progress(self, fraction: float, message: str) -> None:
        self.check_cancel()
        now = time.monotonic()
        if now - self._last >= 0.05 or fraction >= 1.0:  # don't flood the GUI with signals
            self._last = now
            self.progress.emit(float(fraction), message)

    def work(self) -> None:
        result = self.fn(self._progress, self._cancel.is_set)
        self.check_cancel()
        self.done.emit(result)


class SynthesisWorker(Worker):
    """Speaks one SynthesisRequest through synth.speak (a short text is a text of one chunk) and forwards its
    events: frames, the recording's samples as they come (streamed, or as each chunk finishes), which chunk is
    running, the whole recording's expected length, notices about retried or left-out chunks, one result.
    Cancel closes the speech between frames."""

    frame = Signal(object)  # FrameEvent (elapsed: since the start of the whole text)
    chunk = Signal(object)  # AudioChunk of the recording
    part = Signal(int, int)  # chunk index (0-based), number of chunks
    length = Signal(int)  # samples the whole recording is expected to have (refined as chunks finish)
    notice = Signal(str)
    left_out = Signal(list)  # messages of the chunks that are missing from the result
    done = Signal(object)  # SynthesisResult: the joined recording, every chunk's codes

    doing = "generating"

    def __init__(self, synth: SynthesizerContract, request: SynthesisRequest, parent: QObject | None = None,
                 journal: ChunkJournal | None = None):
        super().__init__(parent)
        self.synth, self.request = synth, request
        self.journal = journal  # where each chunk is kept as it is made (the app's unfinished texts)

    def work(self) -> None:
        result, skipped = speak_whole(self.synth, self.request, self.check_cancel, frame=self.frame.emit,
                                      part=self.part.emit, samples=self.chunk.emit, notice=self.notice.emit,
                                      length=self.length.emit, journal=self.journal)
        if skipped:
            self.left_out.emit(skipped)
        self.done.emit(result)


def speak_whole(synth: SynthesizerContract, request: SynthesisRequest, check_cancel: Callable[[], None],
                frame: Callable[[FrameEvent], None] | None = None, part: Callable[[int, int], None] | None = None,
                samples: Callable[[AudioChunk], None] | None = None, notice: Callable[[str], None] | None = None,
                length: Callable[[int], None] | None = None,
                journal: ChunkJournal | None = None) -> tuple[SynthesisResult, list[str]]:
    """One request spoken through run_speech, the engine's one loop; returns one result (the joined recording, all
    codes: what a take keeps) and the left-out chunks' messages. Every handler is optional. With a journal, each
    chunk is kept on disk as it is made, and the chunks it holds already are not made again."""
    made = {i: m.load for i, m in journal.made().items()} if journal is not None else {}
    pieces: list[np.ndarray] = []
    codes: list[np.ndarray] = []
    skipped: list[str] = []
    t0 = time.perf_counter()

    def on_frame(ev: ChunkFrame, done: int) -> None:
        if frame:  # elapsed: since the start of the whole text
            frame(replace(ev.frame, elapsed=time.perf_counter() - t0))

    def on_audio(ev: ChunkAudio) -> None:
        nonlocal journal
        if journal is not None and ev.attempts:  # made now (0: read back from the journal)
            try:
                journal.keep(ev.chunk, ev.result, ev.attempts)
            except OSError as e:  # the generation goes on; what is made from here on is kept only in the take
                if notice:
                    notice(f"Chunks are no longer kept on disk as they are made: {os_reason(e)}.")
                journal = None
        codes.append(ev.result.codes)

    def on_samples(chunk: AudioChunk) -> None:
        pieces.append(chunk.samples)
        if samples:
            samples(chunk)

    def on_retry(ev: ChunkRetry) -> None:
        if notice:
            notice(f"Chunk {ev.chunk + 1} of {ev.chunks}: {ev.reason}; trying again with another seed.")

    def on_skipped(ev: ChunkSkipped) -> None:
        skipped.append(ev.message)
        if notice:
            notice(ev.message)

    final = run_speech(synth.speak(request, made), on_frame=on_frame, on_samples=on_samples,
                       on_audio=on_audio, on_retry=on_retry, on_skipped=on_skipped,
                       on_part=part, on_length=length, check_cancel=check_cancel)
    audio = np.concatenate(pieces) if pieces else np.zeros(0, np.float32)
    pieces.clear()
    result = SynthesisResult(audio=audio, codes=np.concatenate(codes), ended_by=final.ended_by, seed=final.seed,
                             timings=replace(final.timings))
    return result, skipped


def text_options(settings: Settings) -> LongTextOptions:
    """The pauses the user chose (Generation settings) for joining the chunks of a long text, and how many
    chunks are generated side by side (the batch panel's "lines at once")."""
    return LongTextOptions(join=JoinSettings(sentence_pause=settings.sentence_pause_ms / 1000,
                                             paragraph_pause=settings.paragraph_pause_ms / 1000),
                           batch_size=settings.batch_size or None)  # 0 (Auto): the model's suggestion


class _LineProblem(Exception):
    """A line that cannot run at all (its voice is missing...): reported as that line's failure."""


@dataclass
class BatchJob:
    key: int  # the line's id in the batch table (stable across reordering)
    text: str
    voice: VoiceChoice | Callable[[], Voice]  # a preset speaker, a voice, or its loader (called in the worker's thread)
    language: str
    out_path: Path
    problem: str | None = None  # a reason this line cannot run (e.g. its voice is missing)
    instruct: str | None = None  # the style instruction sent with it (CustomVoice 1.7B), None for none
    may_replace: bool = False  # its file existed before the run and the user agreed to replace it

    def ready_voice(self) -> VoiceChoice:
        """The line's voice as the engine takes it: the worker has called a loader by then."""
        if callable(self.voice):
            raise _LineProblem("Its voice was not loaded.")
        return self.voice

    def request(self, settings: GenerationSettings, options: LongTextOptions | None) -> SynthesisRequest:
        """What this line asks of the engine (its voice made ready by the worker first)."""
        return SynthesisRequest(self.text, self.ready_voice(), self.language, settings, self.instruct,
                                options or LongTextOptions())


class BatchWorker(Worker):
    """Runs the lines through synth.speak_many: lines of one chunk several at a time (up to batch_size share each
    model step, each line exactly as if it ran alone), long texts afterwards one by one, chunked. A failed line is
    reported and the others go on; the merged file keeps the table order."""

    line_started = Signal(int)
    line_progress = Signal(int, int, int)  # key, frames so far, estimated frames
    line_done = Signal(int, str, float)  # key, output file, seconds of audio
    line_failed = Signal(int, str)
    merged = Signal(str)
    done = Signal(int, int)  # lines ok, lines failed

    doing = "running the batch"

    def __init__(self, synth: SynthesizerContract, jobs: list[BatchJob], settings: GenerationSettings,
                 merge_path: Path | None = None, gap_seconds: float = 0.5, parent: QObject | None = None,
                 long_options=None, batch_size: int | None = None, wav_subtype: str | None = None):
        super().__init__(parent)
        self.synth, self.jobs, self.settings = synth, jobs, settings
        self.wav_subtype = wav_subtype  # None: 16-bit PCM; "FLOAT" when the user chose float WAV files
        self.long_options = long_options  # LongTextOptions for items that are long texts
        self.merge_path, self.gap_seconds = merge_path, gap_seconds
        self.merge_may_replace = False  # the merged file existed before the run and the user agreed to replace it
        self.batch_size = batch_size
        self._written: set[int] = set()  # lines whose file is complete
        self._failed = 0
        self._made: dict = {}  # voices read or cloned for this run, by what made them

    def work(self) -> None:
        ready: list[BatchJob] = []
        for job in self.jobs:
            try:
                if job.problem:
                    raise _LineProblem(job.problem)
                self._ready_voice(job)
            except BaseException as e:
                self._line_failed(job, e)
                continue
            ready.append(job)
        if ready:
            self._speak(ready)
        done = [job for job in self.jobs if job.key in self._written]
        if self.merge_path is not None and done:
            try:
                self.merge_path = self._merge(done, self.merge_path)
                self.merged.emit(str(self.merge_path))
            except BaseException as e:
                self.failed.emit(user_message(e, "writing the merged file"))
        self.done.emit(len(self._written), self._failed)

    def _merge(self, done: list[BatchJob], path: Path) -> Path:
        """The lines' files joined in table order with the gap, streamed: one line in memory at a time (holding
        every line's audio for the merge grew without bound with the batch). Reading a line's 16-bit or float
        file back gives exactly the samples written, so the merged file is what joining in memory gave."""
        gap = np.zeros(int(self.gap_seconds * SAMPLE_RATE), np.float32)
        if not self.merge_may_replace:  # appeared during the run: not the user's to lose
            path = unique_path(path)
        with audio_file_writer(path, self.wav_subtype) as writer:
            for i, job in enumerate(done):
                self.check_cancel()
                if i:
                    writer.write(gap)
                samples, _rate = read_audio_file(job.out_path)
                writer.write(samples[:, 0])
        return path

    def _ready_voice(self, job: BatchJob) -> None:
        """A line's voice ready for this model: its loader (the engine's voice_for: the file read, a designed
        voice cloned) run here, off the window's thread, once for all the lines that share it."""
        assert job.voice is not None
        if callable(job.voice):
            job.voice = self._once(job.voice, job.voice)

    def _once(self, key, make):
        if key not in self._made:
            try:
                self._made[key] = make()
            except Exception as e:  # every line of this voice fails with the same reason
                self._made[key] = e
        made = self._made[key]
        if isinstance(made, Exception):
            raise made
        return made

    def _speak(self, jobs: list[BatchJob]) -> None:
        """Every line through synth.speak_many and run_speeches, the engine's one loop: each line's file is
        written when its recording is complete; a line with left-out chunks is saved, but reported as failed."""
        pieces: dict[int, list[np.ndarray]] = {}
        skipped: dict[int, list[str]] = {}
        started: set[int] = set()

        def on_frame(i: int, ev: ChunkFrame, done: int) -> None:
            key = jobs[i].key
            if key not in started:
                started.add(key)
                self.line_started.emit(key)
            self.line_progress.emit(key, ev.frame.index + 1, ev.frame.estimated_frames)

        def on_done(i: int, result: LongResult) -> None:
            job, parts = jobs[i], pieces.pop(i, [])
            audio = np.concatenate(parts) if parts else np.zeros(0, np.float32)
            try:
                if skipped.get(i):  # keep what was made, but a line with holes is not a finished line
                    self._write_line(job, audio)
                    raise _LineProblem(f"Saved {job.out_path.name} without some parts. {' '.join(skipped[i])}")
                self._save(job, audio)
            except BaseException as e:  # a failed line must not stop the others
                self._line_failed(job, e)

        def on_failed(i: int, error: EngineError) -> None:
            pieces.pop(i, None)
            self._line_failed(jobs[i], error)

        # longest first: the batch ends sooner (short lines fill the slots at the end)
        speeches = self.synth.speak_many([job.request(self.settings, self.long_options) for job in jobs],
                                         batch_size=self.batch_size, longest_first=True)
        run_speeches(speeches, on_frame=on_frame,
                     on_samples=lambda i, chunk: pieces.setdefault(i, []).append(chunk.samples),
                     on_skipped=lambda i, ev: skipped.setdefault(i, []).append(ev.message),
                     on_done=on_done, on_failed=on_failed, check_cancel=self.check_cancel)

    def _save(self, job: BatchJob, audio: np.ndarray) -> None:
        self._write_line(job, audio)
        self._written.add(job.key)
        self.line_done.emit(job.key, str(job.out_path), len(audio) / SAMPLE_RATE)

    def _write_line(self, job: BatchJob, audio: np.ndarray) -> None:
        """The line's file: replaced only when the user agreed to it before the run; a file that appeared under
        its name during the run is left alone and the line goes to 'NAME (2).wav'... (job.out_path follows)."""
        job.out_path.parent.mkdir(parents=True, exist_ok=True)
        if job.may_replace:
            save_audio(job.out_path, audio, SAMPLE_RATE, self.wav_subtype)
            return
        for path in candidate_paths(job.out_path):
            try:
                save_audio(path, audio, SAMPLE_RATE, self.wav_subtype, exclusive=True)
            except FileExistsError:
                continue
            job.out_path = path
            return

    def _line_failed(self, job: BatchJob, error: BaseException) -> None:
        self._failed += 1
        message = str(error) if isinstance(error, _LineProblem) else user_message(error, f"generating line {job.key}")
        self.line_failed.emit(job.key, message)
