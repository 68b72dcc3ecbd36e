"""Hugging Face Qwen3-TTS checkpoint -> ncnn bundle, numpy only.

Each network has its own converter module with `convert(ckpt, writer, options)`; PARTS lists them in order
(codec_decoder_layers holds the speech decoder's layer builders).
A part writes its graphs/tables through the BundleWriter and records its metadata with writer.set_part().
"""

from __future__ import annotations

import importlib
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import Cancelled, ConvertError
from ..io.fileio import os_reason
from ..runtime.bundle import PRECISIONS
from ..runtime.bundle_writer import BundleWriter
from .checkpoint import Checkpoint

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
) -> Path:
    """Convert a checkpoint folder into a bundle folder. Nothing is left at `dest` unless it completes.

    `parts` limits the conversion to those part modules (e.g. ["codec_decoder"]); None converts all. `smooth`:
    q8 outlier smoothing on or off (None: on for q8, ConvertOptions.smoothing)."""
    if precision not in PRECISIONS:
        raise ConvertError(f"unknown precision {precision!r}; choose one of {', '.join(PRECISIONS)}")
    options = ConvertOptions(precision, progress, cancel, smooth)
    if parts is not None:
        known = [mod for mod, _ in PARTS]
        unknown = [p for p in parts if p not in known]
        if unknown:
            raise ConvertError(f"unknown part(s) {', '.join(unknown)}; known: {', '.join(known)}")
    ckpt = Checkpoint.open(src)
    # every part's module is imported, never skipped: a build missing one must fail, not write half a bundle
    chosen = [(mod, label) for mod, label in PARTS if parts is None or mod in parts]
    try:
        check_free_space(Path(dest), estimated_bundle_bytes(ckpt, precision))
        with BundleWriter(dest, overwrite=overwrite, protect=[Path(src)]) as writer:
            writer.manifest["precision"] = precision
            writer.manifest["config"] = ckpt.config
            writer.manifest["generation_config"] = ckpt.generation_config
            writer.manifest["speech_config"] = ckpt.speech_config
            for i, (mod, label) in enumerate(chosen):
                options.report(i / len(chosen), f"converting {label}")
                module = importlib.import_module(f"{__name__}.{mod}")
                sub = _SubProgress(options, i / len(chosen), 1 / len(chosen), label)
                module.convert(ckpt, writer, sub)
            options.report(1.0, "writing manifest")
            return writer.finish()
    except OSError as e:
        raise ConvertError(f"cannot write the bundle {dest}: {os_reason(e)}; nothing was left behind") from None
    finally:
        ckpt.close()


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
        super().__init__(parent.precision, parent.progress, parent.cancel, parent.smooth)
        self._start, self._span, self._label = start, span, label

    def report(self, fraction: float, message: str) -> None:
        super().report(self._start + self._span * min(max(fraction, 0.0), 1.0), f"{self._label}: {message}")
