"""Prompt -> frames -> audio: the one object the CLI and the GUI use.

Synthesizer(bundle_dir, threads=None) loads a model; what its callers may use is engine/synthesis/contract.py's
SynthesizerContract, which it implements (checked by mypy and tests/gui/test_contract.py). Here: loading the
networks, voices, and checking and planning a request; planning.py has the rules, prompting.py the prompt,
generation.py the frames, and jobs.py turns them into events and audio."""
from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..codec_format import SAMPLES_PER_FRAME
from ..errors import EngineError, TextError
from ..longform.events import Speech, Speeches
from ..longform.many import speak_many
from ..longform.request import SynthesisRequest
from ..longform.runner import speak
from ..nets.code_predictor import CodePredictor
from ..nets.codec_decoder import DEFAULT_DECODER_PRECISION, CodecDecoder, check_decoder_precision
from ..nets.talker import Talker
from ..nets.weight_reads import FrameWeights, frame_weights
from ..runtime.bundle import Bundle
from ..runtime.cpu import load_average, physical_cores
from ..runtime.device import CPU, DEFAULT_DEVICE, DEFAULT_GPU_PRECISION, Device, GpuError, resolve_device
from ..runtime.manifest_parts import TextPart
from ..runtime.tuning import TuningRecord
from ..text.prompt import Prompt, PromptIds
from ..text.tokenizer import TextTokenizer, clean_text
from ..types import (
    GenerationSettings,
    JobEvent,
    SynthesisEvent,
    SynthesisJob,
    SynthesisResult,
    check_batch_request,
)
from ..voice import Voice
from . import planning
from .contract import AudioSource, SynthesizerContract, VoiceChoice
from .generation import SequenceState
from .jobs import Job, batch_events, job_events
from .model_kind import ModelKind
from .placement import check_weights_fit, gpu_failures, load_placed, on_cpu_after
from .prompting import PromptMaker
from .runs import BatchRun
from .sampling import Sampler, SamplingConfig, resolve, settings_from_generation_config
from .self_tuning import (
    DEFAULT_BUDGET,
    Parts,
    Progress,
    decoder_choice,
    stored_tuning,
    thread_plan,
    tune_parts,
)
from .spin_tuning import Probe

DEFAULT_BATCH_SIZE = 4  # side by side on q8 bundles (suggested_batch_size): see docs/performance.md, "Several lines at once"


class Synthesizer:
    def __init__(self, bundle: str | Path | Bundle, threads: int | None = None, adaptive_threads: bool = True,
                 decoder_precision: str = DEFAULT_DECODER_PRECISION, tuning: bool = True,
                 device: str | Device = DEFAULT_DEVICE, gpu_precision: str = DEFAULT_GPU_PRECISION):
        """threads: CPU threads per network (default: the physical core count). adaptive_threads: let the talker
        and code predictor drop to one thread while other programs hold the cores (engine/runtime/thread_governor.py).
        decoder_precision: "fp32" (the exact speech decoder), "bf16" (its big convolutions in bf16, about 1.5x
        faster on CPUs with AVX512-BF16) or "auto" (bf16 where the CPU has AVX512-BF16, or where this computer's tuning
        measured it faster); engine/nets/codec_decoder.py. tuning: use the settings measured for this model on this
        computer (engine/synthesis/self_tuning.py); an explicit `threads` still sets every thread count.
        device: "auto" (a GPU only where this computer's tuning measured it faster than the CPU), "cpu", "gpu" or
        "gpu:N", or a Device (resolve_device); gpu_precision "fp32" (exact) or "fp16". See engine/runtime/device.py;
        self.device says where the networks run and, in its note, why."""
        t0 = time.perf_counter()
        check_decoder_precision(decoder_precision)  # before the slow loading
        self._bundle = bundle if isinstance(bundle, Bundle) else Bundle.open(bundle)
        self._explicit_threads = threads is not None
        self.threads = threads = threads or physical_cores()
        self._adaptive_threads = adaptive_threads
        self._decoder_request = decoder_precision
        self._tuning_enabled = tuning
        lookup = stored_tuning(self._bundle) if tuning else None
        self.tuning: TuningRecord | None = lookup.record if lookup else None
        self.tuning_note: str | None = lookup.note if lookup else None
        measured = self.tuning.device_ms if self.tuning else None  # generation ms per frame by device ("cpu", "gpu:N")
        requested = device if isinstance(device, Device) else resolve_device(device, gpu_precision, measured)
        text = self._bundle.record(TextPart)
        self._ids = PromptIds.from_part(text)
        self.kind = ModelKind.from_part(text)
        self._tokenizer = TextTokenizer(self._bundle)
        self._text_table = self._bundle.table(text.table)
        self._max_positions = text.max_position_embeddings
        self._load_nets(requested)
        self._codec_vocab = int(self._talker.vocab_size)
        self.load_seconds = time.perf_counter() - t0

    def _load_nets(self, device: Device) -> None:
        """The networks on `device`; self.device is where they ended up (the CPU after an "auto" GPU failed)."""
        plan = thread_plan(self.tuning, self.threads if self._explicit_threads else None, self.threads)

        def load(d: Device):
            bundle = self._bundle.on(d)
            check_weights_fit(bundle)
            talker = Talker(bundle, plan.threads, adaptive_threads=self._adaptive_threads, int8_threads=plan.int8[0],
                            start_threads=plan.start[0])
            code_predictor = CodePredictor(bundle, plan.threads, adaptive_threads=self._adaptive_threads,
                                           int8_threads=plan.int8[1], start_threads=plan.start[1])
            # Loaded now, not on first use: pyncnn can hold the GIL inside load_model, which would freeze a GUI
            # thread for seconds in the middle of the first generation (measured 1.4-3 s at full size).
            decoder = CodecDecoder(bundle, plan.decoder, decoder_choice(bundle, self._decoder_request, self.tuning))
            return bundle, talker, code_predictor, decoder

        (self._bundle, self._talker, self._code_predictor, self._decoder), self.device = load_placed(device, load)
        # how streamed audio is decoded, and generation's threads meanwhile: this computer's tuning, else beside it
        self.overlap_decode, self.streaming_threads = plan.overlap_decode, plan.streaming_threads
        self._speaker_net = self._encoder_net = None

    @contextmanager
    def _on_device(self) -> Iterator[None]:
        """Network calls inside: a GPU failure is one GpuError line; on a GPU "auto" chose, the synthesizer moves
        to the CPU for its next runs (this one has stopped) and says so."""
        try:
            with gpu_failures(self.device):
                yield
        except GpuError as e:
            if not (self.device.on_gpu and self.device.fallback_to_cpu):
                raise
            self._load_nets(on_cpu_after(e))
            raise GpuError(f"{str(e).rstrip('.')}. This model runs on the CPU from now on: start again.") from None

    # ------------------------------------------------------------------------------------------ properties

    @property
    def languages(self) -> list[str]:
        return self._ids.languages()

    @property
    def model_id(self) -> str:
        return self._bundle.model_id

    @property
    def default_settings(self) -> GenerationSettings:
        return settings_from_generation_config(self._bundle.generation_config)

    @property
    def hidden_size(self) -> int:
        return int(self._talker.hidden_size)

    @property
    def precision(self) -> str:
        """The bundle's weight precision ("fp32", "fp16", "q8", ...), for display and benchmark labels."""
        return self._bundle.precision

    @property
    def thread_counts(self) -> tuple[int, int]:
        """The threads the talker's and the code predictor's weight layers run on from their next call: the thread
        governor's count (the tuned one at first, fewer than `threads` under load) where the net can run at it, else
        the count ncnn fixed at load (int8 Gemms where OpenMP teams cannot be limited, engine/runtime/openmp.py)."""
        talker, cp = (p.net.threads_at(p.governor.current) for p in (self._talker, self._code_predictor))
        return talker, cp

    @property
    def suggested_batch_size(self) -> int:
        """Jobs worth running side by side: DEFAULT_BATCH_SIZE where the networks share each step between
        sequences (q8 bundles: one weight pass serves every row), 1 where sequences take turns (fp32/fp16
        bundles run one sequence per call, so side by side is no faster and the first job ends later)."""
        return max(1, min(DEFAULT_BATCH_SIZE, self._talker.net.max_rows, self._code_predictor.net.max_rows))

    @property
    def decoder_threads(self) -> int:
        """Threads of the speech decoder (whole or streamed; benchmarks/overlap.py compares counts)."""
        return self._decoder.threads

    @decoder_threads.setter
    def decoder_threads(self, threads: int) -> None:
        self._decoder.threads = threads

    @property
    def decoder_precision(self) -> str:
        """What the speech decoder runs at: "fp32" (exact), "bf16" (bf16 convolutions, the rest fp32) or "fp16";
        on a GPU, the GPU's precision."""
        return self.device.precision if self.device.on_gpu else self._decoder.precision

    @property
    def tuning_needed(self) -> bool:
        """True when this model has no tuning for this computer yet, or only one measured while the machine was
        busy and the machine is quiet now (the app runs tune() then). Never on a GPU: the tuning times CPU settings."""
        return (self._tuning_enabled and not self.device.on_gpu
                and (self.tuning is None or self.tuning.worth_retuning(load_average())))

    def tune(self, progress: Progress | None = None, cancel: Callable[[], bool] | None = None,
             budget: float = DEFAULT_BUDGET, *, timing: Callable[[str, Any, float], float] | None = None,
             spin_probe: Probe | None = None, time_cap: float | None = None,
             include_software_gpus: bool = False, clock: Callable[[], float] = time.monotonic) -> TuningRecord:
        """Measure the fastest settings for this model on this computer, store and apply them. progress(fraction,
        message) reports; cancel() returning True stops with Cancelled and changes nothing. On a GPU the networks
        move to the CPU for the measuring (it times the CPU's settings, and each GPU as one more candidate), then
        back: to the same GPU, or where the new figures send "auto". timing, spin_probe, time_cap,
        include_software_gpus and clock inject a CPU and bound the run (tests; self_tuning.tune_parts)."""
        measuring = dict(timing=timing, spin_probe=spin_probe, time_cap=time_cap,
                         include_software_gpus=include_software_gpus, clock=clock)
        if not self.device.on_gpu:
            return self._tune_on_cpu(progress, cancel, budget, measuring)
        was = self.device
        self._load_nets(replace(CPU, fallback_to_cpu=was.fallback_to_cpu))
        try:
            return self._tune_on_cpu(progress, cancel, budget, measuring)
        finally:
            measured = self.tuning.device_ms if self.tuning else None
            self._load_nets(resolve_device("auto", was.precision, measured) if was.fallback_to_cpu else was)

    def _tune_on_cpu(self, progress: Progress | None, cancel: Callable[[], bool] | None, budget: float,
                     measuring: dict[str, Any]) -> TuningRecord:
        """The tuner times this synthesizer's loaded networks (self_tuning.Parts); what it chose is taken here."""
        parts = Parts.of(self._bundle, self._talker, self._code_predictor, self._decoder, self.overlap_decode,
                         self._adaptive_threads, self.threads)
        explicit = self.threads if self._explicit_threads else None
        record, self.tuning_note = tune_parts(parts, self._decoder_request, explicit, progress, cancel, budget,
                                              **measuring)
        self.tuning = record
        self._decoder, self.overlap_decode = parts.decoder, parts.overlap_decode
        self.streaming_threads = None if explicit is not None else parts.streaming_threads
        return record

    def frame_weights(self) -> FrameWeights:
        """The weight bytes one generated frame reads, per network (for the memory-bandwidth floor)."""
        return frame_weights(self._bundle)

    # ------------------------------------------------------------------------------------------ components

    @property
    def _speaker_encoder(self):
        if self._speaker_net is None:  # loaded on first voice creation: synthesis alone never needs it
            from ..nets.speaker_encoder import SpeakerEncoder

            self._speaker_net = SpeakerEncoder(self._bundle, self.threads)
        return self._speaker_net

    @property
    def _codec_encoder(self):
        if self._encoder_net is None:
            from ..nets.codec_encoder import CodecEncoder

            self._encoder_net = CodecEncoder(self._bundle, self.threads)
        return self._encoder_net

    @property
    def _prompts(self) -> PromptMaker:
        return PromptMaker(self.kind, self._ids, self._tokenizer, self._text_table, self._talker.codec_rows,
                           self._code_predictor.frame_rows)

    def _text_rows(self, ids) -> np.ndarray:
        """T(ids): projected text rows (n, H) float32."""
        return self._prompts.text_rows(ids)

    # ------------------------------------------------------------------------------------------ voices

    def create_voice(self, audio: AudioSource, ref_text: str | None = None, name: str = "",
                     language: str = "auto") -> Voice:
        """x-vector from the reference; with ref_text also its codec frames for in-context cloning (ICL)."""
        from ..io.audio import load_audio

        self.kind.refuse_clone()
        language = self.check_language(language)
        if ref_text is not None:
            ref_text = clean_text(ref_text, "reference text")
        wav = load_audio(audio)
        ref_codes = None
        if ref_text is not None:
            planning.check_reference_frames(-(-wav.shape[0] // SAMPLES_PER_FRAME), self._max_positions)
        with self._on_device():
            if ref_text is not None:
                ref_codes = np.asarray(self._codec_encoder.encode(wav), dtype=np.int64)
            xvector = np.asarray(self._speaker_encoder.xvector(wav), dtype=np.float32).reshape(-1)
        if not name and isinstance(audio, (str, Path)):
            name = Path(audio).stem
        return Voice(xvector=xvector, model_id=self.model_id, ref_codes=ref_codes, ref_text=ref_text,
                     language=language, name=name, ref_audio=wav)

    def check_voice(self, voice: VoiceChoice) -> None:
        """Raise a clear VoiceError if this model cannot speak with `voice` (see build_prompt)."""
        self._prompts.speaker_row(voice, self._check_clone_voice)

    def _check_clone_voice(self, voice: Voice) -> None:
        planning.check_clone_voice(voice, self.model_id, self.hidden_size, self._code_predictor.codebook_size,
                          self._max_positions)

    def check_language(self, language: str | None) -> str:
        lang = (language or "auto").strip().lower()
        if lang not in self.languages:
            raise TextError(f"unknown language {language!r}; choose one of {', '.join(self.languages)}")
        return lang

    # ------------------------------------------------------------------------------------------ synthesis

    def _sampling_config(self, settings: GenerationSettings | None) -> SamplingConfig:
        return resolve(settings, self._bundle.generation_config, self._ids.codec_eos, self._codec_vocab)

    def _build_prompt(self, text: str, voice: VoiceChoice, language: str = "auto", non_streaming: bool | None = None,
                      instruct: str | None = None) -> Prompt:
        """Prefill and trailing rows for this text and voice (synthesis/prompting.py)."""
        return self._prompts.build(text, voice, self.check_language(language), non_streaming, instruct,
                                   self._check_clone_voice)

    def check_settings(self, settings: GenerationSettings) -> None:
        """Raise TextError naming the first setting out of range (the frame cap's upper bound needs the text and
        is checked by synthesize)."""
        if not isinstance(settings, GenerationSettings):
            raise TextError(f"Settings must be GenerationSettings, not {type(settings).__name__}.")
        settings.check()

    def speak(self, request: SynthesisRequest,
              made: Mapping[int, Callable[[], SynthesisResult]] | None = None) -> Speech:
        """The one door for a caller's text, short or long: checked now (errors surface before the first event),
        split once into chunks (a short text is one), each spoken under the runaway guard and joined into one
        recording (engine/longform/runner.py); `made`: chunks an earlier run finished (a ChunkJournal's), put in
        their place, not generated. run_speech is the one loop over its events."""
        return speak(self, request, made)

    def speak_many(self, requests: Sequence[SynthesisRequest], batch_size: int | None = None,
                   longest_first: bool = True) -> Speeches:
        """The door for several requests at once (engine/longform/many.py): one stream of RequestEvents, each
        request's events exactly what speak(request) alone gives with the same seed; requests of one chunk side
        by side (up to batch_size, None: suggested_batch_size), longer ones chunked after them; run_speeches is
        the one loop over them."""
        return speak_many(self, requests, batch_size, longest_first)

    def synthesize(
        self, text: str, voice: VoiceChoice, language: str = "auto", settings: GenerationSettings | None = None,
        instruct: str | None = None,
    ) -> Iterator[SynthesisEvent]:
        """Validate everything now (errors surface before the first event), then return the event generator."""
        settings = settings or GenerationSettings()
        self.check_settings(settings)
        job = self._plan(text, voice, language, settings, instruct)
        return self._events(job)

    def _plan(self, text: str, voice: VoiceChoice, language: str, settings: GenerationSettings,
              instruct: str | None = None) -> Job:
        planning.check_text_fits(text, settings, self._max_positions)
        prompt = self._build_prompt(text, voice, language, settings.non_streaming_text, instruct)
        max_new = int(self._bundle.generation_config.get("max_new_tokens", 8192))
        hard = planning.frame_limit(max_new, self._max_positions, prompt.prefill.shape[0])
        icl = voice if isinstance(voice, Voice) and voice.icl else None
        planning.check_room(hard, prompt.prefill.shape[0], self._max_positions, bool(instruct), icl is not None)
        streamed_text = len(prompt.trailing) if len(prompt.trailing) > 1 else 0
        max_frames, est = planning.frame_cap(text, settings, hard, streamed_text)
        seed = settings.seed if settings.seed is not None else secrets.randbits(32)
        sequence = SequenceState(prompt=prompt, sampler=Sampler(self._sampling_config(settings), seed),
                                 max_frames=max_frames, ignore_eos=settings.ignore_eos)
        return Job(
            sequence=sequence,
            estimated_frames=min(est, max_frames),
            ref_codes=np.asarray(icl.ref_codes, np.int64) if icl is not None else None,
            stream_audio=settings.stream_audio,
            decode=not settings.codes_only,
        )

    def _events(self, job: Job) -> Iterator[SynthesisEvent]:
        with self._on_device():
            yield from self._device_events(job)

    def _device_events(self, job: Job) -> Iterator[SynthesisEvent]:
        yield from job_events(self._talker, self._code_predictor, self._decoder, job, self.load_seconds,
                              self.overlap_decode, self.streaming_threads)

    def synthesize_many(self, jobs: Sequence[SynthesisJob], settings: GenerationSettings | None = None,
                        batch_size: int | None = None, longest_first: bool = False) -> BatchRun:
        """Several syntheses in one run, up to batch_size at a time sharing every talker / code-predictor step
        (continuous batching: a finished job leaves, the next waiting one takes its place). See BatchRun.
        batch_size None: suggested_batch_size. longest_first: jobs join in order of their expected length (the
        estimate from the text, at most the job's frame cap), longest first, so that short jobs fill the slots
        at the end instead of one long job running alone: the whole batch ends sooner. Default: the given order
        (a long text's chunks, whose first one should be ready first)."""
        if batch_size is None:
            batch_size = self.suggested_batch_size
        settings = settings or GenerationSettings()
        self.check_settings(settings)
        check_batch_request(settings, batch_size)
        planned: list[tuple[int, Job]] = []
        failed: list[tuple[int, EngineError]] = []
        for i, job in enumerate(jobs):
            try:
                if not isinstance(job, SynthesisJob):
                    raise TextError(f"Job {i + 1} is a {type(job).__name__}, not a SynthesisJob.")
                own = replace(settings, max_frames=job.max_frames if job.max_frames is not None else settings.max_frames,
                              seed=job.seed if job.seed is not None else settings.seed,
                              stream_audio=job.stream_audio if job.stream_audio is not None else settings.stream_audio)
                self.check_settings(own)
                planned.append((i, self._plan(job.text, job.voice, job.language, own, job.instruct)))
            except EngineError as e:
                failed.append((i, e))
        if longest_first:  # a stable sort: equal estimates keep the given order
            planned.sort(key=lambda p: -p[1].estimated_frames)
        return BatchRun(lambda run: self._many_events(run, planned, failed, batch_size))

    def _many_events(self, run: BatchRun, planned: list[tuple[int, Job]], failed: list[tuple[int, EngineError]],
                     batch_size: int) -> Generator[JobEvent, None, None]:
        with self._on_device():
            yield from self._device_many_events(run, planned, failed, batch_size)

    def _device_many_events(self, run: BatchRun, planned: list[tuple[int, Job]],
                            failed: list[tuple[int, EngineError]], batch_size: int) -> Generator[JobEvent, None, None]:
        yield from batch_events(self._talker, self._code_predictor, self._decoder, planned, failed, batch_size,
                                run.take_cancelled, self.load_seconds, self.overlap_decode)

    def decode(self, codes: np.ndarray) -> np.ndarray:
        """Codec ids (frames, 16) -> float32 audio at SAMPLE_RATE (the official chunked decode)."""
        with self._on_device():
            return np.asarray(self._decoder.decode(np.asarray(codes, np.int64)), np.float32)


if TYPE_CHECKING:
    def _implements_the_contract(synth: Synthesizer) -> SynthesizerContract:
        return synth  # mypy: a Synthesizer is a SynthesizerContract
