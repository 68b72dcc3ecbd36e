"""Default folders (platformdirs) and file names the app creates."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import platformdirs

from .. import APP_NAME

_DIRS = platformdirs.PlatformDirs(APP_NAME, appauthor=False)


def data_dir() -> Path:
    return Path(_DIRS.user_data_dir)


def models_dir(chosen: str = "") -> Path:
    """The model store's folder: QWEN3TTS_MODELS_DIR, the folder chosen in the app, where it was moved to,
    else <data>/models."""
    from ..engine_adapter import default_models_dir

    return default_models_dir(chosen)


def voices_dir() -> Path:
    """The voice library's default folder (the engine's, which the speech server shares)."""
    from ..engine_adapter import default_voices_dir

    return default_voices_dir()


def takes_dir() -> Path:
    """The take history (audio, text, voice and settings of every take), kept across restarts."""
    return data_dir() / "takes"


def log_dir() -> Path:
    return Path(_DIRS.user_log_dir)


def log_file() -> Path:
    return log_dir() / "qwen3tts-gui.log"


def output_dir() -> Path:
    """Where takes are saved unless the user picked another folder."""
    return Path(platformdirs.user_music_dir()) / APP_NAME


def resources_dir() -> Path:
    """The app's style sheet and images: qwen3tts_gui/resources, in a checkout, an installed wheel (package data)
    and the PyInstaller bundle (its spec collects the folder to the same place beside the frozen package)."""
    return Path(__file__).resolve().parent.parent / "resources"


def resource(name: str) -> Path | None:
    """A file from resources_dir(), or None when it is missing."""
    path = resources_dir() / name
    return path if path.is_file() else None


def readable_name(text: str, limit: int = 40, fallback: str = "speech") -> str:
    """A file-name-safe, still readable stem made from the start of a text."""
    words = re.sub(r"[^\w\s-]+", " ", text, flags=re.UNICODE).split()
    stem = ""
    for w in words:
        if len(stem) + len(w) + 1 > limit:
            break
        stem = f"{stem} {w}" if stem else w
    if not stem and words:
        stem = words[0][:limit]
    return stem or fallback


def candidate_paths(path: Path) -> Iterator[Path]:
    """path, 'stem (2).ext', 'stem (3).ext'... without end (for exclusive creation: try each until one is won)."""
    yield path
    n = 2
    while True:
        yield path.with_name(f"{path.stem} ({n}){path.suffix}")
        n += 1


def unique_path(path: Path) -> Path:
    """The first of candidate_paths that does not exist yet (a suggestion only: create it exclusively)."""
    return next(c for c in candidate_paths(path) if not (c.exists() or c.is_symlink()))
