"""Hugging Face Qwen3-TTS checkpoint -> ncnn bundle, numpy only.

A Whisper checkpoint (speech recognition, config.json model_type "whisper") goes to whisper.py whole and makes a
bundle of its own kind. Each Qwen3-TTS network has its own converter module with `convert(ckpt, writer, options)`; PARTS lists them in order
(codec_decoder_layers holds the speech decoder's layer builders).
A part writes its graphs/tables through the BundleWriter and records its metadata with writer.set_part().
"""

from __future__ import annotations

import importlib
import shutil
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field, fields
from pathlib import Path

from ..errors import Cancelled, ConvertError
from ..io.fileio import os_reason
from ..runtime.bundle import PRECISIONS
from ..runtime.bundle_writer import BundleWriter, check_writable
from . import whisper
from .checkpoint import Checkpoint, checkpoint_fingerprint
from .q8_check import CheckOutcome, check_folder, check_q8, move_talker_part

# (module under engine.convert, human label). Order matters only for progress display.
PARTS: list[tuple[str, str]] = [
    ("text", "tokenizer and text tables"),
    ("talker", "talker and code predictor"),
    ("speaker", "speaker encoder"),
    ("codec_decoder", "speech decoder"),
    ("codec_encoder", "speech encoder"),
]

Progress = Callable[[float, str], None]
SPACE_MARGIN = 16 * 1024 * 1024  # manifest, tokenizer files, file-system slack


@dataclass
class ConvertOptions:
    precision: str = "fp32"
    progress: Progress | None = None
    cancel: Callable[[], bool] | None = None
    smooth: bool | None = None  # outlier smoothing (smooth.py); None: on for q8, off otherwise
    promote: frozenset[str] = field(default_factory=frozenset)  # q8 Linears kept float (q8_check.py)
    # q8 Linears -> input channels computed apart in fp32 (q8_split.py)
    split: Mapping[str, tuple[int, ...]] = field(default_factory=dict)

    @property
    def smoothing(self) -> bool:
        return self.precision == "q8" if self.smooth is None else self.smooth

    def report(self, fraction: float, message: str) -> None:
        if self.cancel is not None and self.cancel():
            raise Cancelled("conversion cancelled")
        if self.progress is not None:
            self.progress(fraction, message)


def convert_checkpoint(
    src: str | Path,
    dest: str | Path,
    precision: str = "fp32",
    progress: Progress | None = None,
    cancel: Callable[[], bool] | None = None,
    overwrite: bool = False,
    parts: Sequence[str] | None = None,
    smooth: bool | None = None,
    check: bool | None = None,
    promote: Iterable[str] = (),
    split: Mapping[str, Sequence[int]] | None = None,
) -> Path:
    """Convert a checkpoint folder into a bundle folder. Nothing is left at `dest` unless it completes.

    `parts` limits the conversion to those part modules (e.g. ["codec_decoder"]); None converts all. `smooth`:
    q8 outlier smoothing on or off (None: on for q8, ConvertOptions.smoothing). `check`: the 8-bit check
    (q8_check.py; None: on whenever a q8 talker is made): the bundle holds the measured talker part, with the
    Linears it promoted kept float, or is a float (fp32) bundle when 8-bit could not get within the bound; the
    manifest's "q8_check" records it. `promote`: Linears a q8 bundle keeps fp32 without a check (names of
    q8_layers.linear_name). `split`: q8 Linears whose input channels given are computed apart in fp32 without a
    check (q8_split.py)."""
    if precision not in PRECISIONS:
        raise ConvertError(f"unknown precision {precision!r}; choose one of {', '.join(PRECISIONS)}")
    options = ConvertOptions(precision, progress, cancel, smooth, frozenset(promote),
                             {name: tuple(sorted(int(c) for c in channels)) for name, channels in (split or {}).items()})
    asked = precision
    if parts is not None:
        known = [mod for mod, _ in PARTS]
        unknown = [p for p in parts if p not in known]
        if unknown:
            raise ConvertError(f"unknown part(s) {', '.join(unknown)}; known: {', '.join(known)}")
    if whisper.is_whisper_checkpoint(src):
        if parts is not None:
            raise ConvertError("a Whisper checkpoint converts whole; leave out the list of parts")
        return _convert_whisper(Path(src), Path(dest), options, overwrite)
    ckpt = Checkpoint.open(src)
    # every part's module is imported, never skipped: a build missing one must fail, not write half a bundle
    chosen = [(mod, label) for mod, label in PARTS if parts is None or mod in parts]
    checking = precision == "q8" and any(mod == "talker" for mod, _ in chosen) and check is not False
    try:
        with ExitStack() as stack:
            checked = None
            if checking:
                check_writable(Path(dest), overwrite, [Path(src)])  # before minutes of work, not after
                check_free_space(Path(dest), estimated_bundle_bytes(ckpt, "fp32") + estimated_bundle_bytes(ckpt, precision))
                checked = _run_check(Path(src), stack.enter_context(check_folder(Path(dest))), options,
                                     len(chosen))
                if checked.record.outcome == "float":
                    precision = "fp32"
                    options = ConvertOptions(precision, progress, cancel)
            return _write(ckpt, Path(src), dest, precision, options, chosen, overwrite, checked, asked)
    except OSError as e:
        raise ConvertError(f"cannot write the bundle {dest}: {os_reason(e)}; nothing was left behind") from None
    finally:
        ckpt.close()


def _run_check(src: Path, work: Path, options: ConvertOptions, parts: int) -> CheckOutcome:
    """The 8-bit check, reported as the first part of the conversion."""
    sub = _SubProgress(options, 0.0, 1 / (parts + 1), "8-bit check")

    def stop() -> None:
        if options.cancel is not None and options.cancel():
            raise Cancelled("conversion cancelled")

    return check_q8(src, work, sub.report, stop, options.smoothing)


def _write(ckpt: Checkpoint, src: Path, dest: str | Path, precision: str, options: ConvertOptions,
           chosen: list[tuple[str, str]], overwrite: bool, checked: CheckOutcome | None, asked: str) -> Path:
    """The bundle's parts written into place (the talker part moved from the check's folder when checked)."""
    start = 1 if checked is not None else 0
    total = len(chosen) + start
    check_free_space(Path(dest), estimated_bundle_bytes(ckpt, precision))
    fingerprint = checkpoint_fingerprint(src, lambda f: options.report(start / total, "checking the checkpoint"))
    with BundleWriter(dest, overwrite=overwrite, protect=[src]) as writer:
        writer.manifest["precision"] = precision
        # which checkpoint, asked at which precision (an 8-bit check may have made it fp32): an import of the same
        # again finds it installed (engine.store ModelStore.converted_from)
        writer.manifest["source_checkpoint"] = {"id": fingerprint, "precision": asked}
        writer.manifest["config"] = ckpt.config
        writer.manifest["generation_config"] = ckpt.generation_config
        writer.manifest["speech_config"] = ckpt.speech_config
        for i, (mod, label) in enumerate(chosen):
            options.report((start + i) / total, f"converting {label}")
            module = importlib.import_module(f"{__name__}.{mod}")
            if mod == "talker" and checked is not None:
                move_talker_part(checked.talker_bundle, writer)
                continue
            sub = _SubProgress(options, (start + i) / total, 1 / total, label)
            module.convert(ckpt, writer, sub)
        if checked is not None:
            writer.manifest["q8_check"] = checked.record.to_json()
        options.report(1.0, "writing manifest")
        return writer.finish()


def _convert_whisper(src: Path, dest: Path, options: ConvertOptions, overwrite: bool) -> Path:
    """A Whisper checkpoint (config.json model_type "whisper") -> a speech-recognition bundle (whisper.py)."""
    try:
        if (src / "model.safetensors").is_file():
            check_free_space(dest, (src / "model.safetensors").stat().st_size * 3 + SPACE_MARGIN)
        with BundleWriter(dest, overwrite=overwrite, protect=[src]) as writer:
            whisper.convert(src, writer, options)
            return writer.finish()
    except OSError as e:
        raise ConvertError(f"cannot write the bundle {dest}: {os_reason(e)}; nothing was left behind") from None


def estimated_bundle_bytes(ckpt: Checkpoint, precision: str) -> int:
    """An upper estimate of the bundle size: every checkpoint value stored as fp16 (fp16) or fp32 (others)."""
    per_value = 2 if precision == "fp16" else 4
    return (ckpt.main.element_count() + ckpt.speech.element_count()) * per_value + SPACE_MARGIN


def check_free_space(dest: Path, needed: int) -> None:
    """Refuse before any work when the disk holding `dest` cannot take the bundle (a full disk mid-way used to
    kill the process)."""
    folder = dest.parent if str(dest.parent) else Path(".")
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return  # cannot tell: the write itself will report a full disk
    if free < needed:
        raise ConvertError(f"not enough free space for the bundle in {folder}: it needs about "
                           f"{_gb(needed)}, {_gb(free)} are free")


def _gb(n: int) -> str:
    return f"{n / 1e9:.1f} GB" if n >= 1e8 else f"{n / 1e6:.1f} MB"


class _SubProgress(ConvertOptions):
    """Maps a part's own 0..1 progress into its slice of the whole."""

    def __init__(self, parent: ConvertOptions, start: float, span: float, label: str):
        super().__init__(**{f.name: getattr(parent, f.name) for f in fields(ConvertOptions)})  # every option
        self._start, self._span, self._label = start, span, label

    def report(self, fraction: float, message: str) -> None:
        super().report(self._start + self._span * min(max(fraction, 0.0), 1.0), f"{self._label}: {message}")
