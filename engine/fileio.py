"""Atomic file writes: a temporary sibling file, fsync, then rename over the target.

A crash, a full disk or a cancel never leaves a half-written file under the target's name, and the result gets
ordinary permissions (mkstemp alone would leave it readable by its owner only).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomic(path: str | os.PathLike, data: bytes | bytearray | memoryview) -> Path:
    """Write `data` to `path` atomically. Raises OSError (the temporary file is removed)."""
    path = Path(path)
    parent = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=parent)
    try:
        try:
            _write_all(fd, memoryview(data))
            os.fchmod(fd, file_mode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


def _write_all(fd: int, data: memoryview) -> None:
    while data:
        data = data[os.write(fd, data):]


def file_mode() -> int:
    """The permissions an ordinary new file gets (0o666 less the umask)."""
    return 0o666 & ~_umask()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


MAX_TEXT_FILE_BYTES = 16 * 1024 * 1024  # ~250 hours of speech; anything larger is not a text for this app


def read_text_file(path: str | os.PathLike) -> str:
    """A UTF-8 text file (a byte-order mark is dropped). Raises TextError with one line on any problem."""
    from .errors import TextError

    path = Path(path)
    try:
        if path.is_dir():
            raise TextError(f"{path} is a folder, not a text file.")
        size = path.stat().st_size
        if size > MAX_TEXT_FILE_BYTES:
            raise TextError(f"{path.name} is {size / 2**20:.0f} MB; a text file can be at most "
                            f"{MAX_TEXT_FILE_BYTES // 2**20} MB.")
        data = path.read_bytes()
    except FileNotFoundError:
        raise TextError(f"The text file {path} does not exist.") from None
    except OSError as e:
        raise TextError(f"Cannot read {path}: {e.strerror or e}.") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise TextError(f"{path.name} is not UTF-8 text (byte {e.start} cannot be read); save it as UTF-8.") from None
