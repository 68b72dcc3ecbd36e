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
            os.fchmod(fd, 0o666 & ~_umask())
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


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
