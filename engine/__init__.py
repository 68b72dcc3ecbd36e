"""Qwen3-TTS inference on ncnn + numpy. Imports no Qt and no torch.

Public API (the GUI, the CLI and the benchmarks' end-to-end paths use only these names):
    Synthesizer                the one door: voices, synthesis, decoding
    SynthesizerContract, VoiceChoice, AudioSource   what a caller may use of a Synthesizer, stated
        once as a Protocol (engine/synthesis/contract.py); the app's test fake implements it too
    run_synthesis(events, on_frame, on_audio, check_cancel)   the loop over one synthesize()'s events
    DEFAULT_BATCH_SIZE, MAX_BATCH_SIZE   the default and largest number of texts side by side (speak_many, a long
        text's chunks); check_batch_size(n)   the one check
    GenerationSettings         sampling and output options of one synthesis (validated by the Synthesizer);
        GENERATION_SETTINGS, SettingSpec each generation setting declared once (engine/setting_specs.py);
        SAMPLING_SETTINGS                the sampling ones among them
        official_defaults()              every sampling setting at the official wrapper's default
    FrameEvent, AudioChunk, SynthesisResult, SynthesisEvent, Timings   what synthesis yields
    Voice                      a cloned voice (x-vector, optional reference codes); Voice.load / save
    VoiceSummary               a voice file's metadata, read without loading the voice
    designed_voice, is_designed   a VoiceDesign voice saved for reuse, and how to recognise one
    ModelKind, Speaker         what kind of model a bundle holds (Base, CustomVoice, VoiceDesign) and its speakers;
        speaker_name(voice): the preset speaker a voice choice names, None for a cloned voice or none;
        ModelKind.needs, a VoiceNeed: what the kind speaks with (reference, preset speaker, description)
    voice_for(synth, VoiceInput(...))   the one function that turns what the user gave into the voice the model's
        kind needs (engine/synthesis/voice_input.py); MissingVoiceInput(.needs) when the kind's input is missing
    SAMPLE_RATE, SAMPLES_PER_FRAME, FRAME_RATE   24000 Hz output, 1920 samples per 80 ms frame, 12.5 frames/s
    SynthesisRequest(text, voice, language, settings, instruct, options)   what a caller asks: the unit every
        caller builds and Synthesizer.speak(request) takes (engine/longform/request.py); speak(synth, request)
        the same over a synthesizer that also has the side-by-side primitive synthesize_many (the app's test
        fake); LongTextOptions, JoinSettings, GuardSettings how a text is split, joined and guarded; Speech and
        its events ChunkStarted, ChunkFrame, ChunkStream, ChunkRetry, ChunkAudio, ChunkSkipped, LongResult
        (engine/longform/runner.py)
        ChunkProgress   which chunk progress shows while chunks run side by side
        RecordingLength   how long the recording will be (every chunk's estimate + pauses, refined as they finish)
        run_speech(speech, on_frame, on_samples, ...)   the one loop consuming them (engine/longform/consuming.py);
            SpeechListener: what one request's events mean to its caller, for a loop that stops between chunks
        Synthesizer.speak_many(requests, batch_size, longest_first) several requests in one run: Speeches, whose
            RequestEvent tags each request's events with its number (engine/longform/many.py); speak_many(synth,
            requests, ...) the same over such a synthesizer; run_speeches(speeches, on_frame, ..., on_done,
            on_failed) the one loop consuming them
        ChunkJournal, ChunkPlan, JournalError, JournalInUse, same_voice   a long text's finished chunks kept on disk as they are
            made, so that a later run continues where a closed, crashed or killed one stopped (engine/longform/journal.py);
            recording_of_made: the recording of those chunks alone, the others left out
    estimated_frames(text)   a synthesis's length estimate from its text (its first FrameEvent.estimated_frames)
    split_text, TextChunk, DEFAULT_MAX_CHARS   the text splitter
    read_text_file, decode_text, MAX_TEXT_FILE_BYTES   a text file as str: UTF-8, or UTF-16 with its mark (one reader)
    write_atomic(path, data)   a file written to a temporary name, synced, then renamed over path;
        create_new(path, data)   the same, only if no file of that name exists (FileExistsError otherwise);
        os_reason(error)   what went wrong with a write, in words a user acts on ("the disk is full")
    write_own_file(path, data), read_own_file(path, max_bytes), OwnFileError   the app's own files (caches,
        records, saved text, pointers): written atomically and never through a link (one is refused, in words);
        check_own_file(path) refuses a link (or folder) where a library opens a file of the app's (a lock);
        cache_dir() the app's one cache folder (QWEN3TTS_CACHE_DIR, else the platform's)
    regular_file_problem(path, what), npy_bytes_needed(header), load_npy_bytes(data)   reading files the user
        hands over without trusting them (FIFOs, lying .npy headers)
    decode_codes(bundle, codes, threads, precision)   codec ids -> audio, loading only the decoder
    DECODER_PRECISIONS, DEFAULT_DECODER_PRECISION   the speech decoder's precisions ("auto", "fp32", "bf16")
    load_audio, read_audio_file, save_audio   audio files in and out; AUDIO_FORMATS, AudioFormat, SAVE_SUFFIXES,
        SAVE_SUFFIX_WORDS   the one list of the formats audio is saved in (engine/io/audio_formats.py)
    convert_checkpoint(src, dest, precision, progress)   Hugging Face checkpoint -> bundle (8-bit ones checked)
        checkpoint_fingerprint(src): the sha256 of a checkpoint's files, so a second import of it is recognised
    the 8-bit check (engine/convert/q8_check.py): check_q8_bundle(bundle, checkpoint, progress, cancel) checks a
        bundle made before it; Q8CheckRecord, read_check_record(manifest), CheckRecordError   what a manifest
        records of it; sampling_kl(ref_logits, logits)   its error measure
    make_demo_bundle(dest, progress), is_demo_bundle(path)   the demo model (a tiny random-weight bundle)
    Bundle, OFFERED_PRECISIONS   an opened bundle (manifest, precision); the precisions offered for conversion
    physical_cores, usable_cpus   CPU counts for the default thread count
    where the networks run (engine/runtime/device.py): resolve_device(requested, precision, measured) -> Device
        ("auto" | "cpu" | "gpu" | "gpu:N"; parse_device checks the text), scan_gpus() -> the GpuDevice list ncnn
        sees (name, kind, driver, memory) or why there is none; faster_gpu(measured) the self-tuning's rule for
        "auto"; DEFAULT_DEVICE, GPU_PRECISIONS ("fp32" exact, "fp16"), DEFAULT_GPU_PRECISION; GpuError (no GPU, a
        pipeline the driver cannot build, lost, out of memory: one line)
    cpu_model, load_average, openmp_settings, busy_processes   CPU facts and a competing load for speed figures
    measure_read_bandwidth(readers), floor_and_share(bytes, seconds, bandwidth)   the machine's memory read
        bandwidth and how close a network comes to it (engine/runtime/bandwidth.py)
    TuningRecord, CandidateFigure   the settings measured for a model on this computer (Synthesizer.tune)
    clean_text(text)           the text as the tokenizer will see it (normalised, control characters gone)
    InstructIgnoredWarning     warned when a model will not follow an instruction (CustomVoice 0.6B)
    VOICE_SUFFIX               the file name ending of a voice file
    AudioFileWriter            an audio file written chunk by chunk (long texts), atomically
    load_npy_file(path, max_bytes)   a user's .npy file read with the same checks as load_npy_bytes
    speech recognition (Whisper on ncnn, engine/recognition/): Transcriber(bundle, threads) loads a Whisper bundle;
        .transcribe(audio, language=None, progress, cancel) -> Transcript (text, language, language_detected,
        token_ids, prompt_ids, seconds, complete, TranscriptTimings); transcribe_file(bundle, audio, language) for
        one recording; is_whisper_bundle(path); is_whisper_checkpoint(path) (convert_checkpoint makes such a
        checkpoint a Whisper bundle); WHISPER_LANGUAGES (code -> name); LanguageError for a language the
        model does not know; recordings of up to 30 s
    engine.store               the model store (catalogue, downloads, installed models): a package with its own API
    EngineError and its subclasses AudioError, BundleError, Cancelled, CodesError, ConvertError, LanguageError,
    TextError (NotUtf8Error: a text file in an 8-bit code page), VoiceError: bad input, each with a one-line message; as_sentence(text) shows any message in the house voice
    (capital letter, full stop).
decode_codes, the audio file functions, convert_checkpoint and the demo functions load their modules on first
use, so `import engine` stays quick.
"""

from importlib import import_module
from typing import Any

from .runtime.cpu import (
    busy_processes,
    cpu_model,
    load_average,
    openmp_settings,
    physical_cores,
    usable_cpus,
)
from .runtime.openmp_setup import configure_openmp

configure_openmp()  # before anything imports ncnn (libgomp reads its environment once, at load)

from .codec_format import FRAME_RATE, SAMPLE_RATE, SAMPLES_PER_FRAME  # noqa: E402
from .errors import (  # noqa: E402
    AudioError,
    BundleError,
    Cancelled,
    CodesError,
    ConvertError,
    EngineError,
    LanguageError,
    NotUtf8Error,
    TextError,
    VoiceError,
    as_sentence,
)
from .io.audio_formats import AUDIO_FORMATS, SAVE_SUFFIX_WORDS, SAVE_SUFFIXES, AudioFormat  # noqa: E402
from .io.fileio import (  # noqa: E402
    OwnFileError,
    check_own_file,
    create_new,
    os_reason,
    read_own_file,
    write_atomic,
    write_own_file,
)
from .io.safefile import load_npy_bytes, load_npy_file, npy_bytes_needed, regular_file_problem  # noqa: E402
from .io.text_file import MAX_TEXT_FILE_BYTES, decode_text, read_text_file  # noqa: E402
from .longform.consuming import SpeechListener, run_speech, run_speeches  # noqa: E402
from .longform.events import (  # noqa: E402
    ChunkAudio,
    ChunkFrame,
    ChunkProgress,
    ChunkRetry,
    ChunkSkipped,
    ChunkStarted,
    ChunkStream,
    LongResult,
    RequestEvent,
    Speech,
    Speeches,
)
from .longform.joining import JoinSettings  # noqa: E402
from .longform.journal import ChunkJournal, ChunkPlan, JournalError, JournalInUse, same_voice  # noqa: E402
from .longform.many import speak_many  # noqa: E402
from .longform.recording_length import RecordingLength  # noqa: E402
from .longform.request import LongTextOptions, SynthesisRequest  # noqa: E402
from .longform.runaway import GuardSettings  # noqa: E402
from .longform.runner import recording_of_made, speak  # noqa: E402
from .nets.codec_decoder import DECODER_PRECISIONS, DEFAULT_DECODER_PRECISION  # noqa: E402
from .runtime.bundle import OFFERED_PRECISIONS, Bundle  # noqa: E402
from .runtime.cache_folder import cache_dir  # noqa: E402
from .runtime.device import (  # noqa: E402
    DEFAULT_DEVICE,
    DEFAULT_GPU_PRECISION,
    GPU_PRECISIONS,
    Device,
    GpuDevice,
    GpuError,
    faster_gpu,
    parse_device,
    resolve_device,
    scan_gpus,
)
from .runtime.q8_check_record import CheckRecordError, Q8CheckRecord, read_check_record  # noqa: E402
from .runtime.tuning import CandidateFigure, TuningRecord  # noqa: E402
from .setting_specs import GENERATION_SETTINGS, SAMPLING_SETTINGS, SettingSpec  # noqa: E402
from .synthesis.contract import AudioSource, SynthesizerContract, VoiceChoice  # noqa: E402
from .synthesis.designed_voice import designed_voice, is_designed  # noqa: E402
from .synthesis.model_kind import InstructIgnoredWarning, ModelKind, VoiceNeed  # noqa: E402
from .synthesis.runs import run_synthesis  # noqa: E402
from .synthesis.sampling import official_defaults  # noqa: E402
from .synthesis.synthesizer import DEFAULT_BATCH_SIZE, Synthesizer  # noqa: E402
from .synthesis.voice_input import MissingVoiceInput, VoiceInput, voice_for  # noqa: E402
from .text.length import estimated_frames  # noqa: E402
from .text.splitter import DEFAULT_MAX_CHARS, TextChunk, split_text  # noqa: E402
from .text.tokenizer import clean_text  # noqa: E402
from .types import (  # noqa: E402
    MAX_BATCH_SIZE,
    AudioChunk,
    FrameEvent,
    GenerationSettings,
    SynthesisEvent,
    SynthesisResult,
    Timings,
    check_batch_size,
)
from .voice import VOICE_SUFFIX, Speaker, Voice, VoiceSummary, speaker_name  # noqa: E402

_LAZY = {
    "convert_checkpoint": "convert",
    "checkpoint_fingerprint": "convert",
    "check_q8_bundle": "convert.q8_recheck",
    "sampling_kl": "convert.q8_check",
    "decode_codes": "nets.codec_decoder",
    "load_audio": "io.audio",
    "is_demo_bundle": "demo",
    "make_demo_bundle": "demo",
    "read_audio_file": "io.audio",
    "save_audio": "io.audio",
    "AudioFileWriter": "io.audio_writer",
    "measure_read_bandwidth": "runtime.bandwidth",
    "floor_and_share": "runtime.bandwidth",
    "Transcriber": "recognition.transcriber",
    "Transcript": "recognition.transcriber",
    "TranscriptTimings": "recognition.transcriber",
    "transcribe_file": "recognition.transcriber",
    "is_whisper_bundle": "recognition.transcriber",
    "is_whisper_checkpoint": "convert.whisper",
    "WHISPER_LANGUAGES": "recognition.languages",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "GENERATION_SETTINGS",
    "SAMPLING_SETTINGS",
    "SettingSpec",
    "official_defaults",
    "AUDIO_FORMATS",
    "AudioFormat",
    "SAVE_SUFFIXES",
    "SAVE_SUFFIX_WORDS",
    "DEFAULT_DEVICE",
    "DEFAULT_GPU_PRECISION",
    "GPU_PRECISIONS",
    "Device",
    "GpuDevice",
    "GpuError",
    "faster_gpu",
    "parse_device",
    "resolve_device",
    "scan_gpus",
    "physical_cores",
    "usable_cpus",
    "DEFAULT_BATCH_SIZE",
    "DECODER_PRECISIONS",
    "DEFAULT_DECODER_PRECISION",
    "DEFAULT_MAX_CHARS",
    "FRAME_RATE",
    "MAX_BATCH_SIZE",
    "check_batch_size",
    "OFFERED_PRECISIONS",
    "CheckRecordError",
    "Q8CheckRecord",
    "read_check_record",
    "check_q8_bundle",
    "sampling_kl",
    "SAMPLE_RATE",
    "SAMPLES_PER_FRAME",
    "AudioChunk",
    "CandidateFigure",
    "TuningRecord",
    "measure_read_bandwidth",
    "floor_and_share",
    "AudioError",
    "Bundle",
    "BundleError",
    "Cancelled",
    "ChunkAudio",
    "ChunkFrame",
    "ChunkProgress",
    "ChunkRetry",
    "ChunkSkipped",
    "ChunkStarted",
    "CodesError",
    "ConvertError",
    "EngineError",
    "FrameEvent",
    "GenerationSettings",
    "GuardSettings",
    "JoinSettings",
    "LongResult",
    "LongTextOptions",
    "RecordingLength",
    "designed_voice",
    "is_designed",
    "ModelKind",
    "VoiceNeed",
    "VoiceInput",
    "MissingVoiceInput",
    "voice_for",
    "Speaker",
    "speaker_name",
    "SynthesisEvent",
    "SynthesisResult",
    "Synthesizer",
    "SynthesizerContract",
    "VoiceChoice",
    "AudioSource",
    "TextChunk",
    "TextError",
    "NotUtf8Error",
    "Timings",
    "Voice",
    "VoiceError",
    "as_sentence",
    "VoiceSummary",
    "convert_checkpoint",
    "checkpoint_fingerprint",
    "decode_codes",
    "estimated_frames",
    "load_audio",
    "is_demo_bundle",
    "make_demo_bundle",
    "read_audio_file",
    "read_text_file",
    "decode_text",
    "MAX_TEXT_FILE_BYTES",
    "write_atomic",
    "create_new",
    "write_own_file",
    "read_own_file",
    "check_own_file",
    "cache_dir",
    "OwnFileError",
    "os_reason",
    "regular_file_problem",
    "npy_bytes_needed",
    "load_npy_bytes",
    "run_synthesis",
    "run_speech",
    "run_speeches",
    "SpeechListener",
    "speak_many",
    "Speeches",
    "RequestEvent",
    "ChunkJournal",
    "ChunkPlan",
    "JournalError",
    "JournalInUse",
    "same_voice",
    "recording_of_made",
    "save_audio",
    "split_text",
    "speak",
    "Speech",
    "SynthesisRequest",
    "ChunkStream",
    "busy_processes",
    "cpu_model",
    "load_average",
    "openmp_settings",
    "clean_text",
    "InstructIgnoredWarning",
    "VOICE_SUFFIX",
    "AudioFileWriter",
    "load_npy_file",
    "LanguageError",
    "Transcriber",
    "Transcript",
    "TranscriptTimings",
    "transcribe_file",
    "is_whisper_bundle",
    "is_whisper_checkpoint",
    "WHISPER_LANGUAGES",
]
__version__ = "0.1.0"
