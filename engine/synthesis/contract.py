"""The synthesizer contract: everything the app and the command line may call on a synthesizer, in one Protocol.

engine.Synthesizer implements it, and so does the app tests' fake (tests/gui/fakes.py); tests/gui/test_contract.py
holds both to it, member by member and by behaviour, and mypy checks the app's use of it. What is not here (names
with a leading underscore: _bundle, _talker, _build_prompt, ...) is internal: the engine's own modules and the
white-box parity tests use it, the app, the command line and the benchmarks do not.

Bad input raises an engine.errors.EngineError subclass with a one-line message. speak() and synthesize() check
everything when they are called, before the first event, so errors surface at once; speak_many() checks each
request then, and a refused one's error is its first event.

Several texts at once go through speak_many(); the frame loop's side-by-side primitive under it
(Synthesizer.synthesize_many, which engine.speak and engine.speak_many drive) is not part of the contract.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from ..longform.events import Speech, Speeches
from ..longform.request import SynthesisRequest
from ..nets.weight_reads import FrameWeights
from ..runtime.device import Device
from ..runtime.tuning import TuningRecord
from ..types import GenerationSettings, SynthesisEvent, SynthesisResult
from ..voice import Voice, VoiceChoice
from .model_kind import ModelKind

AudioSource = str | Path | tuple[np.ndarray, int]  # a file any format soundfile reads, or (samples, sample rate)


@runtime_checkable
class SynthesizerContract(Protocol):
    """What a loaded model offers its callers (engine.Synthesizer(bundle_dir, threads=None) loads one)."""

    # ----------------------------------------------------------------------------------- what the model is
    threads: int  # CPU threads per network
    overlap_decode: bool  # streamed audio decodes on its own thread (default True)
    load_seconds: float  # how long loading took
    device: Device  # where the networks run (.name "cpu" | "gpu:N", .describe(), .note: why, e.g. a GPU fallback)
    tuning: TuningRecord | None  # the settings measured for this model on this computer, or None
    tuning_note: str | None  # why a stored tuning record was not usable, or None

    @property
    def languages(self) -> list[str]:
        """["auto", "english", "chinese", ...], from the bundle."""

    @property
    def model_id(self) -> str:
        """The fingerprint a voice is tied to."""

    @property
    def default_settings(self) -> GenerationSettings:
        """GenerationSettings filled from the model's generation_config.json."""

    @property
    def hidden_size(self) -> int:
        """The length of a voice's x-vector."""

    @property
    def kind(self) -> ModelKind:
        """The model kind, with its own one-line refusals (refuse_clone(), speaker(name))."""

    @property
    def precision(self) -> str:
        """The bundle's weight precision ("fp32", "fp16", "q8", ...)."""

    @property
    def thread_counts(self) -> tuple[int, int]:
        """The threads the talker and the code predictor run on now (fewer than `threads` under load)."""

    @property
    def suggested_batch_size(self) -> int:
        """Jobs worth running side by side on this model (q8: DEFAULT_BATCH_SIZE; fp32/fp16: 1)."""

    @property
    def decoder_precision(self) -> str:
        """What the speech decoder runs at: "fp32" (exact), "bf16" (bf16 convolutions) or "fp16"."""

    @property
    def decoder_threads(self) -> int:
        """Threads of the speech decoder; settable."""

    @decoder_threads.setter
    def decoder_threads(self, threads: int) -> None: ...

    @property
    def tuning_needed(self) -> bool:
        """True when this model has no tuning for this computer yet, or only one measured while the machine was
        busy and it is quiet now (the app runs tune() then)."""

    def tune(self, progress: Callable[[float, str], None] | None = None,
             cancel: Callable[[], bool] | None = None) -> TuningRecord:
        """Measure the fastest settings for this model on this computer, store and apply them: progress(fraction,
        message) reports, cancel() returning True stops it with Cancelled and changes nothing; the record's
        summary() is one line for a status bar."""

    def frame_weights(self) -> FrameWeights:
        """The weight bytes one generated frame reads, per network (for the memory-bandwidth floor)."""

    # ----------------------------------------------------------------------------------- checks
    def check_language(self, language: str | None) -> str:
        """The normalised language name, or TextError."""

    def check_voice(self, voice: VoiceChoice) -> None:
        """VoiceError if this model cannot speak with `voice` (another model, wrong shape, damaged reference)."""

    def check_settings(self, settings: GenerationSettings) -> None:
        """TextError naming the first setting out of range."""

    # ----------------------------------------------------------------------------------- voices and speech
    def create_voice(self, audio: AudioSource, ref_text: str | None = None, name: str = "",
                     language: str = "auto") -> Voice:
        """A voice from reference audio: its x-vector, and with ref_text its codes for in-context cloning."""

    def speak(self, request: SynthesisRequest,
              made: Mapping[int, Callable[[], SynthesisResult]] | None = None) -> Speech:
        """The events of one request, short or long (engine/longform/runner.py): ChunkStarted, ChunkFrames (and
        ChunkStream audio when settings.stream_audio and the text is one chunk), ChunkRetry, ChunkAudio or
        ChunkSkipped per chunk in text order, then one LongResult. Checked before the first event; closing it
        stops the chunk in progress; engine.run_speech is the one loop over the events. made: chunks an earlier
        run of the same request finished (a ChunkJournal's), put in their place, not generated. Implemented once,
        over synthesize and the side-by-side primitive synthesize_many: engine.speak(synth, request, made)."""

    def speak_many(self, requests: Sequence[SynthesisRequest], batch_size: int | None = None,
                   longest_first: bool = True) -> Speeches:
        """Several requests in one stream of RequestEvents (engine/longform/many.py): each request's events are
        what speak(request) alone gives it (the same codes and audio with the same seed), tagged with its number;
        a refused request gets its error as its one event and never stops the others. Requests of one chunk run
        side by side (up to batch_size, None: suggested_batch_size; longest_first: the longest start first, so
        all end sooner), longer ones after them, chunked as speak() does. cancel(i) stops request i, close()
        all; engine.run_speeches is the one loop over the events. Implemented once: engine.speak_many(synth, ...)."""

    def synthesize(self, text: str, voice: VoiceChoice, language: str = "auto",
                   settings: GenerationSettings | None = None, instruct: str | None = None
                   ) -> Iterator[SynthesisEvent]:
        """The events of one synthesis: a FrameEvent per frame (and AudioChunks when settings.stream_audio),
        then one SynthesisResult. voice: a Voice (Base), a speaker name or Speaker (CustomVoice) or None
        (VoiceDesign, instruct = the voice description). settings.ignore_eos runs exactly max_frames frames;
        settings.codes_only skips decoding. Closing the generator between frames cancels it. Several
        syntheses may be open at once (each holds its own state), stepped from one thread at a time;
        engine.run_synthesis is the one loop over the events. Callers speaking a user's text use speak()."""

    def decode(self, codes: np.ndarray) -> np.ndarray:
        """Codec ids (frames, 16) -> float32 audio at SAMPLE_RATE."""
