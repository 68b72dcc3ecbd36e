"""The one place the GUI touches the engine; every other GUI module imports engine names from here.

Only the engine's public API is used: the `engine` package exports (engine/__init__.py lists them) and the model
store package (engine.store: catalogue, downloads, installed models, the voice library). The engine's file, conversion and demo
functions load their modules on first use, so the app starts quickly.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from engine import (
    AUDIO_FORMATS,
    DEFAULT_BATCH_SIZE,
    DEFAULT_DECODER_PRECISION,
    FRAME_RATE,
    GENERATION_SETTINGS,
    MAX_BATCH_SIZE,
    MAX_TEXT_FILE_BYTES,
    SAMPLE_RATE,
    SAMPLES_PER_FRAME,
    SAMPLING_SETTINGS,
    SAVE_SUFFIXES,
    AudioChunk,
    AudioError,
    AudioSource,
    BundleError,
    Cancelled,
    ChunkAudio,
    ChunkFrame,
    ChunkJournal,
    ChunkPlan,
    ChunkProgress,
    ChunkRetry,
    ChunkSkipped,
    ChunkStarted,
    ChunkStream,
    ConvertError,
    EngineError,
    FrameEvent,
    GenerationSettings,
    JoinSettings,
    JournalError,
    LongResult,
    LongTextOptions,
    MissingVoiceInput,
    ModelKind,
    NotUtf8Error,
    RecordingLength,
    SettingSpec,
    Speech,
    SynthesisEvent,
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
    VoiceInput,
    VoiceNeed,
    VoiceSummary,
    as_sentence,
    check_own_file,
    decode_text,
    designed_voice,
    is_designed,
    load_npy_bytes,
    npy_bytes_needed,
    official_defaults,
    os_reason,
    physical_cores,
    recording_of_made,
    regular_file_problem,
    run_speech,
    run_speeches,
    run_synthesis,
    speak,
    speaker_name,
    usable_cpus,
    voice_for,
    write_atomic,
    write_own_file,
)
from engine.store import (
    CATALOGUE,
    DEFAULT_PRECISION,
    WHISPER_CATALOGUE,
    ModelStore,
    StoreError,
    VoiceLibrary,
    default_models_dir,
    default_voices_dir,
    find_entry,
    format_bytes,
    move_store,
    pending_downloads,
    remember_models_dir,
)

SETTING = {spec.name: spec for spec in GENERATION_SETTINGS}  # each generation setting's declaration, by field

__all__ = [
    "GENERATION_SETTINGS",
    "SAMPLING_SETTINGS",
    "SETTING",
    "SettingSpec",
    "official_defaults",
    "AUDIO_FORMATS",
    "SAVE_SUFFIXES",
    "VoiceLibrary",
    "default_voices_dir",
    "MAX_TEXT_FILE_BYTES",
    "decode_text",
    "gpu_choices",
    "installed_conversion",
    "runs_on",
    "load_npy_bytes",
    "npy_bytes_needed",
    "os_reason",
    "regular_file_problem",
    "check_own_file",
    "write_atomic",
    "write_own_file",
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_DECODER_PRECISION",
    "MAX_BATCH_SIZE",
    "physical_cores",
    "usable_cpus",
    "CATALOGUE",
    "WHISPER_CATALOGUE",
    "Transcript",
    "TranscriberContract",
    "open_transcriber",
    "speech_recogniser",
    "recognises_speech",
    "DEFAULT_PRECISION",
    "FRAME_RATE",
    "SAMPLE_RATE",
    "SAMPLES_PER_FRAME",
    "AudioChunk",
    "AudioError",
    "BundleError",
    "Cancelled",
    "ChunkAudio",
    "ChunkFrame",
    "ChunkJournal",
    "ChunkPlan",
    "JournalError",
    "recording_of_made",
    "ChunkProgress",
    "ChunkRetry",
    "ChunkSkipped",
    "ChunkStarted",
    "ConvertError",
    "EngineError",
    "FrameEvent",
    "GenerationSettings",
    "JoinSettings",
    "LongResult",
    "LongTextOptions",
    "ModelKind",
    "VoiceNeed",
    "VoiceInput",
    "MissingVoiceInput",
    "voice_for",
    "speaker_name",
    "ModelStore",
    "kind_of",
    "takes_style_instructions",
    "Progress",
    "RecordingLength",
    "StoreError",
    "SynthFactory",
    "SynthesisEvent",
    "SynthesisResult",
    "Timings",
    "TuningRecord",
    "SynthesizerContract",
    "VoiceChoice",
    "TextError",
    "NotUtf8Error",
    "Voice",
    "VoiceError",
    "VoiceSummary",
    "as_sentence",
    "check_q8_bundle",
    "convert_checkpoint",
    "designed_voice",
    "is_designed",
    "default_models_dir",
    "find_entry",
    "format_bytes",
    "install_model",
    "installed_model",
    "is_demo_bundle",
    "load_audio",
    "make_demo_bundle",
    "move_store",
    "open_synthesizer",
    "pending_downloads",
    "precisions",
    "read_audio_file",
    "remember_models_dir",
    "run_speech",
    "run_speeches",
    "run_synthesis",
    "save_audio",
    "speak",
    "Speech",
    "SynthesisRequest",
    "ChunkStream",
]

Progress = Callable[[float, str], None]


SynthFactory = Callable[[Path], SynthesizerContract]


def open_synthesizer(bundle_dir: Path, threads: int | None = None,
                     decoder_precision: str = DEFAULT_DECODER_PRECISION, device: str = "auto",
                     gpu_precision: str = "fp32") -> SynthesizerContract:
    """Load a model bundle (slow for full-size bundles: call it from a worker thread). threads: CPU threads per
    network, None for the counts measured for this computer (else the physical core count). decoder_precision:
    "fp32" (exact) or "auto" (bf16 convolutions where this computer's tuning, or without one the CPU's
    AVX512-BF16, says they are faster). device: "auto", "cpu" or "gpu:N" (a GPU that is gone or fails falls back
    to the CPU here, with the reason in synth.device.note: a setting from another computer never stops a model
    opening), gpu_precision "fp32" or "fp16"."""
    from dataclasses import replace

    from engine import Device, GpuError, Synthesizer, resolve_device

    try:
        chosen = resolve_device(device, gpu_precision)
    except GpuError as e:
        why = str(e).rstrip(".")
        chosen = Device(note=f"Running on the CPU: {why[:1].lower()}{why[1:]}.")
    if chosen.on_gpu:  # the app falls back where the command line stops: the status line gives the reason
        chosen = replace(chosen, fallback_to_cpu=True)
    synth = Synthesizer(bundle_dir, threads=threads, decoder_precision=decoder_precision, device=chosen)
    # Touch the bundle-derived properties here, in the worker, so a damaged bundle fails now.
    synth.languages, synth.default_settings  # noqa: B018
    return synth


NO_MODEL_KIND = ModelKind()  # what the app offers before a model is open: a Base model's voice column


def kind_of(synth: SynthesizerContract | None) -> ModelKind:
    """The loaded model's kind (a Base model's with none loaded): what it speaks with and what it follows."""
    return synth.kind if synth is not None else NO_MODEL_KIND


def takes_style_instructions(synth: SynthesizerContract | None) -> bool:
    """A preset speaker and a style instruction for it (CustomVoice 1.7B; the 0.6B ignores one, as upstream)."""
    return synth is not None and synth.kind.needs == VoiceNeed.SPEAKER and synth.kind.honours_instruct


def runs_on(device) -> str:
    """Where a synthesizer's networks run, in words for the window and a take's details: "the CPU", or the GPU
    and whether it is exact or fast (fp16)."""
    if not device.on_gpu:
        return "the CPU"
    return f"GPU {device.gpu.index}: {device.gpu.name}, {'fast (fp16)' if device.precision == 'fp16' else 'exact'}"


def gpu_choices() -> tuple[list[tuple[str, str]], str]:
    """The GPUs ncnn sees as (label, "gpu:N"), and why there are none (empty when there are)."""
    from engine import scan_gpus

    scan = scan_gpus()
    return [(g.describe(), f"gpu:{g.index}") for g in scan.gpus], scan.reason


def read_audio_file(path: str | Path) -> tuple[np.ndarray, int]:
    """Samples (n, channels) float32 at the file's own rate."""
    from engine import read_audio_file as _read

    return _read(path)


def load_audio(src: AudioSource) -> np.ndarray:
    """Mono float32 at 24 kHz, resampled the way the engine does it."""
    from engine import load_audio as _load

    return _load(src)


def audio_file_writer(path: str | Path, subtype: str | None = None):
    """An AudioFileWriter: a long file written chunk by chunk and renamed into place when complete."""
    from engine import AudioFileWriter

    return AudioFileWriter(path, subtype=subtype)


def save_audio(path: str | Path, samples: np.ndarray, sr: int = SAMPLE_RATE, subtype: str | None = None,
               exclusive: bool = False) -> None:
    """Atomic write; the format follows the suffix (.wav .flac .ogg); subtype None: 16-bit PCM (Vorbis for .ogg).
    exclusive: only if no file of that name exists when it is written (FileExistsError otherwise)."""
    from engine import save_audio as _save

    _save(path, samples, sr, subtype=subtype, exclusive=exclusive)


def convert_checkpoint(
    src: Path, dest: Path, progress: Progress | None = None, cancel: Callable[[], bool] | None = None,
    precision: str = "fp32",
) -> Path:
    from engine import convert_checkpoint as _convert

    return _convert(src, dest, precision=precision, progress=progress, cancel=cancel)


def installed_conversion(src: Path, models_dir: Path, precision: str, progress: Progress | None = None,
                         cancel: Callable[[], bool] | None = None) -> Path | None:
    """The installed model converted from the checkpoint at `src` (the same files, wherever they lie) at
    `precision`, or None. Reads the whole checkpoint (a few seconds for a full-size one)."""
    from engine import Cancelled, checkpoint_fingerprint

    def step(fraction: float) -> None:
        if cancel is not None and cancel():
            raise Cancelled("checking the checkpoint cancelled")
        if progress is not None:
            progress(fraction, "checking whether this checkpoint is installed")

    try:
        fingerprint = checkpoint_fingerprint(src, step)
    except ConvertError:
        return None  # not a readable checkpoint: the conversion says what is wrong with it
    found = ModelStore(models_dir).converted_from(fingerprint, precision)
    return found.path if found is not None else None


def check_q8_bundle(bundle: Path, checkpoint: Path, progress: Progress | None = None,
                    cancel: Callable[[], bool] | None = None) -> str:
    """The 8-bit check of a bundle made before it, against the checkpoint it came from; returns what it found,
    one phrase ("8-bit, checked: KL ..." or why the model became a float one)."""
    from engine import check_q8_bundle as _check

    record = _check(bundle, checkpoint, progress=progress, cancel=cancel)
    return record.summary()


def make_demo_bundle(dest: Path, progress: Progress | None = None, replace: bool = False) -> Path:
    """replace=True replaces a previous demo bundle at dest (the engine refuses anything else)."""
    from engine import make_demo_bundle as _make

    return _make(dest, progress=progress, overwrite=replace)


def is_demo_bundle(path: Path) -> bool:
    from engine import is_demo_bundle as _is_demo

    return _is_demo(path)



def install_model(source: str, models_dir: Path, precision: str, endpoint: str | None = None,
                  token: str | None = None, progress: Progress | None = None,
                  cancel: Callable[[], bool] | None = None) -> Path:
    """Download a catalogue model or repository into the store folder and convert it; returns the bundle."""
    from engine.store import ModelStore, install

    model = install(source, precision=precision, store=ModelStore(models_dir), endpoint=endpoint or None,
                    token=token or None, progress=progress, cancel=cancel)
    return model.path


def precisions() -> tuple[str, ...]:
    from engine import OFFERED_PRECISIONS

    return tuple(OFFERED_PRECISIONS)


@runtime_checkable
class TranscriberContract(Protocol):
    """What the app uses of engine.Transcriber (tests/gui/test_contract.py holds the GUI tests' fake to it)."""

    def transcribe(self, audio: AudioSource, language: str | None = None, progress: Progress | None = None,
                   cancel: Callable[[], bool] | None = None) -> Transcript: ...


def open_transcriber(bundle_dir: Path, threads: int | None = None) -> TranscriberContract:
    """Load a Whisper bundle (call it from a worker thread: the encoder and decoder are read here)."""
    from engine import Transcriber

    return Transcriber(bundle_dir, threads=threads)


def recognises_speech(path: Path) -> bool:
    """A Whisper bundle (it writes down a reference's words; it is not a voice model)."""
    from engine import is_whisper_bundle

    return is_whisper_bundle(path)


def speech_recogniser(models_dir: Path) -> Path | None:
    """The installed Whisper model that writes down a reference's words (the store's choice), or None."""
    try:
        model = ModelStore(models_dir).speech_recogniser()
    except StoreError:
        return None  # an unreadable models folder: the Models dialog says why
    return model.path if model is not None else None


def installed_model(value: Path) -> Path:
    """A bundle folder, or the folder of the installed model called `value` (else `value` unchanged)."""
    try:
        return ModelStore().resolve(value)
    except StoreError:
        return value
