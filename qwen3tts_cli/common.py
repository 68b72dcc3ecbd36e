"""What every command shares: the one-line usage error, the progress bar, checks that an output can be written
before any work starts, and saving that keeps the audio somewhere when the disk fails late."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from engine import GENERATION_SETTINGS, EngineError, os_reason

THREADS_HELP = ("CPU threads for every network (default: the counts measured for this computer, see `qwen3tts bench --tune`, else the physical core count)")


DECODER_PRECISION_HELP = ("speech decoder: fp32 (exact), bf16 (its big convolutions in bf16: faster on CPUs with "
                          "AVX512-BF16, SNR ~30 dB against fp32) or auto (bf16 where the CPU has "
                          "AVX512-BF16); default: %(default)s")


DEVICE_HELP = ("where the networks run: auto (a GPU only where measured faster than the CPU on this computer), cpu, "
               "gpu (ncnn's choice: a discrete GPU first) or gpu:N (see `qwen3tts bench`); default: %(default)s")
GPU_PRECISION_HELP = "on a GPU: fp32 (exact, default) or fp16 (faster on most GPUs, not exact)"


def add_generation_options(p: argparse.ArgumentParser) -> None:
    """--greedy, --seed, the sampling settings and --max-frames: each generation setting as its declaration
    (engine/setting_specs.py) says, with its help."""
    for spec in GENERATION_SETTINGS:
        if spec.switch:
            p.add_argument(spec.flag, action="store_true", help=spec.help)
        else:
            p.add_argument(spec.flag, type=int if spec.whole else float, help=spec.help)


def generation_values(args: argparse.Namespace) -> dict:
    """The generation settings the arguments give, by field name (None: the model's default)."""
    return {spec.name: getattr(args, spec.name) for spec in GENERATION_SETTINGS}


def add_device_options(p: argparse.ArgumentParser) -> None:
    """--device and --gpu-precision: every command that runs a network takes them."""
    from engine import DEFAULT_DEVICE, DEFAULT_GPU_PRECISION, GPU_PRECISIONS

    p.add_argument("--device", default=DEFAULT_DEVICE, help=DEVICE_HELP)
    p.add_argument("--gpu-precision", choices=GPU_PRECISIONS, default=DEFAULT_GPU_PRECISION, help=GPU_PRECISION_HELP)


def say_device(device) -> None:
    """Where the networks run, on stderr, when that is news: a GPU, or the CPU after a GPU could not be used."""
    if device.note and device.noteworthy:
        print(f"qwen3tts: {device.note}", file=sys.stderr)
    elif device.on_gpu:
        print(f"qwen3tts: running on {device.describe()}.", file=sys.stderr)


def tune_if_needed(synth, explicit_threads: int | None) -> None:
    """The first use of a model on this computer measures its fastest thread counts and decoding, once (stored in
    the cache folder; `qwen3tts bench --tune` measures again). Skipped when --threads chose the counts; Ctrl+C
    skips it for this run. Said on a terminal only, like the progress bar: stderr of a script stays one line
    per problem."""
    if synth.tuning_note:
        print(f"qwen3tts: {synth.tuning_note}", file=sys.stderr)
    if not synth.tuning_needed or explicit_threads:
        return
    said = _terminal()
    why = ("again: the last tuning was measured while the machine was busy" if synth.tuning is not None
           else "once per model")
    if said:
        print(f"qwen3tts: tuning for this computer, {why} (up to about 15 s; Ctrl+C skips it)...",
              file=sys.stderr, flush=True)
    try:
        record = synth.tune()
    except KeyboardInterrupt:
        print("qwen3tts: tuning skipped; default settings this time.", file=sys.stderr)
        return
    line = record.summary()
    if said:
        print(f"qwen3tts: {line[0].upper()}{line[1:]}.", file=sys.stderr)


def _terminal() -> bool:
    return hasattr(sys.stderr, "isatty") and sys.stderr.isatty()


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


OVERWRITE_HELP = "replace the output file where it exists (default: the command refuses and the file is kept)"


def add_overwrite_option(p: argparse.ArgumentParser) -> None:
    """--overwrite: every command that writes a file the user names takes it (batch too); the app asks instead."""
    p.add_argument("--overwrite", action="store_true", help=OVERWRITE_HELP)


def check_output(path: Path, suffixes: tuple[str, ...], what: str, inputs: tuple[Path | None, ...] = (),
                 overwrite: bool = False) -> None:
    """Fail before any work if an output could not be written (wrong suffix, missing or read-only folder), would
    overwrite one of the command's own inputs, or exists already and `overwrite` (--overwrite) was not given: one
    rule for synth, batch, decode and voice create (the app asks)."""
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
    if not overwrite and os.path.lexists(path):
        raise UsageError(f"{path} already exists; add --overwrite to replace it.")
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


def save_or_rescue(path: Path, save) -> Path:
    """save(path); if that fails late (disk filled up, folder made read-only), keep the audio in the temp
    folder or the home folder and name it in the error, so the work is not lost."""
    from engine import AudioError

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


def save_npy_atomic(path: Path, array, exclusive: bool = False) -> None:
    """An .npy file written atomically; exclusive: only if no file of that name exists (FileExistsError)."""
    import io

    import numpy as np

    from engine import create_new, write_atomic

    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=False)
    (create_new if exclusive else write_atomic)(path, buf.getbuffer())


def add_sample_format(p: argparse.ArgumentParser) -> None:
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--float", dest="float_samples", action="store_true",
                     help="write 32-bit float samples (WAV) instead of 16-bit PCM, the default (as in the app)")
    fmt.add_argument("--pcm16", action="store_true", help=argparse.SUPPRESS)  # the default now; kept for scripts


def sample_format(args: argparse.Namespace) -> str | None:
    """16-bit PCM (the app's default too; FLAC likewise) unless --float asks for float WAV; OGG is Vorbis."""
    if args.float_samples:
        if args.output.suffix.lower() != ".wav":
            raise UsageError(f"--float is for .wav files; {args.output.name} is not one.")
        return "FLOAT"
    return None


def text_of(args: argparse.Namespace) -> str:
    """The text of --text or --text-file (exactly one of them)."""
    from engine import read_text_file

    if (args.text is None) == (args.text_file is None):
        raise UsageError("Give the text with either --text or --text-file.")
    return args.text if args.text is not None else read_text_file(args.text_file)
