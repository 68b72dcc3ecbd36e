"""Saving generated audio: default folder and name, overwrite confirmation, atomic write, clear errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PySide6.QtWidgets import QWidget

from .context import AppContext
from .data.paths import output_dir
from .diagnostics import user_message
from .engine_adapter import AUDIO_FORMATS, SAMPLE_RATE, SAVE_SUFFIXES, save_audio

FILTERS = ";;".join(f"{f.label} (*{f.suffix})" for f in AUDIO_FORMATS)
SUFFIXES = SAVE_SUFFIXES


def default_folder(ctx: AppContext) -> Path:
    folder = Path(ctx.settings.output_dir) if ctx.settings.output_dir else output_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        folder = Path.home()
    return folder


def ask_and_save(ctx: AppContext, parent: QWidget | None, audio: np.ndarray, stem: str) -> Path | None:
    """Ask where to save, confirm overwriting, write atomically. Returns the file written, or None."""
    chosen = ctx.dialogs.save_file(parent, "Save audio", str(default_folder(ctx) / f"{stem}.wav"), FILTERS)
    if not chosen:
        return None
    path = Path(chosen)
    if path.suffix.lower() not in SUFFIXES:
        path = path.with_name(path.name + ".wav")
    if path.exists() and not ctx.dialogs.question(
        parent, "Replace file?", f"“{path.name}” already exists in {path.parent}. Replace it?"
    ):
        return None
    try:
        # 16-bit PCM WAV by default, as the command line writes; 32-bit float when chosen in File > Folders
        float_wav = ctx.settings.wav_float and path.suffix.lower() == ".wav"
        save_audio(path, audio, SAMPLE_RATE, subtype="FLOAT" if float_wav else None)
    except Exception as e:
        ctx.dialogs.error(parent, "Could not save", user_message(e, f"saving {path.name}"))
        return None
    ctx.settings.output_dir = str(path.parent)
    return path
