"""The `qwen3tts` command (also `python -m engine`).

User errors print one line to stderr and exit 2; no traceback. Each subcommand lives in its own cmd_* function.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from .bundle import OFFERED_PRECISIONS
from .codec_decoder import DECODER_PRECISIONS, DEFAULT_DECODER_PRECISION
from .cpu import physical_cores, usable_cpus
from .errors import EngineError, as_sentence
from .fileio import os_reason
from .joining import JoinSettings
from .runaway import GuardSettings
from .splitter import DEFAULT_MAX_CHARS
from .store import DEFAULT_PRECISION
from .synthesizer import DEFAULT_BATCH_SIZE, MAX_BATCH_SIZE

EXIT_USAGE = 2
THREADS_HELP = "CPU threads for the networks (default: the physical core count)"
DECODER_PRECISION_HELP = ("speech decoder: fp32 (exact), bf16 (its big convolutions in bf16: faster on CPUs with "
                          "AVX512-BF16, SNR ~30 dB against fp32; README: Decoder) or auto (bf16 where the CPU has "
                          "AVX512-BF16); default: %(default)s")


class UsageError(EngineError):
    """A bad command line (conflicting or out-of-range options)."""


class ProgressBar:
    """A one-line progress bar on stderr (silent when stderr is not a terminal, except the final line)."""

    def __init__(self, label: str, stream=None):
        self.label = label
        self.stream = stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self._last = 0.0

    def update(self, fraction: float, message: str = "") -> None:
        now = time.monotonic()
        if not self.tty or (now - self._last < 0.1 and fraction < 1.0):
            return
        self._last = now
        width = 30
        filled = int(width * min(max(fraction, 0.0), 1.0))
        text = f"\r{self.label} [{'#' * filled}{'.' * (width - filled)}] {fraction * 100:5.1f}% {message}"
        self.stream.write(text[:160].ljust(100))
        self.stream.flush()

    def done(self, message: str = "") -> None:
        if self.tty:
            self.stream.write("\r" + " " * 110 + "\r")
        if message:
            self.stream.write(message + "\n")
        self.stream.flush()


def cmd_convert(args: argparse.Namespace) -> int:
    from .convert import convert_checkpoint

    bar = ProgressBar("convert")
    t0 = time.monotonic()
    out = convert_checkpoint(args.src, args.dest, precision=args.precision, progress=bar.update,
                             overwrite=args.force)
    bar.done(f"wrote {out} ({args.precision}) in {time.monotonic() - t0:.1f} s")
    return 0


def _check_output(path: Path, suffixes: tuple[str, ...], what: str, inputs: tuple[Path | None, ...] = ()) -> None:
    """Fail before any work if an output could not be written (wrong suffix, missing or read-only folder) or
    would overwrite one of the command's own inputs."""
    if path.suffix.lower() not in suffixes:
        raise UsageError(f"{what} {path.name} must end in {' or '.join(suffixes)}")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise UsageError(f"cannot write {path}: folder {parent} does not exist")
    if path.is_dir():
        raise UsageError(f"cannot write {path}: it is a folder")
    for source in inputs:
        if source is not None and _same_file(path, source):
            raise UsageError(f"The {what} {path} is also an input of this command; choose another file name.")
    _check_writable(parent, path)


def _same_file(a: Path, b: Path) -> bool:
    """One file under two names (the same path, a symlink or a hard link)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return Path(os.path.realpath(a)) == Path(os.path.realpath(b))


def _check_writable(folder: Path, path: Path) -> None:
    """Create and remove a file in `folder`: a read-only or full disk is found before minutes of work."""
    try:
        fd, probe = tempfile.mkstemp(prefix=".qwen3tts-probe-", dir=folder)
        try:
            os.write(fd, b"\0" * 4096)
        finally:
            os.close(fd)
            os.unlink(probe)
    except OSError as e:
        raise UsageError(f"cannot write {path}: {os_reason(e)}") from None


def _save_or_rescue(path: Path, save) -> Path:
    """save(path); if that fails late (disk filled up, folder made read-only), keep the audio in the temp
    folder or the home folder and name it in the error, so the work is not lost."""
    from .errors import AudioError

    try:
        return save(path)
    except AudioError as first:
        for folder in (Path(tempfile.gettempdir()), Path.home()):
            rescue = None
            try:
                fd, name = tempfile.mkstemp(prefix="qwen3tts-rescued-", suffix=path.suffix, dir=folder)
                os.close(fd)
                rescue = Path(name)
                save(rescue)
            except (OSError, AudioError):
                if rescue is not None:
                    rescue.unlink(missing_ok=True)
                continue
            raise AudioError(f"{str(first).rstrip('.')}. The audio was kept in {rescue}.") from None
        raise AudioError(f"{str(first).rstrip('.')}. The audio could not be kept anywhere else either.") from None


def _save_npy_atomic(path: Path, array) -> None:
    import io

    import numpy as np

    from .fileio import write_atomic

    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=False)
    write_atomic(path, buf.getbuffer())


def _voice_for(synth, args: argparse.Namespace):
    """The voice of a synth command: --voice FILE or --ref AUDIO [--ref-text TEXT] [--x-vector-only] (Base),
    --speaker NAME (CustomVoice), nothing but --instruct (VoiceDesign)."""
    from dataclasses import replace

    from .voice import Voice

    if args.voice is not None or args.ref is not None:
        synth.kind.refuse_clone()  # CustomVoice / VoiceDesign explain what they do instead
    if synth.model_kind != "custom_voice" and args.speaker is not None:
        synth.kind.speaker(args.speaker)  # Base / VoiceDesign explain they have no preset speakers
    if synth.model_kind == "voice_design":
        return None
    if synth.model_kind == "custom_voice":
        if args.speaker is None:
            raise UsageError(f"This CustomVoice model needs --speaker NAME; its speakers are: "
                             f"{', '.join(s.name for s in synth.speakers)}.")
        return synth.speaker(args.speaker)
    if args.voice is not None and args.ref is not None:
        raise UsageError("give either --voice or --ref, not both")
    if args.voice is not None:
        voice = Voice.load(args.voice, model_id=synth.model_id or None)
        if args.ref_text is not None:
            raise UsageError("--ref-text goes with --ref; a voice file already holds its transcript")
        if args.x_vector_only and voice.icl:
            voice = replace(voice, ref_codes=None, ref_text=None)
        return voice
    if args.ref is None:
        raise UsageError("give the voice to clone: --ref REFERENCE_AUDIO or --voice VOICE_FILE")
    if args.ref_text is None and not args.x_vector_only:
        raise UsageError("in-context cloning needs the reference transcript: add --ref-text TEXT, "
                         "or --x-vector-only to clone from the voice timbre alone")
    ref_text = None if args.x_vector_only else args.ref_text
    return synth.create_voice(str(args.ref), ref_text=ref_text)


def cmd_synth(args: argparse.Namespace) -> int:
    from .audio import save_audio
    from .synthesizer import Synthesizer, run_synthesis
    from .text import clean_text
    from .types import FRAME_RATE, GenerationSettings

    inputs = (args.ref, args.voice)
    _check_output(args.output, (".wav", ".flac", ".ogg"), "output", inputs)
    _sample_format(args)  # --float on a non-WAV name is refused before any work
    if args.codes_out is not None:
        _check_output(args.codes_out, (".npy",), "--codes-out", (*inputs, args.output))
    text = clean_text(_text_of(args))
    long_text = _long_text_options(args, text)  # None: one synthesis
    synth = Synthesizer(args.model, threads=args.threads, decoder_precision=args.decoder_precision)
    settings = GenerationSettings(
        greedy=args.greedy, seed=args.seed, temperature=args.temperature, top_k=args.top_k, top_p=args.top_p,
        repetition_penalty=args.repetition_penalty, max_frames=args.max_frames,
        non_streaming_text=args.non_streaming_text,
    )
    # cheap checks before the reference is processed
    synth.check_language(args.language)
    synth.check_settings(settings)
    note = synth.instruct_note(args.instruct)
    if note:
        import warnings

        from .model_kind import InstructIgnoredWarning

        print(f"qwen3tts: {note}", file=sys.stderr)
        warnings.simplefilter("ignore", InstructIgnoredWarning)  # said once, here
    synth.check_instruct(args.instruct)
    voice = _voice_for(synth, args)
    if long_text is not None:
        return _synth_long(args, synth, voice, settings, text, long_text)
    bar = ProgressBar("synth")
    result = run_synthesis(
        synth.synthesize(text, voice, language=args.language, settings=settings, instruct=args.instruct),
        on_frame=lambda ev: bar.update(
            min((ev.index + 1) / max(ev.estimated_frames, ev.index + 1), 0.99),
            f"frame {ev.index + 1} ({(ev.index + 1) / FRAME_RATE:.1f} s)"),
    )
    if result.codes.shape[0] == 0:
        bar.done()
        raise UsageError("the model produced no audio frames for this text; try again with another seed")
    # write the codes first: if the audio then fails, remove them again so nothing is left behind
    if args.codes_out is not None:
        _save_npy_atomic(args.codes_out, result.codes)
    subtype = _sample_format(args)
    try:
        _save_or_rescue(args.output, lambda p: save_audio(p, result.audio, subtype=subtype))
    except BaseException:
        if args.codes_out is not None:
            args.codes_out.unlink(missing_ok=True)
        raise
    t = result.timings
    bar.done(
        f"wrote {args.output} ({result.seconds:.2f} s, {result.codes.shape[0]} frames, ended by {result.ended_by}, "
        f"seed {result.seed}, {t.total:.1f} s, RTF {t.rtf:.2f})"
    )
    return 0


def cmd_batch(args: argparse.Namespace) -> int:
    """Many jobs from a JSONL file, several at a time through each model step; one status line per job."""
    from .audio import save_audio
    from .batch_jobs import read_jobs
    from .batching import MAX_BATCH_SIZE
    from .synthesizer import Synthesizer
    from .types import GenerationSettings, SynthesisJob, SynthesisResult

    if args.batch_size is not None and not 1 <= args.batch_size <= MAX_BATCH_SIZE:
        raise UsageError(f"--batch-size must be between 1 and {MAX_BATCH_SIZE}, not {args.batch_size}.")
    if not args.jobs.is_file():
        raise UsageError(f"The jobs file {args.jobs} does not exist.")
    out = args.out_dir
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out-dir {out} is a file, not a folder.")
    if not (out.parent if str(out.parent) else Path(".")).is_dir():
        raise UsageError(f"Cannot make --out-dir {out}: its parent folder does not exist.")
    lines = read_jobs(args.jobs)
    if not lines:
        raise UsageError(f"The jobs file {args.jobs} has no jobs.")
    synth = Synthesizer(args.model, threads=args.threads, decoder_precision=args.decoder_precision)
    settings = GenerationSettings(greedy=args.greedy, seed=args.seed)
    synth.check_settings(settings)
    out.mkdir(exist_ok=True)
    failed = 0

    def fail(line, message: str) -> None:
        nonlocal failed
        failed += 1
        print(f"failed  {line.name}: {message}", flush=True)

    voices: dict[tuple, object] = {}
    jobs, owners = [], []
    for line in lines:
        if line.error is not None:
            fail(line, line.error)
            continue
        try:
            targets = [out / f"{line.name}.wav"] + ([out / f"{line.name}.codes.npy"] if args.codes else [])
            taken = [t for t in targets if t.exists()]
            if taken:
                raise UsageError(f"{taken[0]} already exists; it is not overwritten.")
            key = (line.ref, line.ref_text, line.voice, line.x_vector_only, line.speaker)
            if key not in voices:
                voices[key] = _job_voice(synth, line)
            synth.check_instruct(line.instruct)
            jobs.append(SynthesisJob(line.text, voices[key], line.language, line.max_frames, line.seed,
                                     instruct=line.instruct))
            owners.append(line)
        except EngineError as e:
            fail(line, f"Line {line.line}: {as_sentence(str(e))}")
    # longest first: the whole file is done sooner (short jobs fill the slots at the end)
    for ev in synth.synthesize_many(jobs, settings, batch_size=args.batch_size, longest_first=True):
        line = owners[ev.job]
        if ev.error is not None:
            fail(line, f"Line {line.line}: {ev.error}")
        elif isinstance(ev.event, SynthesisResult):
            result = ev.event
            try:
                if result.codes.shape[0] == 0:
                    raise UsageError("the model produced no audio frames for this text; try another seed.")
                wav = out / f"{line.name}.wav"
                if args.codes:
                    _save_npy_atomic(out / f"{line.name}.codes.npy", result.codes)
                save_audio(wav, result.audio)  # 16-bit PCM, as `synth` and the app write
            except (EngineError, OSError) as e:
                fail(line, f"Line {line.line}: {as_sentence(str(e))}")
                continue
            print(f"ok      {line.name}: wrote {wav} ({result.seconds:.2f} s, {result.codes.shape[0]} frames, "
                  f"ended by {result.ended_by}, seed {result.seed})", flush=True)
    return 1 if failed else 0


def _job_voice(synth, line):
    """The voice of one jobs-file line (see engine/batch_jobs.py)."""
    from dataclasses import replace

    from .voice import Voice

    if line.speaker is not None:
        return synth.speaker(line.speaker)
    if line.ref is None and line.voice is None:
        return None  # VoiceDesign: the instruct describes the voice
    if line.voice is not None:
        voice = Voice.load(line.voice, model_id=synth.model_id or None)
        return replace(voice, ref_codes=None, ref_text=None) if line.x_vector_only and voice.icl else voice
    return synth.create_voice(str(line.ref), ref_text=line.ref_text)


def _long_text_options(args: argparse.Namespace, text: str):
    """Options for a text that needs several chunks (or --chunks-dir); None when one synthesis speaks it."""
    from .joining import JoinSettings
    from .longform import LongTextOptions, split_for_synthesis
    from .runaway import GuardSettings

    options = LongTextOptions(
        max_chars=args.max_chars,
        join=JoinSettings(sentence_pause=args.sentence_pause, paragraph_pause=args.paragraph_pause),
        guard=GuardSettings(retries=args.retries),
        batch_size=args.batch_size,
    )
    options.join.check()
    options.guard.check()
    if args.batch_size is not None and not 1 <= args.batch_size <= MAX_BATCH_SIZE:
        raise UsageError(f"--batch-size must be between 1 and {MAX_BATCH_SIZE}, not {args.batch_size}.")
    chunks = split_for_synthesis(text, args.language, args.max_chars)
    if len(chunks) <= 1 and args.chunks_dir is None:
        return None
    if args.codes_out is not None:
        raise UsageError(f"--codes-out keeps the codes of one synthesis; this text is {len(chunks)} chunks "
                         "(--chunks-dir keeps each chunk's audio).")
    if args.chunks_dir is not None:
        d = args.chunks_dir
        if d.exists() and (not d.is_dir() or any(d.iterdir())):
            raise UsageError(f"--chunks-dir {d} must be a new or empty folder; nothing in it is overwritten.")
        if not (d.parent if str(d.parent) else Path(".")).is_dir():
            raise UsageError(f"Cannot make --chunks-dir {d}: its parent folder does not exist.")
    return options


def _synth_long(args: argparse.Namespace, synth, voice, settings, text: str, options) -> int:
    """Chunk by chunk into one file (streamed: one chunk in memory at a time), with pauses and fades."""
    from .audio import save_audio
    from .audio_writer import AudioFileWriter
    from .fileio import write_atomic
    from .longform import (
        ChunkAudio,
        ChunkFrame,
        ChunkProgress,
        ChunkRetry,
        ChunkSkipped,
        LongResult,
        synthesize_long,
    )

    events = synthesize_long(synth, text, voice, language=args.language, settings=settings, options=options,
                             instruct=args.instruct)
    bar = ProgressBar("synth")
    subtype = _sample_format(args)
    result = None
    made = 0
    progress = ChunkProgress()  # chunks may run side by side: show the first one not yet written
    if args.chunks_dir is not None:
        args.chunks_dir.mkdir(exist_ok=True)
    with AudioFileWriter(args.output, subtype=subtype) as writer:
        try:
            for ev in events:
                shown = progress.see(ev)
                if isinstance(ev, ChunkFrame) and shown:
                    f = ev.frame
                    within = min((f.index + 1) / max(f.estimated_frames, f.index + 1), 0.99)
                    bar.update((progress.done + within) / ev.chunks,
                               f"chunk {ev.chunk + 1} of {ev.chunks}, frame {f.index + 1}")
                elif isinstance(ev, ChunkAudio):
                    writer.write(ev.samples)
                    made += 1
                    if args.chunks_dir is not None:
                        save_audio(args.chunks_dir / f"{ev.chunk + 1:04d}.wav", ev.result.audio,
                                   subtype=subtype)
                elif isinstance(ev, ChunkRetry):
                    bar.done(f"Chunk {ev.chunk + 1} of {ev.chunks}: {ev.reason}; trying again with seed {ev.seed}.")
                elif isinstance(ev, ChunkSkipped):
                    bar.done(ev.message)
                elif isinstance(ev, LongResult):
                    result = ev
        finally:
            events.close()
        if made == 0:
            raise UsageError("No chunk of the text could be generated; nothing was written.")
    assert result is not None
    if args.chunks_dir is not None:
        listing = "".join(f"{i + 1:04d}\t{c}\n" for i, c in enumerate(_chunk_texts(text, args.language, options)))
        write_atomic(args.chunks_dir / "chunks.tsv", listing.encode())
    t = result.timings
    bar.done(f"wrote {args.output} ({result.seconds:.2f} s, {made} of {result.chunks} chunks, seed {result.seed}, "
             f"{t.total:.1f} s, RTF {t.rtf:.2f})")
    return 1 if result.skipped else 0


def _chunk_texts(text: str, language: str, options) -> list[str]:
    from .longform import split_for_synthesis

    return [c.text for c in split_for_synthesis(text, language, options.max_chars)]


def _add_sample_format(p: argparse.ArgumentParser) -> None:
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--float", dest="float_samples", action="store_true",
                     help="write 32-bit float samples (WAV) instead of 16-bit PCM, the default (as in the app)")
    fmt.add_argument("--pcm16", action="store_true", help=argparse.SUPPRESS)  # the default now; kept for scripts


def _sample_format(args: argparse.Namespace) -> str | None:
    """16-bit PCM (the app's default too; FLAC likewise) unless --float asks for float WAV; OGG is Vorbis."""
    if args.float_samples:
        if args.output.suffix.lower() != ".wav":
            raise UsageError(f"--float is for .wav files; {args.output.name} is not one.")
        return "FLOAT"
    return None


def cmd_speakers(args: argparse.Namespace) -> int:
    """One line per speaker: name, dialect; then the languages. Reads the bundle's tables only."""
    from .model_kind import ModelKind

    kind = ModelKind.of_bundle(args.model)
    if kind.kind != "custom_voice":
        kind.speaker("")  # raises the kind's own explanation
    width = max(len(s.name) for s in kind.speakers) + 2
    for s in kind.speakers:
        print(f"{s.name:<{width}}{s.dialect_name} (for chinese and auto)" if s.dialect else s.name)
    instruct = "follows --instruct" if kind.honours_instruct else "ignores --instruct (0.6B)"
    print(f"CustomVoice model, {instruct}; languages: {', '.join(kind.languages)}", file=sys.stderr)
    return 0


def cmd_decode(args: argparse.Namespace) -> int:
    from . import SAMPLE_RATE, decode_codes
    from .audio import save_audio

    _check_output(args.output, (".wav", ".flac", ".ogg"), "output", (args.codes,))
    _sample_format(args)
    codes = _read_codes(args.codes)
    t0 = time.monotonic()
    wav = decode_codes(args.model, codes, threads=args.threads, precision=args.decoder_precision)
    elapsed = time.monotonic() - t0
    save_audio(args.output, wav, SAMPLE_RATE, subtype=_sample_format(args))
    seconds = len(wav) / SAMPLE_RATE
    print(f"wrote {args.output} ({len(codes)} frames, {seconds:.2f} s of audio) in {elapsed:.1f} s", file=sys.stderr)
    return 0


MAX_CODES_BYTES = 256 * 1024 * 1024  # hours of frames; a header claiming more is refused before allocating


def _read_codes(path: Path):
    """A (frames, 16) codes array from .npy, or from an .npz holding 'codes', sizes checked before loading."""
    import zipfile

    from .errors import CodesError
    from .safefile import load_npy_bytes, load_npy_file, regular_file_problem

    problem = regular_file_problem(path, "codes file")
    if problem:
        raise CodesError(problem)
    try:
        if not zipfile.is_zipfile(path):
            return load_npy_file(path, MAX_CODES_BYTES)
        with zipfile.ZipFile(path) as z:  # an .npz holding a 'codes' array is fine too
            names = [n[:-4] for n in z.namelist() if n.endswith(".npy")]
            if "codes" not in names:
                raise CodesError(f"{path} has no 'codes' array (it has: {', '.join(names)})")
            if z.getinfo("codes.npy").file_size > MAX_CODES_BYTES:
                raise ValueError(f"its codes unpack to more than the {MAX_CODES_BYTES} bytes this app reads")
            return load_npy_bytes(z.read("codes.npy"))
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        first = (str(e).splitlines() or [type(e).__name__])[0]
        raise CodesError(f"cannot read codes from {path}: {first}") from None


def cmd_demo_model(args: argparse.Namespace) -> int:
    from .demo import make_demo_bundle

    bar = ProgressBar("demo-model")
    t0 = time.monotonic()
    out = make_demo_bundle(args.dest, progress=bar.update, kind=args.kind)
    kind = "" if args.kind == "base" else f" {args.kind}"
    bar.done(f"wrote {out} in {time.monotonic() - t0:.1f} s: a tiny random-weight{kind} model (it speaks noise)")
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    """Speed of each stage on this machine. Figures only; nothing is asserted."""
    import resource

    import numpy as np

    from .cpu import busy_processes, cpu_model, load_average, openmp_settings, physical_cores, usable_cpus
    from .synthesizer import Synthesizer, run_synthesis
    from .types import FRAME_RATE, SAMPLE_RATE, GenerationSettings
    from .voice import Voice

    if args.frames < 2:
        raise UsageError("--frames must be at least 2")
    if args.under_load and getattr(sys, "frozen", False):
        raise UsageError("--under-load starts Python helper processes; run it from a source checkout.")
    def out(line: str) -> None:
        print(line, flush=True)  # each line as it happens, also through a pipe: the warm-up alone can take minutes

    out(f"cpu           {cpu_model()}, {physical_cores()} cores ({usable_cpus()} logical); {openmp_settings()}")
    out(f"load average  {load_average()} (before)")
    out(f"load          loading {args.model}...")
    t0 = time.perf_counter()
    synth = Synthesizer(args.model, threads=args.threads, decoder_precision=args.decoder_precision)
    talker_threads, cp_threads = synth.thread_counts
    out(f"bundle        {args.model} ({synth.precision}, {args.threads} threads; weight layers on {talker_threads} "
        f"(talker) and {cp_threads} (code predictor); speech decoder {synth.decoder_precision})")
    out(f"load          {time.perf_counter() - t0:.2f} s (talker, code predictor and decoder)")
    # a fixed pseudo-random x-vector: the voice front end is timed on its own below
    rng = np.random.default_rng(0)
    voice = Voice(xvector=rng.standard_normal(synth.hidden_size).astype(np.float32), model_id=synth.model_id)

    def run(frames: int, **options):
        # EOS ignored so the frame count is exact
        settings = GenerationSettings(seed=0, max_frames=frames, ignore_eos=True, **options)
        return run_synthesis(synth.synthesize(args.text, voice, args.language, settings), on_frame=on_frame)

    # warm-up: the first calls page the weights in and let ncnn pick its kernels
    frame_times: list[float] = []
    t = time.perf_counter()
    out("warm-up       3 frames first (the first calls load the weights into memory and let ncnn pick its "
        "kernels)...")

    def on_frame(ev) -> None:
        frame_times.append(ev.frame_seconds)
        if warming_up:
            out(f"warm-up       frame {ev.index + 1} of 3 done after {time.perf_counter() - t:.1f} s")

    warming_up = True
    run(3, codes_only=True)
    warming_up = False
    out(f"warm-up       {time.perf_counter() - t:.2f} s (3 frames)")

    # 1. generation only
    frame_times.clear()
    result = run(args.frames, codes_only=True)
    codes, tm = result.codes, result.timings
    n = codes.shape[0]
    steady = frame_times[2:] or frame_times
    out(f"frames        {n} ({n / FRAME_RATE:.2f} s of audio)")
    out(f"prefill       {tm.prefill * 1000:.1f} ms")
    out(f"talker step   {tm.talker / n * 1000:.1f} ms/frame")
    out(f"code pred.    {tm.code_predictor / n * 1000:.1f} ms/frame (15 steps)")
    quiet = float(np.median(steady))
    out(f"generation    {quiet * 1000:.1f} ms/frame median, {tm.total / n * 1000:.1f} ms/frame mean "
        f"(RTF {tm.total / (n / FRAME_RATE):.3f} without audio)")
    if args.under_load:  # the same run with one busy process per logical CPU competing for the cores
        busy = usable_cpus()
        with busy_processes(busy):
            frame_times.clear()
            run(args.frames, codes_only=True)
        loaded = float(np.median(frame_times[2:] or frame_times))
        out(f"under load    {loaded * 1000:.1f} ms/frame median with {busy} busy processes, {loaded / quiet:.2f}x the "
            f"figure above; threads now talker {synth.thread_counts[0]}, "
            f"code predictor {synth.thread_counts[1]}")

    # 2. decoder alone (whole utterance)
    try:
        t = time.perf_counter()
        synth.decode(codes)
        full = time.perf_counter() - t
        out(f"decoder       {full / n * 1000:.1f} ms/frame whole")
    except EngineError as e:
        out(f"decoder       failed: {e}")
        full = None

    # 3. end to end with streaming audio: real-time factor, time to first audio, streaming decode per frame
    if full is not None:
        result = run(args.frames, stream_audio=True)
        tm = result.timings
        out(f"streaming     {tm.decode / n * 1000:.1f} ms/frame decode (frame by frame)")
        out(f"end to end    RTF {tm.rtf:.3f} ({tm.total:.2f} s for {tm.audio_seconds:.2f} s of audio, "
            "streaming decode)")
        out(f"first audio   {tm.first_audio:.3f} s after the call")

    # 4. voice front end on a 3 s synthetic reference: x-vector alone, then with the reference codes as well
    ref = (np.sin(np.arange(3 * SAMPLE_RATE) * 0.05) * 0.3).astype(np.float32)
    ref += (rng.standard_normal(ref.shape) * 0.05).astype(np.float32)
    for label, ref_text in (("x-vector", None), ("+ ref codes", "A short reference transcript.")):
        try:
            t = time.perf_counter()
            synth.create_voice((ref, SAMPLE_RATE), ref_text=ref_text)
            out(f"{label:13s} {(time.perf_counter() - t) * 1000:.1f} ms (3 s reference)")
        except EngineError as e:
            out(f"{label:13s} not timed: {e}")
    out(f"peak RSS      {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
    out(f"load average  {load_average()} (after)")
    return 0


def _text_of(args: argparse.Namespace) -> str:
    """The text of --text or --text-file (exactly one of them)."""
    from .fileio import read_text_file

    if (args.text is None) == (args.text_file is None):
        raise UsageError("Give the text with either --text or --text-file.")
    return args.text if args.text is not None else read_text_file(args.text_file)


def cmd_split(args: argparse.Namespace) -> int:
    """The chunks a long synthesis would speak, one per line on stdout (nothing else there)."""
    from .splitter import split_text
    from .text import clean_text

    text = clean_text(_text_of(args))
    chunks = split_text(text, max_chars=args.max_chars, language=args.language)
    try:  # UTF-8 whatever the console or pipe would pick (an ASCII or cp1252 stdout cannot hold most scripts)
        sys.stdout.reconfigure(encoding="utf-8")
    except (AttributeError, ValueError, OSError):
        pass
    for chunk in chunks:
        sys.stdout.write(chunk.text + "\n")
    sys.stdout.flush()
    return 0


def cmd_voice_create(args: argparse.Namespace) -> int:
    from .synthesizer import Synthesizer
    from .voice import VOICE_SUFFIX

    out = args.output
    _check_output(out, (VOICE_SUFFIX,), "output", (args.ref,))
    synth = Synthesizer(args.model, threads=args.threads)
    voice = synth.create_voice(str(args.ref), ref_text=args.ref_text, name=args.name, language=args.language)
    voice.save(out)
    mode = f"in-context, {voice.ref_codes.shape[0]} reference frames" if voice.icl else "x-vector only"
    print(f"wrote {out} ({mode})", file=sys.stderr)
    return 0


def cmd_models_list(args: argparse.Namespace) -> int:
    """Installed models, one line each starting with the name; then unfinished downloads and the catalogue."""
    from .store import CATALOGUE, ModelStore, format_bytes, pending_downloads

    store = ModelStore()
    installed = store.installed()
    for m in installed:
        source = m.repo_id or "imported"
        print(f"{m.name}  {m.precision}  {format_bytes(m.disk_bytes)}  {source}")
        if m.note:
            print(f"  ({m.note})", file=sys.stderr)
    info = sys.stderr
    if not installed:
        print(f"No models installed in {store.root} yet.", file=info)
    for p in pending_downloads(store):
        print(f"(unfinished download: {p.name}, {format_bytes(p.done_bytes)} of {format_bytes(p.total_bytes)}; "
              f"run 'qwen3tts models download {p.repo_id} --name {p.name}' to resume)", file=info)
    if args.available:
        have = {m.repo_id for m in installed}
        for e in CATALOGUE:
            mark = "installed" if e.repo_id in have else "available"
            sizes = ", ".join(f"{p} {format_bytes(b)}" for p, b in e.bundle_bytes.items())
            print(f"{e.name}  {mark}  download {format_bytes(e.download_bytes)}  on disk {sizes}  "
                  f"({e.abilities})", file=info)
    return 0


def cmd_models_download(args: argparse.Namespace) -> int:
    from .store import ModelStore, format_bytes, install

    bar = ProgressBar("download")
    t0 = time.monotonic()
    model = install(args.source, name=args.name, precision=args.precision, store=ModelStore(),
                    endpoint=args.endpoint, token=args.token, keep_checkpoint=args.keep_checkpoint,
                    progress=bar.update)
    bar.done(f"installed {model.name} ({model.precision}, {format_bytes(model.disk_bytes)}) in {model.path} "
             f"in {time.monotonic() - t0:.1f} s")
    return 0


def cmd_models_remove(args: argparse.Namespace) -> int:
    from .store import ModelStore, StoreError, discard_download

    store = ModelStore()
    if store.get(args.name) is None:
        if discard_download(store, args.name):
            print(f"removed the unfinished download {args.name}", file=sys.stderr)
            return 0
        raise StoreError(f"No installed model is called {args.name!r} (see 'qwen3tts models list').")
    path = store.remove(args.name)
    print(f"removed {args.name} ({path})", file=sys.stderr)
    return 0


def resolve_model_option(args: argparse.Namespace) -> None:
    """--model on every command: a bundle folder, or the name of an installed model."""
    value = getattr(args, "model", None)
    if value is None:
        return
    from .store import ModelStore

    args.model = ModelStore().resolve(value)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="qwen3tts", description="Qwen3-TTS voice cloning on the CPU (ncnn + numpy).")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    c = sub.add_parser("convert", help="convert a Hugging Face checkpoint folder into a model bundle")
    c.add_argument("src", type=Path, help="checkpoint folder (config.json, model.safetensors, speech_tokenizer/)")
    c.add_argument("dest", type=Path, help="bundle folder to create")
    c.add_argument("--precision", choices=OFFERED_PRECISIONS, default=DEFAULT_PRECISION,
                   help="q8 (default): 8-bit talker weights with outlier smoothing, smallest and fastest, output "
                        "very close to the exact one; fp16: the exact output from bf16 checkpoints in less disk; "
                        "fp32: exact (docs/performance.md: 8-bit accuracy)")
    c.add_argument("--force", action="store_true", help="replace an existing bundle at DEST")
    c.set_defaults(func=cmd_convert)

    s = sub.add_parser("synth", help="speak text in a cloned voice")
    s.add_argument("--model", type=Path, required=True, help="bundle folder")
    s.add_argument("--text")
    s.add_argument("--text-file", type=Path, help="a UTF-8 text file (any length) instead of --text")
    s.add_argument("-o", "--output", type=Path, required=True, help="output audio file (.wav, .flac, .ogg)")
    s.add_argument("--ref", type=Path, help="reference audio of the voice to clone")
    s.add_argument("--ref-text", help="transcript of the reference (enables in-context cloning)")
    s.add_argument("--x-vector-only", action="store_true", help="ignore --ref-text; clone from the x-vector only")
    s.add_argument("--voice", type=Path, help="a saved voice file instead of --ref")
    s.add_argument("--language", default="auto")
    s.add_argument("--greedy", action="store_true", help="argmax decoding (reproducible, parity mode)")
    s.add_argument("--seed", type=int)
    s.add_argument("--temperature", type=float)
    s.add_argument("--top-k", type=int)
    s.add_argument("--top-p", type=float)
    s.add_argument("--repetition-penalty", type=float)
    s.add_argument("--max-frames", type=int, help="at most this many 80 ms frames (for a long text: per chunk)")
    mode = s.add_mutually_exclusive_group()
    mode.add_argument("--non-streaming-text", dest="non_streaming_text", action="store_true", default=None,
                      help="put the whole text in the prompt (default for CustomVoice and VoiceDesign models)")
    mode.add_argument("--streaming-text", dest="non_streaming_text", action="store_false",
                      help="feed the text one token per frame (default for Base models)")
    s.add_argument("--speaker", help="a preset speaker of a CustomVoice model (see 'qwen3tts speakers')")
    s.add_argument("--instruct", help="a style instruction (CustomVoice 1.7B) or the voice description "
                                      "(VoiceDesign)")
    s.add_argument("--codes-out", type=Path, help="also write the generated codes (frames x 16) as .npy")
    _add_sample_format(s)
    s.add_argument("--threads", type=int, default=physical_cores(), help=THREADS_HELP)
    s.add_argument("--decoder-precision", choices=DECODER_PRECISIONS, default=DEFAULT_DECODER_PRECISION,
                   help=DECODER_PRECISION_HELP)
    lt = s.add_argument_group("long text (split into chunks of whole sentences, joined into one file)")
    lt.add_argument("--max-chars", type=int, default=DEFAULT_MAX_CHARS,
                    help=f"longest chunk in characters (default {DEFAULT_MAX_CHARS})")
    lt.add_argument("--sentence-pause", type=float, default=JoinSettings.sentence_pause,
                    help=f"seconds between chunks of a paragraph (default {JoinSettings.sentence_pause})")
    lt.add_argument("--paragraph-pause", type=float, default=JoinSettings.paragraph_pause,
                    help=f"seconds after a paragraph (default {JoinSettings.paragraph_pause})")
    lt.add_argument("--retries", type=int, default=GuardSettings.retries,
                    help="new seeds for a chunk that runs away, loops or goes silent "
                         f"(default {GuardSettings.retries})")
    lt.add_argument("--chunks-dir", type=Path, help="also keep each chunk's audio here (a new or empty folder)")
    lt.add_argument("--batch-size", type=int, default=None,
                    help=f"chunks generated side by side, each exactly as alone (1 to {MAX_BATCH_SIZE}; default: "
                         f"{DEFAULT_BATCH_SIZE} on q8 models, whose steps serve several chunks at once, 1 on fp32/fp16 "
                         "models, where chunks take turns; 1 gives the first chunk soonest)")
    s.set_defaults(func=cmd_synth)

    bt = sub.add_parser("batch", help="speak many lines from a JSONL jobs file, several at a time")
    bt.add_argument("--model", type=Path, required=True, help="bundle folder")
    bt.add_argument("--jobs", type=Path, required=True,
                    help='one JSON object per line: {"name", "text", "language", "ref", "ref_text"} '
                         '("x_vector_only": true instead of ref_text, "voice" instead of ref; optional '
                         '"max_frames", "seed"); relative paths are relative to the jobs file')
    bt.add_argument("--out-dir", type=Path, required=True, help="folder for NAME.wav (made if missing)")
    bt.add_argument("--batch-size", type=int, default=None,
                    help=f"sequences sharing each model step (1-{MAX_BATCH_SIZE}; default {DEFAULT_BATCH_SIZE} on q8 "
                         "models, 1 on fp32/fp16 models, where sequences take turns); results do not depend on it")
    bt.add_argument("--greedy", action="store_true", help="argmax decoding (reproducible, parity mode)")
    bt.add_argument("--seed", type=int, help="seed of every job without its own")
    bt.add_argument("--codes", action="store_true", help="also write NAME.codes.npy (frames x 16 int64)")
    bt.add_argument("--threads", type=int, default=physical_cores(), help=THREADS_HELP)
    bt.add_argument("--decoder-precision", choices=DECODER_PRECISIONS, default=DEFAULT_DECODER_PRECISION,
                    help=DECODER_PRECISION_HELP)
    bt.set_defaults(func=cmd_batch)

    d = sub.add_parser("decode", help="decode codec ids (frames x 16 .npy) to 24 kHz audio")
    d.add_argument("--model", type=Path, required=True)
    d.add_argument("--codes", type=Path, required=True)
    d.add_argument("-o", "--output", type=Path, required=True)
    _add_sample_format(d)
    d.add_argument("--threads", type=int, default=physical_cores(), help=THREADS_HELP)
    d.add_argument("--decoder-precision", choices=DECODER_PRECISIONS, default=DEFAULT_DECODER_PRECISION,
                   help=DECODER_PRECISION_HELP)
    d.set_defaults(func=cmd_decode)

    sp = sub.add_parser("speakers", help="list the preset speakers of a CustomVoice model")
    sp.add_argument("--model", type=Path, required=True, help="bundle folder")
    sp.set_defaults(func=cmd_speakers)

    m = sub.add_parser("demo-model", help="write a tiny random-weight bundle (speaks noise; for trying the app)")
    m.add_argument("dest", type=Path)
    m.add_argument("--kind", choices=["base", "custom_voice", "voice_design"], default="base",
                   help="the model kind to imitate (preset speakers, or a voice designed from a description)")
    m.set_defaults(func=cmd_demo_model)

    b = sub.add_parser("bench", help="measure speed: ms per frame, real-time factor, time to first audio")
    b.add_argument("--model", type=Path, required=True)
    b.add_argument("--frames", type=int, default=50)
    b.add_argument("--threads", type=int, default=physical_cores(), help=THREADS_HELP)
    b.add_argument("--decoder-precision", choices=DECODER_PRECISIONS, default=DEFAULT_DECODER_PRECISION,
                   help=DECODER_PRECISION_HELP)
    b.add_argument("--under-load", action="store_true",
                   help="also time generation with one busy process per CPU competing (started and stopped here)")
    b.add_argument("--text", default="The quick brown fox jumps over the lazy dog, and then it runs far away.")
    b.add_argument("--language", default="english")
    b.set_defaults(func=cmd_bench)

    sp = sub.add_parser("split", help="show how a long text is cut into chunks (one per line)")
    sp.add_argument("--text")
    sp.add_argument("--text-file", type=Path, help="a UTF-8 text file instead of --text")
    sp.add_argument("--max-chars", type=int, default=DEFAULT_MAX_CHARS,
                    help=f"longest chunk in characters (default {DEFAULT_MAX_CHARS})")
    sp.add_argument("--language", default="auto", help="auto or a language the model speaks (sentence rules)")
    sp.set_defaults(func=cmd_split)

    v = sub.add_parser("voice", help="manage voice files")
    vsub = v.add_subparsers(dest="voice_command", required=True, metavar="ACTION")
    vc = vsub.add_parser("create", help="make a reusable voice file from reference audio")
    vc.add_argument("ref", type=Path)
    vc.add_argument("--model", type=Path, required=True)
    vc.add_argument("--ref-text")
    vc.add_argument("--name", default="")
    vc.add_argument("--language", default="auto")
    vc.add_argument("-o", "--output", type=Path, required=True)
    vc.add_argument("--threads", type=int, default=physical_cores(), help=THREADS_HELP)
    vc.set_defaults(func=cmd_voice_create)

    ms = sub.add_parser("models", help="installed models: list, download (from the hub or a mirror), remove")
    msub = ms.add_subparsers(dest="models_command", required=True, metavar="ACTION")
    ml = msub.add_parser("list", help="installed models, one per line (name first)")
    ml.add_argument("--available", action="store_true", help="also show the catalogue with sizes (on stderr)")
    ml.set_defaults(func=cmd_models_list)
    md = msub.add_parser("download", help="download a checkpoint and install it as a model")
    md.add_argument("source", metavar="REPO_ID_OR_CATALOGUE_NAME",
                    help="e.g. Qwen/Qwen3-TTS-12Hz-0.6B-Base, or 0.6B-Base")
    md.add_argument("--name", help="installed name (default: the last part of the repository id)")
    md.add_argument("--precision", default=DEFAULT_PRECISION, help="bundle precision (default: %(default)s)")
    md.add_argument("--endpoint", help="hub or mirror address (default: HF_ENDPOINT, else huggingface.co)")
    md.add_argument("--token", help="token for gated or private repositories (default: HF_TOKEN / stored login)")
    md.add_argument("--keep-checkpoint", action="store_true",
                    help="keep the downloaded checkpoint in MODELS_DIR/checkpoints/ after converting")
    md.set_defaults(func=cmd_models_download)
    mr = msub.add_parser("remove", help="delete an installed model (or an unfinished download)")
    mr.add_argument("name")
    mr.set_defaults(func=cmd_models_remove)
    return p


def usable_threads(requested: int) -> tuple[int, str | None]:
    """The thread count to use and a note when the request was clamped (more threads than cores only
    oversubscribes the machine: --threads 1000 drove the load to 255)."""
    cores = usable_cpus()
    if requested > cores:
        return cores, f"--threads {requested} is more than the {cores} cores available; using {cores}."
    return requested, None


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if isinstance(getattr(args, "threads", None), int):
        if args.threads < 1:
            print("qwen3tts: --threads must be at least 1.", file=sys.stderr)
            return EXIT_USAGE
        args.threads, note = usable_threads(args.threads)
        if note:
            print(f"qwen3tts: {note}", file=sys.stderr)
    try:
        resolve_model_option(args)
        return int(args.func(args) or 0)
    except EngineError as e:
        print(f"qwen3tts: {as_sentence(str(e))}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("qwen3tts: Interrupted.", file=sys.stderr)
        return 130
