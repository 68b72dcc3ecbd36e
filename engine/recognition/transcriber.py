"""Speech to text with a Whisper bundle: the Transcriber and what it returns.

Greedy decoding, token for token what transformers' WhisperForConditionalGeneration.generate does with the
model's generation config (do_sample False, one beam, no timestamps): the prompt of rules.py, language detection
when no language is given, suppress_tokens at every step, begin_suppress_tokens at the first, the end token or the
length limit ending it. Checked on the fixture models (tests/test_whisper.py).

One 30 s window only. transformers decodes a longer input sequentially window by window, and only with timestamp
tokens (it refuses more than 3000 feature frames without them): that is the timestamp machinery this app does not
offer, and a cloning reference is best at 5-20 s anyway, so a longer recording is refused in one line saying to
trim it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import AudioError, BundleError, Cancelled
from ..io.audio import read_mono, resample
from ..io.json_file import json_object_or_none, read_json_object
from ..nets.whisper import WhisperDecoder, WhisperEncoder, whisper_part
from ..runtime.bundle import Bundle
from ..runtime.cpu import usable_cpus
from ..runtime.whisper_part import WhisperPart
from ..text.byte_level import bytes_to_unicode
from . import features
from .languages import LANGUAGE_NAMES
from .rules import DecodingRules

AudioSource = str | os.PathLike | tuple[np.ndarray, int]
Progress = Callable[[float, str], None]
MAX_SECONDS = features.WINDOW_SECONDS
MIN_SECONDS = 0.1
SILENCE_PEAK = 1e-4  # below this (-80 dBFS) a recording has no sound in it at all


@dataclass(frozen=True)
class TranscriptTimings:
    features: float = 0.0  # seconds: loading, resampling and the log-mel front end
    encoder: float = 0.0
    decoding: float = 0.0  # language detection and the tokens


@dataclass(frozen=True)
class Transcript:
    """What the recogniser heard. `token_ids` are the generated tokens as transformers' generate returns them
    (without the prompt and the end token); `text` is their text for display."""

    text: str
    language: str  # the model's code, e.g. "en"
    language_detected: bool  # True when the model chose it (no language was given)
    token_ids: tuple[int, ...]
    prompt_ids: tuple[int, ...]
    seconds: float  # length of the audio
    complete: bool  # False when the length limit, not the end token, stopped it
    timings: TranscriptTimings = field(default_factory=TranscriptTimings)

    @property
    def language_name(self) -> str:
        """The language in words ("german"), or its code when Whisper has no name for it."""
        return LANGUAGE_NAMES.get(self.language, self.language)

    @property
    def words(self) -> int:
        return len(self.text.split())


def is_whisper_bundle(path: str | os.PathLike) -> bool:
    """True when `path` is a bundle folder converted from a Whisper checkpoint (its manifest says so)."""
    manifest = json_object_or_none(Path(path) / "manifest.json")
    return manifest is not None and manifest.get("model") == WhisperPart.PART


class _Vocabulary:
    """Token ids -> text: the byte-level BPE pieces of vocab.json (GPT-2's byte alphabet), decoded as UTF-8 with
    replacement characters, as the reference tokenizer's decode(skip_special_tokens=True) does; special and
    timestamp tokens (ids from the end token on) are left out."""

    def __init__(self, bundle: Bundle, end: int):
        vocab = read_json_object(bundle.file("tokenizer/vocab.json"), BundleError,
                                 f"The model bundle {bundle.path} is damaged: tokenizer/vocab.json")
        byte_of = {ch: b for b, ch in bytes_to_unicode().items()}
        self.pieces: dict[int, bytes] = {}
        for piece, tid in vocab.items():
            if type(tid) is int and tid < end:
                self.pieces[tid] = bytes(byte_of.get(c, 0x3F) for c in piece)
        self.end = end

    def text(self, ids: list[int] | tuple[int, ...]) -> str:
        data = b"".join(self.pieces.get(t, b"") for t in ids if t < self.end)
        return data.decode("utf-8", errors="replace")


class Transcriber:
    """A loaded Whisper bundle. `transcribe` may be called any number of times (one at a time)."""

    def __init__(self, bundle: str | os.PathLike | Bundle, threads: int | None = None):
        self.bundle = bundle if isinstance(bundle, Bundle) else Bundle.open(bundle)
        part = whisper_part(self.bundle)
        self.spec = part.spec
        self.n_mels = self.spec.mels
        if self.n_mels not in (80, 128):
            raise BundleError(f"The Whisper bundle {self.bundle.path} has {self.n_mels} mel bins; 80 or 128 are "
                              "supported.")
        features.check_front_end(part.preprocessor, self.n_mels, f"The Whisper bundle {self.bundle.path}")
        self.rules = DecodingRules.from_configs(self.bundle.generation_config, self.spec.vocab_size)
        self.threads = threads or max(1, min(usable_cpus(), 4))
        self.encoder = WhisperEncoder(self.bundle, self.threads)
        self.decoder = WhisperDecoder(self.bundle, self.threads)
        self.vocabulary = _Vocabulary(self.bundle, self.rules.end)
        self._suppress = np.array(self.rules.suppress, dtype=np.int64)
        self._begin_suppress = np.array(self.rules.begin_suppress, dtype=np.int64)

    @property
    def languages(self) -> list[str]:
        """The language codes this model knows, in its order (empty for an English-only model)."""
        return list(self.rules.languages)

    def check_language(self, language: str | None) -> str | None:
        """The model's code for `language` (None stays None: detect it); a one-line LanguageError otherwise."""
        return None if language is None else self.rules.language_code(language)

    # ------------------------------------------------------------------------------------------------ audio

    def features(self, audio: AudioSource) -> tuple[np.ndarray, float]:
        """The log-mel window of a recording (a file path or (samples, sample_rate)) and its length in seconds;
        an AudioError for audio that cannot be transcribed (empty, invalid samples, silent, over 30 s)."""
        what = "The recording"
        if isinstance(audio, tuple) and len(audio) == 2 and isinstance(audio[1], int) and audio[1] > 0:
            claimed = np.shape(audio[0])[0] / audio[1] if np.ndim(audio[0]) else 0.0
            if claimed > MAX_SECONDS:  # before any copy: an hour of samples is refused at once
                raise AudioError(f"{what} is {claimed:.1f} s long; transcription takes up to {MAX_SECONDS} s: trim it "
                                 "to the part you will use as the reference.")
        samples, rate = read_mono(audio)
        seconds = samples.size / rate
        if samples.size == 0:
            raise AudioError(f"{what} is empty: there is nothing to transcribe.")
        if not np.isfinite(samples).all():
            raise AudioError(f"{what} contains invalid samples (NaN or infinity); it cannot be transcribed.")
        if seconds > MAX_SECONDS:
            raise AudioError(f"{what} is {seconds:.1f} s long; transcription takes up to {MAX_SECONDS} s: trim it to "
                             "the part you will use as the reference.")
        if seconds < MIN_SECONDS:
            raise AudioError(f"{what} is too short ({seconds:.2f} s) to transcribe.")
        if float(np.max(np.abs(samples))) < SILENCE_PEAK:
            raise AudioError(f"{what} is silent: there are no words to transcribe.")
        audio16k = resample(samples, rate, features.SAMPLE_RATE)
        return features.log_mel(audio16k, self.n_mels), seconds

    # ------------------------------------------------------------------------------------------------ decoding

    def transcribe(self, audio: AudioSource, language: str | None = None, progress: Progress | None = None,
                   cancel: Callable[[], bool] | None = None, max_new_tokens: int | None = None) -> Transcript:
        """Transcribe a recording of up to 30 s (a file path or (samples, sample_rate)). `language`: a code, token
        or English name the model knows, or None to detect it. `progress(fraction, message)` is called as work
        goes on; `cancel()` returning True stops it with Cancelled. `max_new_tokens`: at most this many tokens
        after the prompt, the end token included (transformers' generate argument of that name)."""
        code = self.check_language(language)
        t0 = time.perf_counter()
        feats, seconds = self.features(audio)
        t1 = time.perf_counter()
        return self.transcribe_features(feats, code, progress, cancel, seconds=seconds, front_end=t1 - t0,
                                        max_new_tokens=max_new_tokens)

    def transcribe_features(self, feats: np.ndarray, language: str | None = None, progress: Progress | None = None,
                            cancel: Callable[[], bool] | None = None, *, seconds: float = 0.0,
                            front_end: float = 0.0, max_new_tokens: int | None = None) -> Transcript:
        """Transcribe one log-mel window (n_mels, 3000) (features() makes it); silent windows are decoded too."""
        if max_new_tokens is not None and (type(max_new_tokens) is not int or max_new_tokens < 1):
            raise ValueError(f"max_new_tokens must be a positive whole number, not {max_new_tokens!r}")
        feats = np.asarray(feats, np.float32)
        if feats.shape != (self.n_mels, features.WINDOW_FRAMES) or not np.isfinite(feats).all():
            raise AudioError(f"log-mel features must be a finite ({self.n_mels}, {features.WINDOW_FRAMES}) array, "
                             f"not {feats.shape}")
        code = self.check_language(language)

        def check(fraction: float, message: str) -> None:
            if cancel is not None and cancel():
                raise Cancelled("Transcription cancelled.")
            if progress is not None:
                progress(fraction, message)

        check(0.0, "listening")
        t0 = time.perf_counter()
        cross = self.encoder.run(feats)
        t1 = time.perf_counter()
        prompt = self.rules.prompt(code)
        cache = None
        position = 0
        logits = None
        detected = False
        for i, token in enumerate(prompt):
            if token is None:  # detection: the start token's logits over the language tokens only
                assert logits is not None
                masked = np.where(self.rules.language_mask(), logits, -np.inf)
                token = int(np.argmax(masked))
                prompt[i] = token
                detected = True
            logits, cache = self.decoder.step(token, position, cross, cache)
            position += 1
        ids = [int(t) for t in prompt if t is not None]
        language_token = next((t for t in ids if self.rules.code_of(t) is not None), None)
        total = self.rules.total_length(len(ids), self.decoder.max_positions)
        if max_new_tokens is not None:
            total = min(total, len(ids) + max_new_tokens)
        generated: list[int] = []
        complete = False
        assert logits is not None
        while len(ids) + len(generated) < total:
            scores = logits.copy()
            if self._suppress.size:
                scores[self._suppress] = -np.inf
            if not generated and self._begin_suppress.size:
                scores[self._begin_suppress] = -np.inf
            token = int(np.argmax(scores))
            if token == self.rules.end:
                complete = True
                break
            generated.append(token)
            if len(ids) + len(generated) >= total:
                break
            check(len(generated) / (total - len(ids)), "writing")
            logits, cache = self.decoder.step(token, position, cross, cache)
            position += 1
        t2 = time.perf_counter()
        check(1.0, "done")
        return Transcript(
            text=self.vocabulary.text(generated).strip(),
            language="" if language_token is None else (self.rules.code_of(language_token) or ""),
            language_detected=detected,
            token_ids=tuple(generated),
            prompt_ids=tuple(ids),
            seconds=seconds,
            complete=complete,
            timings=TranscriptTimings(features=front_end, encoder=t1 - t0, decoding=t2 - t1),
        )


def transcribe_file(bundle: str | os.PathLike | Bundle, audio: AudioSource, language: str | None = None,
                    threads: int | None = None) -> Transcript:
    """One recording transcribed with a bundle loaded for it (load a Transcriber to transcribe several)."""
    return Transcriber(bundle, threads).transcribe(audio, language)
