"""Playback and recording through sounddevice, behind a small backend interface so tests can fake the device.

PortAudio calls our callbacks on its own thread: they only touch numpy buffers under a lock. Qt signals
are emitted from QTimer polls on the GUI thread. With no sound card (or no PortAudio library) the backend
reports why, and the app keeps working without sound.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol

import numpy as np
from PySide6.QtCore import QObject, QTimer, Signal

from .data.growing_audio import GrowingAudio
from .diagnostics import log
from .engine_adapter import SAMPLE_RATE, as_sentence

_GROW_ROOM = 48000  # samples: the smallest step a growing sound reserves (one second at 48 kHz)
Fill = Callable[[np.ndarray], bool]  # write into the (frames,) buffer; return False when there is no more
Consume = Callable[[np.ndarray], None]  # receive a (frames,) block of recorded samples


class AudioUnavailable(Exception):
    """A device cannot be used; the message says why, in one line."""


def close_stream(stream: AudioStream, what: str) -> None:
    """Stop and close an audio stream; a failure is logged, never raised (the app goes on without it)."""
    try:
        stream.stop()
        stream.close()
    except Exception:
        log.exception(f"closing the audio {what} failed")


class AudioStream(Protocol):
    def start(self) -> None: ...
    def stop(self) -> None: ...
    def close(self) -> None: ...


class AudioBackend(Protocol):
    def output_problem(self) -> str | None: ...
    def output_rate(self, wanted: int) -> int: ...
    def input_problem(self) -> str | None: ...
    def input_samplerate(self) -> int: ...
    def open_output(self, samplerate: int, fill: Fill) -> AudioStream: ...
    def open_input(self, samplerate: int, consume: Consume) -> AudioStream: ...


class SoundDeviceBackend:
    """The real device, via sounddevice/PortAudio."""

    BLOCK = 1024

    def __init__(self) -> None:
        try:
            import sounddevice
        except OSError as e:  # the PortAudio shared library is missing
            log.warning("sounddevice unavailable: %s", e)
            self._sd = None
        else:
            self._sd = sounddevice

    def _device(self, kind: str) -> dict | None:
        if self._sd is None:
            return None
        try:
            if len(self._sd.query_devices()) == 0:
                return None
            dev = self._sd.query_devices(kind=kind)
        except (ValueError, self._sd.PortAudioError):
            return None
        channels = dev.get("max_output_channels" if kind == "output" else "max_input_channels", 0)
        return dev if channels > 0 else None

    def output_problem(self) -> str | None:
        if self._sd is None:
            return "No audio output: the PortAudio library is not installed"
        return None if self._device("output") else "No audio output device was found"

    def input_problem(self) -> str | None:
        if self._sd is None:
            return "Recording unavailable: the PortAudio library is not installed"
        return None if self._device("input") else "No microphone (audio input device) was found"

    def input_samplerate(self) -> int:
        dev = self._device("input")
        return int(dev["default_samplerate"]) if dev else 48000

    def output_rate(self, wanted: int) -> int:
        """wanted if the output device takes it, else its own rate (e.g. WASAPI shared mode is fixed-rate)."""
        sd = self._sd
        if sd is None:
            return wanted
        try:
            sd.check_output_settings(samplerate=wanted, channels=1, dtype="float32")
            return wanted
        except Exception:
            dev = self._device("output")
            return int(dev["default_samplerate"]) if dev else wanted

    def open_output(self, samplerate: int, fill: Fill) -> AudioStream:
        sd = self._sd
        if sd is None or self.output_problem():
            raise AudioUnavailable(self.output_problem() or "No audio output")

        def callback(outdata, frames, time_info, status):  # PortAudio thread
            if not fill(outdata[:, 0]):
                raise sd.CallbackStop

        try:
            return sd.OutputStream(samplerate=samplerate, channels=1, dtype="float32", blocksize=self.BLOCK,
                                   callback=callback)
        except (sd.PortAudioError, ValueError) as e:
            raise AudioUnavailable(f"Cannot open the audio output: {e}") from None

    def open_input(self, samplerate: int, consume: Consume) -> AudioStream:
        sd = self._sd
        if sd is None or self.input_problem():
            raise AudioUnavailable(self.input_problem() or "No audio input")

        def callback(indata, frames, time_info, status):  # PortAudio thread
            consume(indata[:, 0].copy())

        try:
            return sd.InputStream(samplerate=samplerate, channels=1, dtype="float32", blocksize=self.BLOCK,
                                  callback=callback)
        except (sd.PortAudioError, ValueError) as e:
            # Also what a refused microphone permission looks like on macOS.
            raise AudioUnavailable(f"Cannot open the microphone: {e}") from None


class Player(QObject):
    """Plays one sound at a time; the sound may still be growing while it plays.

    A growing sound starts at once. When playback catches up with it, it pauses and rebuffers like a streaming
    player: it resumes once enough audio is ready ahead (more after each such underrun) or the sound is complete,
    so a generation slower than real time is heard in ever longer runs, not as 80 ms of speech between gaps.
    """

    # Audio ready ahead before resuming after the 1st, 2nd, ... underrun. Arriving at a fraction r of real time,
    # a resume with T s ahead plays T / (1 - r) s: 5 T at real-time factor 1.25 (q8), so doubling leaves a few
    # gaps in a typical take, the first one short (0.5 s of audio). The cap bounds a single silence to 8 s times
    # the real-time factor (32 s at 4, the slowest model, which then plays 11 s runs) lest it seem hung.
    # With an expected length (expect_length) and r measured, a resume waits for more when the rest needs it to
    # play through: rest * (1 - r) ahead (still capped; the length is only a guess from the text).
    REBUFFER_SECONDS = (0.5, 1.0, 2.0, 4.0, 8.0)

    position = Signal(int)  # current sample
    playing_changed = Signal(bool)
    buffering = Signal(bool)  # paused until enough of a growing sound is ready
    error = Signal(str)
    notice = Signal(str)  # for the status line: why nothing can be played

    def __init__(self, backend: AudioBackend, parent: QObject | None = None):
        super().__init__(parent)
        self.backend = backend
        self._said = ""  # the last cannot-play message the status line was given
        self._lock = threading.Lock()
        self._buf = GrowingAudio()
        self._pos = 0
        self._ended = False
        self._rebuffering = False  # audio thread: silent until _resume_ahead samples are ready or complete
        self._resume_ahead = 0
        self._underruns = 0
        self._expected_length = 0  # device samples the growing sound will probably have (0: unknown)
        self._clock = 0  # device samples asked for since play(), silences included: the audio thread's clock
        self._length_at_start = 0  # what was there at play(): the arrival rate counts what came after
        self._shown_buffering = False  # GUI thread: the state last emitted by `buffering`
        self._stream: AudioStream | None = None
        self._samplerate = SAMPLE_RATE
        self._device_rate = SAMPLE_RATE
        self._resampler = None  # soxr.ResampleStream when the device cannot play the sound's own rate
        self.owner: object | None = None  # who started the current sound (lets views show their own state)
        self._timer = QTimer(self)
        self._timer.setInterval(30)
        self._timer.timeout.connect(self._poll)

    @property
    def playing(self) -> bool:
        return self._stream is not None

    @property
    def is_buffering(self) -> bool:
        """As last shown by the `buffering` signal (GUI thread)."""
        return self._shown_buffering

    def problem(self) -> str | None:
        return self.backend.output_problem()

    def cannot_play_message(self) -> str:
        """What the status line says when nothing can be played (take, stream or reference alike)."""
        problem = self.problem() or "The audio output is not available"
        return f"{as_sentence(problem)} Nothing can be played, but generating and saving still work."

    def play_tooltip(self, normal: str) -> str:
        """A Play button's tooltip: `normal`, or why it is disabled when there is no sound output."""
        problem = self.problem()
        return f"{as_sentence(problem)} Nothing can be played; generating and saving still work." if problem else normal

    def say_cannot_play(self, every_time: bool = False) -> None:
        """Tell the status line (`notice`) that nothing can be played: once per problem when a Play button turns
        out disabled, each time a press fails (a modal box at every press would be in the way)."""
        message = self.cannot_play_message()
        if every_time:
            self.notice.emit(message)
        elif message != self._said:
            self._said = message
            # after the event that made a Play button usable has said its own ("Generated 2.1 s"), not under it
            QTimer.singleShot(0, self, lambda: self.notice.emit(message))

    def play(self, samples: np.ndarray, samplerate: int = SAMPLE_RATE, complete: bool = True, start: int = 0,
             owner: object | None = None) -> bool:
        """Start playing; with complete=False more samples may follow via append(). False if no device."""
        self.stop()
        try:
            self._device_rate = int(self.backend.output_rate(samplerate))
        except Exception:
            self._device_rate = samplerate
        self._samplerate = samplerate
        self._resampler = None
        if self._device_rate != samplerate:
            import soxr

            self._resampler = soxr.ResampleStream(samplerate, self._device_rate, 1, dtype="float32")
        with self._lock:
            self._buf.set(self._convert(samples, complete), complete)
            self._pos = max(0, min(self._to_device(start), self._buf.length))
            self._ended = False
            self._rebuffering = False
            self._underruns = 0
            self._expected_length = 0
            self._clock = 0
            self._length_at_start = self._buf.length
        try:
            self._stream = self.backend.open_output(self._device_rate, self._fill)
            self._stream.start()
        except AudioUnavailable as e:
            self._stream = None
            self.error.emit(str(e))
            return False
        except Exception as e:  # a driver error must not take the app down
            log.exception("audio output failed")
            self._stream = None
            self.error.emit(f"Audio output failed: {e}")
            return False
        self.owner = owner
        self._timer.start()
        self.playing_changed.emit(True)
        return True

    def append(self, samples: np.ndarray, complete: bool = False) -> None:
        samples = self._convert(samples, complete)
        with self._lock:
            self._buf.append(samples, room=_GROW_ROOM)
            self._buf.complete = self._buf.complete or complete

    def expect_length(self, samples: int) -> None:
        """A guess of the growing sound's final length, in its own samples (lets rebuffering aim to play through)."""
        with self._lock:
            self._expected_length = self._to_device(samples)

    def mark_complete(self) -> None:
        tail = self._convert(np.zeros(0, np.float32), True)
        with self._lock:
            self._buf.append(tail, room=_GROW_ROOM)
            self._buf.complete = True

    def _convert(self, samples: np.ndarray, last: bool) -> np.ndarray:
        samples = np.asarray(samples, np.float32).reshape(-1)
        if self._resampler is None:
            return samples
        return self._resampler.resample_chunk(samples, last=last)

    def _to_device(self, sample: int) -> int:
        return int(round(sample * self._device_rate / self._samplerate))

    def stop(self) -> None:
        stream, self._stream = self._stream, None
        self._timer.stop()
        if stream is not None:
            close_stream(stream, "output")
            self.playing_changed.emit(False)
        self._show_buffering(False)
        self.owner = None

    def _fill(self, out: np.ndarray) -> bool:  # audio thread
        with self._lock:
            self._clock += len(out)
            ahead = self._buf.length - self._pos
            if self._rebuffering:
                if not self._buf.complete and ahead < self._resume_ahead:
                    out[:] = 0.0
                    return True
                self._rebuffering = False
            avail = min(len(out), ahead)
            out[:avail] = self._buf.data[self._pos : self._pos + avail]
            out[avail:] = 0.0
            self._pos += avail
            if self._buf.complete and self._pos >= self._buf.length:
                self._ended = True
                return False
            if avail < len(out):  # caught up with a growing sound: pause until enough is ready again
                self._resume_ahead = self._rebuffer_target()
                self._underruns += 1
                self._rebuffering = True
            return True

    def _rebuffer_target(self) -> int:  # audio thread, under the lock
        """Device samples to have ready ahead before resuming after this underrun."""
        rate = self._device_rate
        target = self.REBUFFER_SECONDS[min(self._underruns, len(self.REBUFFER_SECONDS) - 1)] * rate
        if self._expected_length and self._clock >= rate:  # an arrival rate measured over 1 s at least
            arriving = (self._buf.length - self._length_at_start) / self._clock  # seconds of audio per second
            play_through = (self._expected_length - self._pos) * (1 - arriving)
            target = max(target, min(play_through, self.REBUFFER_SECONDS[-1] * rate))
        return int(target)

    def _poll(self) -> None:
        with self._lock:
            pos, ended, rebuffering = self._pos, self._ended, self._rebuffering
        self.position.emit(int(pos * self._samplerate / self._device_rate))  # in the sound's own samples
        self._show_buffering(rebuffering and not ended)
        if ended:
            self.stop()

    def _show_buffering(self, on: bool) -> None:
        if on != self._shown_buffering:
            self._shown_buffering = on
            self.buffering.emit(on)
