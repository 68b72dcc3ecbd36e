"""Test doubles for the GUI: a Synthesizer that honours the engine contract, a sound device, and dialogs.

FakeSynthesizer implements engine.SynthesizerContract (engine/synthesis/contract.py): languages, model_id,
default_settings, create_voice(audio, ref_text, name, language) -> Voice, synthesize(...) validating eagerly and returning a
generator of FrameEvent (one per frame, after a sleep that stands in for compute; len(text) x frames_per_char
frames, while estimated_frames is the engine's estimate from the text, as real lengths differ from it), AudioChunk (with
settings.stream_audio) and a final SynthesisResult; closing the generator cancels it.
tests/gui/test_contract.py runs the same checks against it and the real Synthesizer, so the two cannot drift.
"""

from __future__ import annotations

import secrets
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import soundfile as sf

from engine import (
    DEFAULT_BATCH_SIZE,
    WHISPER_LANGUAGES,
    AudioChunk,
    AudioError,
    Cancelled,
    EngineError,
    FrameEvent,
    GenerationSettings,
    LanguageError,
    ModelKind,
    SynthesisRequest,
    SynthesisResult,
    SynthesizerContract,
    TextError,
    Timings,
    Transcript,
    TuningRecord,
    Voice,
    VoiceChoice,
    VoiceError,
    estimated_frames,
    speak,
    speak_many,
)
from engine.nets.weight_reads import FrameWeights
from engine.runtime.device import CPU
from engine.runtime.tuning import TunedSettings, TuningKey
from engine.types import JobEvent, check_batch_request
from qwen3tts_gui.audio_io import AudioUnavailable

SR = 24000
SPF = 1920
LANGUAGES = ["auto", "chinese", "english", "french", "german", "italian", "japanese", "korean", "portuguese",
             "russian", "spanish"]


def _tone(c0: int, k: int) -> np.ndarray:
    """Frame k's audio: a tone whose pitch follows its code 0."""
    ph = np.arange(k * SPF, (k + 1) * SPF) / SR
    return (0.3 * np.sin(2 * np.pi * (180 + c0 % 200) * ph)).astype(np.float32)


class FakeSynthesizer:
    def __init__(self, frame_delay: float = 0.005, frames_per_char: float = 0.5, model_id: str = "fake-model",
                 chunk_every: int = 4, fail_at_frame: int | None = None, xvector_size: int = 32,
                 hold_at_frame: int | None = None, tuning_needed: bool = False, tune_delay: float = 0.002):
        self.frame_delay = frame_delay
        self.tuning_needed = tuning_needed  # as a real model opened for the first time on a computer
        self.tune_delay = tune_delay
        self.tuned = 0  # completed tunings
        self.frames_per_char = frames_per_char
        self._model_id = model_id
        self.chunk_every = chunk_every
        self.fail_at_frame = fail_at_frame  # raise a RuntimeError there (a bug, not bad input)
        self.hold_at_frame = hold_at_frame  # wait there until `release` is set (tests that need "still running")
        self.release = threading.Event()
        self.xvector_size = xvector_size
        self.produced = 0  # frames produced over the object's life
        self.closed_at: list[int] = []  # self.produced when each generator was closed or finished
        self.calls: list[dict] = []
        self.most_at_once = 0  # synthesize_many: most jobs generating side by side
        self.batch_size_hint = DEFAULT_BATCH_SIZE  # suggested_batch_size (a q8 model's)
        self.voices_created = 0

    # --- contract properties ---
    @property
    def languages(self) -> list[str]:
        return list(LANGUAGES)

    @property
    def model_id(self) -> str:
        return self._model_id

    decoder_precision = "fp32"  # the exact speech decoder (the real one may say "bf16" or "fp16")
    precision = "fp32"
    threads = 1
    thread_counts = (1, 1)
    decoder_threads = 1
    overlap_decode = True
    load_seconds = 0.0
    device = CPU

    @property
    def kind(self) -> ModelKind:
        """A Base model: clones voices, no preset speakers, no instruction."""
        return ModelKind(kind="base", size="0b6", languages=tuple(LANGUAGES))

    @property
    def hidden_size(self) -> int:
        return self.xvector_size

    def decode(self, codes: np.ndarray) -> np.ndarray:
        """The fake's audio of these codes: the tone of each frame's code 0, as synthesize() makes it."""
        codes = np.asarray(codes, np.int64).reshape(-1, 16)
        return np.concatenate([_tone(int(c0), k) for k, c0 in enumerate(codes[:, 0])] or [np.zeros(0, np.float32)])

    @property
    def default_settings(self) -> GenerationSettings:
        return GenerationSettings(greedy=False, temperature=0.9, top_k=50, top_p=1.0, repetition_penalty=1.05,
                                  subtalker_temperature=0.9, subtalker_top_k=50, subtalker_top_p=1.0)

    # --- voices ---
    def create_voice(self, audio, ref_text: str | None = None, name: str = "", language: str = "auto") -> Voice:
        language = self._check_language(language)
        if isinstance(audio, tuple):
            samples, sr = audio
            samples = np.asarray(samples, np.float32)
        else:
            try:
                samples, sr = sf.read(str(audio), dtype="float32", always_2d=True)
            except Exception as e:
                raise AudioError(f"cannot read {Path(audio).name}: {e}") from None
            name = name or Path(audio).stem
        mono = samples.mean(axis=1) if samples.ndim == 2 else samples
        if len(mono) < 0.5 * sr:
            raise AudioError("the reference is shorter than 0.5 s")
        if np.max(np.abs(mono)) < 1e-4:
            raise AudioError("the reference is silent")
        self.voices_created += 1
        rng = np.random.default_rng(len(mono))
        frames = -(-len(mono) * SR // sr // SPF)
        return Voice(
            xvector=rng.standard_normal(self.xvector_size).astype(np.float32),
            model_id=self.model_id,
            ref_codes=rng.integers(0, 2048, (frames, 16)) if ref_text else None,
            ref_text=ref_text,
            language=language,
            name=name,
            ref_audio=mono[:: max(1, sr // SR)].astype(np.float32),
        )

    def _check_language(self, language: str | None) -> str:
        lang = (language or "auto").strip().lower()
        if lang not in LANGUAGES:
            raise TextError(f"unknown language {language!r}; choose one of {', '.join(LANGUAGES)}")
        return lang

    def check_language(self, language: str | None) -> str:
        return self._check_language(language)

    def check_voice(self, voice) -> None:
        if not isinstance(voice, Voice):
            raise VoiceError("Choose a voice to clone: this Base model speaks with a voice made from reference audio.")
        if voice.model_id != self.model_id:
            raise VoiceError("this voice was made with a different model; create it again from its reference audio")

    # --- self-tuning (Synthesizer.tune: progress, cancel between steps, a record with a one-line summary) ---
    def tune(self, progress=None, cancel=None) -> TuningRecord:
        steps = 20
        for i in range(steps):
            if cancel is not None and cancel():
                raise Cancelled("Tuning was cancelled.")
            if progress is not None:
                progress(i / steps, f"Timing candidate {i + 1} of {steps}…")
            time.sleep(self.tune_delay)
        if progress is not None:
            progress(1.0, "Tuned.")
        self.tuning_needed = False
        self.tuned += 1
        key = TuningKey(cpu="Fake CPU", cores=2, logical=2, ncnn="0", model="fake", precision="fp32", format="fake")
        self.tuning = TuningRecord(key, TunedSettings(talker_threads=2, code_predictor_threads=1, decoder_threads=1,
                                                      overlap_decode=True), seconds=steps * self.tune_delay)
        return self.tuning

    tuning: TuningRecord | None = None
    tuning_note: str | None = None

    def frame_weights(self) -> FrameWeights:
        return FrameWeights(0, 0, 16, 0, 0)  # the fake reads no weights

    # --- synthesis ---
    def speak(self, request: SynthesisRequest, made=None):
        """The engine's own door over this fake's synthesize and synthesize_many (engine.speak)."""
        return speak(self, request, made)

    def speak_many(self, requests, batch_size: int | None = None, longest_first: bool = True):
        """The engine's own door for several requests over this fake's synthesize_many (engine.speak_many)."""
        return speak_many(self, requests, batch_size, longest_first)

    def check_settings(self, settings: GenerationSettings) -> None:
        settings.check()

    def synthesize(self, text: str, voice: VoiceChoice, language: str = "auto",
                   settings: GenerationSettings | None = None, instruct: str | None = None):
        settings = settings or GenerationSettings()
        self.check_settings(settings)
        if instruct:
            raise TextError("This Base model takes no instruction; style instructions need a CustomVoice 1.7B "
                            "or a VoiceDesign model.")
        language = self._check_language(language)
        if not text.strip():
            raise TextError("the text is empty; type something to speak")
        self.check_voice(voice)
        assert isinstance(voice, Voice)
        length = max(1, int(round(len(text) * self.frames_per_char)))  # what the fake makes, not what it expects
        max_frames = settings.max_frames or max(3 * length, 125)
        frames = min(length, max_frames)
        seed = settings.seed if settings.seed is not None else secrets.randbits(32)
        self.calls.append(dict(text=text, voice=voice.name, language=language, settings=settings, seed=seed))
        # the estimate the engine reports: from the text, at most the cap
        est = min(estimated_frames(text), max_frames)
        return self._run(frames, est, max_frames, "eos" if length <= max_frames else "cap", seed,
                         settings.stream_audio)

    def _run(self, n: int, est: int, max_frames: int, ended_by: str, seed: int, stream: bool):
        rng = np.random.default_rng(seed)
        t0 = time.perf_counter()
        codes = np.zeros((n, 16), np.int64)
        audio = np.zeros(n * SPF, np.float32)
        emitted = 0
        try:
            for k in range(n):
                t = time.perf_counter()
                time.sleep(self.frame_delay)  # stands in for one talker + code-predictor step
                if self.fail_at_frame is not None and k == self.fail_at_frame:
                    raise RuntimeError("simulated engine bug")
                if self.hold_at_frame is not None and k == self.hold_at_frame:
                    self.release.wait(30)
                codes[k] = rng.integers(0, 2048, 16)
                audio[k * SPF : (k + 1) * SPF] = _tone(int(codes[k, 0]), k)
                self.produced += 1
                now = time.perf_counter()
                yield FrameEvent(index=k, codes=codes[k].copy(), elapsed=now - t0, frame_seconds=now - t,
                                 max_frames=max_frames, estimated_frames=max(est, k + 1))
                if stream and ((k + 1) % self.chunk_every == 0 or k == n - 1):
                    end = (k + 1) * SPF
                    yield AudioChunk(samples=audio[emitted:end].copy(), start_sample=emitted)
                    emitted = end
            total = time.perf_counter() - t0
            yield SynthesisResult(audio=audio, codes=codes, ended_by=ended_by, seed=seed,
                                  timings=Timings(total=total, frames=n, audio_seconds=n * 0.08,
                                                  rtf=total / max(n * 0.08, 1e-9)))
        finally:
            self.closed_at.append(self.produced)


    @property
    def suggested_batch_size(self) -> int:
        return self.batch_size_hint

    def synthesize_many(self, jobs, settings: GenerationSettings | None = None, batch_size: int | None = None,
                        longest_first: bool = False):
        """The side-by-side primitive engine.speak and engine.speak_many drive (Synthesizer.synthesize_many, not
        the app's contract): validated now; JobEvents of up to batch_size jobs interleaved frame by frame
        (continuous batching); a bad job fails alone; cancel(job) / close()."""
        if batch_size is None:
            batch_size = self.suggested_batch_size
        settings = settings or GenerationSettings()
        self.check_settings(settings)
        check_batch_request(settings, batch_size)
        runs, failed = [], []
        for i, job in enumerate(jobs):
            own = replace(settings, max_frames=job.max_frames or settings.max_frames,
                          seed=job.seed if job.seed is not None else settings.seed,
                          stream_audio=job.stream_audio if job.stream_audio is not None else settings.stream_audio)
            try:
                runs.append((i, self.synthesize(job.text, job.voice, job.language, own, instruct=job.instruct)))
            except EngineError as e:
                failed.append((i, e))
        if longest_first:  # the engine's order: expected length (here the frame cap, else the text), longest first
            runs.sort(key=lambda r: -(jobs[r[0]].max_frames or len(jobs[r[0]].text)))
        return FakeBatchRun(self, runs, failed, batch_size)


class FakeBatchRun:
    def __init__(self, synth: FakeSynthesizer, runs, failed, batch_size: int):
        self.synth, self.batch_size = synth, batch_size
        self._cancelled: set[int] = set()
        self._events = self._generate(runs, failed)

    def __iter__(self):
        return self

    def __next__(self) -> JobEvent:
        return next(self._events)

    def cancel(self, job: int) -> None:
        self._cancelled.add(job)

    def close(self) -> None:
        self._events.close()

    def _generate(self, runs, failed):
        for i, e in failed:
            yield JobEvent(job=i, error=e)
        waiting, running = list(runs), []
        try:
            while waiting or running:
                while len(running) < self.batch_size and waiting:
                    running.append(waiting.pop(0))
                self.synth.most_at_once = max(self.synth.most_at_once, len(running))
                for i, gen in list(running):
                    if i in self._cancelled:
                        gen.close()
                        running.remove((i, gen))
                        yield JobEvent(job=i, error=Cancelled("This job was cancelled."))
                        continue
                    event = next(gen)
                    if isinstance(event, SynthesisResult):
                        running.remove((i, gen))
                    yield JobEvent(job=i, event=event)
        finally:
            for _, gen in running + waiting:
                gen.close()


# ------------------------------------------------------------------------------------------------ audio


def speech_like(seconds: float, sr: int, lead_in: float = 0.6, tail: float = 0.6, amp: float = 0.4) -> np.ndarray:
    """Silence, a warbling tone with a syllable-like envelope, silence."""
    t = np.arange(int(seconds * sr)) / sr
    env = (t > lead_in) & (t < seconds - tail)
    tone = amp * np.sin(2 * np.pi * (160 + 40 * np.sin(2 * np.pi * 3 * t)) * t) * (0.6 + 0.4 * np.sin(2 * np.pi * 4 * t))
    noise = 0.001 * np.random.default_rng(0).standard_normal(len(t))
    return (tone * env + noise).astype(np.float32)


class FakeStream:
    """Calls the callback from its own thread, like PortAudio does, in blocks paced by `speed`."""

    def __init__(self, backend: FakeAudioBackend, kind: str, samplerate: int, callback, block: int):
        self.backend, self.kind, self.samplerate, self.callback, self.block = backend, kind, samplerate, callback, block
        self._run = threading.Event()
        self._thread: threading.Thread | None = None
        self._pos = 0

    def start(self) -> None:
        self._run.set()
        if self.backend.manual:
            return
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def pull(self) -> np.ndarray | None:
        """One output block from the callback, as PortAudio asks for it; None once the callback said stop."""
        if not self._run.is_set():
            return None
        buf = np.zeros(self.block, np.float32)
        more = self.callback(buf)
        self.backend.played.append(buf)
        if not more:
            self.backend.output_finished += 1
            self._run.clear()  # PortAudio calls no more after CallbackStop
        return buf

    def _loop(self) -> None:
        pause = self.block / self.samplerate / self.backend.speed
        while self._run.is_set():
            if self.kind == "output":
                if self.pull() is None or not self._run.is_set():
                    return
            else:
                src = self.backend.input_signal(self.samplerate)
                block = src[self._pos : self._pos + self.block]
                if len(block) < self.block:
                    block = np.concatenate([block, np.zeros(self.block - len(block), np.float32)])
                self._pos += self.block
                self.callback(block.astype(np.float32))
            time.sleep(pause)

    def stop(self) -> None:
        self._run.clear()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(2)

    def close(self) -> None:
        self.stop()


@dataclass
class FakeAudioBackend:
    has_output: bool = True
    has_input: bool = True
    refuse_input: bool = False  # what a refused microphone permission looks like
    input_rate: int = 48000
    device_output_rate: int | None = None  # a device that only plays this rate (None: any rate)
    speed: float = 4.0  # faster than real time keeps tests short
    manual: bool = False  # no thread: the test calls streams[-1].pull() for each block (exact timing)
    played: list = field(default_factory=list)
    output_finished: int = 0
    streams: list = field(default_factory=list)
    _signal: tuple[int, np.ndarray] | None = None  # the microphone's test signal at its rate

    def output_problem(self) -> str | None:
        return None if self.has_output else "No audio output device was found"

    def input_problem(self) -> str | None:
        return None if self.has_input else "No microphone (audio input device) was found"

    def input_samplerate(self) -> int:
        return self.input_rate

    def output_rate(self, wanted: int) -> int:
        return self.device_output_rate or wanted

    def input_signal(self, sr: int) -> np.ndarray:
        if self._signal is None or self._signal[0] != sr:
            self._signal = (sr, speech_like(4.0, sr))
        return self._signal[1]

    def open_output(self, samplerate: int, fill) -> FakeStream:
        if not self.has_output:
            raise AudioUnavailable(self.output_problem())
        if self.device_output_rate and samplerate != self.device_output_rate:
            raise AudioUnavailable(f"Cannot open the audio output: invalid sample rate {samplerate}")
        self.opened_rates = [*getattr(self, "opened_rates", []), samplerate]
        s = FakeStream(self, "output", samplerate, fill, 1024)
        self.streams.append(s)
        return s

    def open_input(self, samplerate: int, consume) -> FakeStream:
        if not self.has_input:
            raise AudioUnavailable(self.input_problem())
        if self.refuse_input:
            raise AudioUnavailable("Cannot open the microphone: permission denied")
        s = FakeStream(self, "input", samplerate, consume, 960)
        self.streams.append(s)
        return s

    def played_samples(self) -> np.ndarray:
        return np.concatenate(self.played) if self.played else np.zeros(0, np.float32)


# ------------------------------------------------------------------------------------------------ dialogs


class FakeDialogs:
    """Answers the app's questions from scripted values and records every message it shows."""

    def __init__(self) -> None:
        self.errors: list[tuple[str, str]] = []
        self.infos: list[tuple[str, str]] = []
        self.questions: list[tuple] = []  # (title, text), or (title, text, choices) for choose()
        self.notices: list[tuple[str, str]] = []
        self.answer = True
        self.choice: int | None | str = "unset"  # choose(): an index, None (Cancel), or "unset": by `answer`
        self.files: list[str] = []  # answers for open_file / save_file, in order
        self.dirs: list[str] = []
        self.texts: list[str | None] = []

    def error(self, parent, title: str, text: str) -> None:
        self.errors.append((title, text))

    def info(self, parent, title: str, text: str) -> None:
        self.infos.append((title, text))

    def notice(self, parent, title: str, text: str) -> None:
        self.notices.append((title, text))

    def question(self, parent, title: str, text: str) -> bool:
        self.questions.append((title, text))
        return self.answer

    def choose(self, parent, title: str, text: str, choices: list[str]) -> int | None:
        """Recorded with the questions, (title, text, choices); answered by `choice` (an index or None), else by
        `answer` (True: the first choice, False: the second)."""
        self.questions.append((title, text, choices))
        if not isinstance(self.choice, str):  # not "unset"
            return self.choice
        return 0 if self.answer else 1

    def open_file(self, parent, caption, folder, filters) -> str:
        return self.files.pop(0) if self.files else ""

    def save_file(self, parent, caption, path, filters) -> str:
        self.last_save_suggestion = path
        return self.files.pop(0) if self.files else ""

    def open_dir(self, parent, caption, folder) -> str:
        return self.dirs.pop(0) if self.dirs else ""

    def get_text(self, parent, title, label, text="") -> str | None:
        return self.texts.pop(0) if self.texts else None


if TYPE_CHECKING:
    def _implements_the_contract(synth: FakeSynthesizer) -> SynthesizerContract:
        return synth  # mypy: the fake is a SynthesizerContract, as the real Synthesizer is


class FakeTranscriber:
    """Stands in for engine.Transcriber: hears `text` in `language` (detected unless one is given) after `steps`
    progress reports `delay` seconds apart; refuses audio and languages as the real one does (test_contract.py)."""

    MAX_SECONDS = 30.0

    def __init__(self, text: str = "Hello there, this is my voice.", language: str = "en", steps: int = 5,
                 delay: float = 0.0):
        self.text, self.language, self.steps, self.delay = text, language, steps, delay
        self.calls = 0
        self.languages_asked: list[str | None] = []
        self.started = threading.Event()  # set when a transcription has begun (tests cancel mid-way)

    def transcribe(self, audio, language: str | None = None, progress=None, cancel=None) -> Transcript:
        code = None
        if language is not None:
            key = language.strip().lower().removeprefix("<|").removesuffix("|>")
            by_name = {name: c for c, name in WHISPER_LANGUAGES.items()}
            code = key if key in WHISPER_LANGUAGES else by_name.get(key)
            if code is None:
                raise LanguageError(f"Whisper does not know the language {language!r}.")
        samples, rate = audio
        mono = np.asarray(samples, np.float32)
        mono = mono.mean(axis=1) if mono.ndim == 2 else mono.reshape(-1)
        if mono.size == 0:
            raise AudioError("The recording is empty: there is nothing to transcribe.")
        if not np.isfinite(mono).all():
            raise AudioError("The recording contains invalid samples (NaN or infinity); it cannot be transcribed.")
        if mono.size / rate > self.MAX_SECONDS:
            raise AudioError(f"The recording is {mono.size / rate:.1f} s long; transcription takes up to 30 s.")
        if mono.size / rate < 0.1:
            raise AudioError("The recording is too short to transcribe.")
        if float(np.max(np.abs(mono))) < 1e-4:
            raise AudioError("The recording is silent: there are no words to transcribe.")
        self.calls += 1
        self.languages_asked.append(language)
        self.started.set()
        for i in range(self.steps + 1):
            if cancel is not None and cancel():
                raise Cancelled("Transcription cancelled.")
            if progress is not None:
                progress(i / self.steps, "writing" if i else "listening")
            if i < self.steps:
                time.sleep(self.delay)
        return Transcript(text=self.text, language=code or self.language, language_detected=code is None,
                          token_ids=tuple(range(len(self.text.split()))), prompt_ids=(1, 2, 3),
                          seconds=mono.size / rate, complete=True)
