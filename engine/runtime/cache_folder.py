"""The app's one cache folder: QWEN3TTS_CACHE_DIR if set, else the platform's user cache folder for the app
(platformdirs). It holds the record of verified bundle files, the tuning records and the chunks of long `qwen3tts
synth` runs not finished yet; losing it costs a checksum pass, a tuning or making those chunks again, nothing else.

Older versions kept the verified-files record in a second folder, $XDG_CACHE_HOME/qwen3tts-studio (else
~/.cache/qwen3tts-studio). Its content is moved over once, file by file, never following a link: a link there (or
the old folder itself being a link) is left as it is, and a file the new folder has already is kept there.
"""

from __future__ import annotations

import errno
import os
import stat
import threading
from pathlib import Path

from ..io.fileio import read_own_file, write_own_file

APP_NAME = "Qwen3-TTS Studio"  # the platformdirs name of the app's folders (engine/store/store.py)
OLD_FOLDER = "qwen3tts-studio"
MAX_MOVED_BYTES = 64 * 2**20  # a cache file larger than this was never the app's: left where it is
_merged: set[str] = set()
_merge_lock = threading.Lock()


def cache_dir() -> Path:
    """The cache folder (see the module docstring), the old one's content moved in on first use."""
    if os.environ.get("QWEN3TTS_CACHE_DIR"):
        return Path(os.environ["QWEN3TTS_CACHE_DIR"])
    import platformdirs

    folder = Path(platformdirs.user_cache_dir(APP_NAME, appauthor=False))
    with _merge_lock:
        if str(folder) not in _merged:
            _merged.add(str(folder))
            merge_old_folder(old_cache_dir(), folder)
    return folder


def old_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / OLD_FOLDER


def merge_old_folder(old: Path, new: Path) -> list[Path]:
    """Move the regular files under `old` to the same places under `new` (where `new` has none yet) and remove
    the folders left empty; links, pipes and anything unreadable stay. Never raises; returns what was moved."""
    moved: list[Path] = []
    if old == new or not _real_folder(old):
        return moved
    _merge(old, new, moved)
    return moved


def _real_folder(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _merge(old: Path, new: Path, moved: list[Path]) -> None:
    try:
        entries = list(os.scandir(old))
    except OSError:
        return
    for entry in entries:
        source, dest = Path(entry.path), new / entry.name
        try:
            if entry.is_dir(follow_symlinks=False):
                _merge(source, dest, moved)
            elif entry.is_file(follow_symlinks=False) and not os.path.lexists(dest):
                _move_file(source, dest)
                moved.append(dest)
        except (OSError, ValueError):
            continue  # left where it is: a cache is rebuilt anyway
    try:
        os.rmdir(old)  # only when empty
    except OSError:
        pass


def _move_file(source: Path, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    if _real_folder(dest.parent):
        try:
            os.link(source, dest)  # the same disk: exclusive (never replaces anything), then the old name goes
            os.unlink(source)
            return
        except OSError as e:
            if e.errno == errno.EEXIST:
                raise
    write_own_file(dest, read_own_file(source, MAX_MOVED_BYTES))
    os.unlink(source)
