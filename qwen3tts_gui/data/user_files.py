"""Opening the app's own files and the files a user hands over without trusting them.

A FIFO where a file should be makes a plain open() wait forever, /dev/zero never ends, a file may claim or
have any size: every reader here opens without blocking, refuses anything but a regular file and checks the
size before reading a byte. A file the app cannot use is set aside under another name, so the app's next save
does not overwrite what the user may still want.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO

from ..engine_adapter import os_reason


class UnusableFile(ValueError):
    """The file cannot be read as it is; the message says why, in a few words ("it is not a regular file")."""


def open_regular(path: Path, max_bytes: int) -> BinaryIO:
    """`path` opened for reading when it is a regular file of at most max_bytes. Raises FileNotFoundError when
    there is nothing there, UnusableFile otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except FileNotFoundError:
        raise
    except NotADirectoryError:  # a part of its path is a file: nothing is there (the window names that file once)
        raise FileNotFoundError(errno.ENOENT, "a part of its path is a file", str(path)) from None
    except OSError as e:
        raise UnusableFile(f"it cannot be opened ({e.strerror or e})") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise UnusableFile("it is a folder")
        if not stat.S_ISREG(st.st_mode):
            raise UnusableFile("it is not a regular file (a pipe, device or socket)")
        if st.st_size > max_bytes:
            raise UnusableFile(f"it is {_size(st.st_size)}, more than the {_size(max_bytes)} it may have")
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def read_regular(path: Path, max_bytes: int) -> bytes:
    """The bytes of a regular file of at most max_bytes (see open_regular)."""
    with open_regular(path, max_bytes) as f:
        try:
            return f.read(max_bytes + 1)[: max_bytes]  # bounded even if it grows meanwhile
        except OSError as e:
            raise UnusableFile(f"it cannot be read ({e.strerror or e})") from None


def set_aside(path: Path, tag: str) -> str:
    """Rename `path` to the first free '<stem>.<tag>[N]<suffix>'; says where it went (or why it stayed)."""
    candidates = (path.with_name(f"{path.stem}.{tag}{n or ''}{path.suffix}") for n in range(10**6))
    aside = next(p for p in candidates if not os.path.lexists(p))
    try:
        os.rename(path, aside)
    except OSError as e:
        return f"it is left as it is ({os_reason(e)})"
    return f"it is kept as {aside.name}"


def _size(n: int) -> str:
    return f"{n / 2**20:.0f} MB" if n >= 2**20 else f"{n} bytes"
