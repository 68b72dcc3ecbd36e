"""Reading files the user hands us without trusting them: regular files only, sizes checked before reading.

A FIFO given as a reference hangs a plain open(); a .npy header may claim terabytes; a symlink may loop. Each
of these becomes one clear sentence instead of a hang, an out-of-memory kill or a misleading "does not exist".
"""

from __future__ import annotations

import errno
import io
import os
import stat
from pathlib import Path

import numpy as np


def regular_file_problem(path: str | os.PathLike, what: str) -> str | None:
    """None if `path` is a readable regular file (after symlinks), else what is wrong with it, as a sentence."""
    path = Path(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if path.is_symlink():
            return f"The {what} {path} is a symbolic link to {os.readlink(path)}, which does not exist."
        return f"The {what} {path} does not exist."
    except OSError as e:
        if e.errno == errno.ELOOP:
            return f"The {what} {path} is a symbolic link that loops back on itself."
        return f"Cannot read the {what} {path}: {e.strerror or e}."
    if stat.S_ISDIR(st.st_mode):
        return f"{path} is a folder, not {_a(what)}."
    if not stat.S_ISREG(st.st_mode):
        return f"The {what} {path} is not a regular file (it is a pipe, device or socket); choose a file."
    return None


def _a(noun: str) -> str:
    """'a text file', 'an audio file'."""
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"


def npy_bytes_needed(header: bytes | io.BufferedIOBase) -> tuple[tuple[int, ...], np.dtype, int, int]:
    """(shape, dtype, data bytes the header promises, header length) of a .npy stream. Raises ValueError."""
    f = io.BytesIO(header) if isinstance(header, (bytes, bytearray, memoryview)) else header
    major, _minor = np.lib.format.read_magic(f)
    if major == 1:
        shape, _fortran, dtype = np.lib.format.read_array_header_1_0(f)
    elif major in (2, 3):
        shape, _fortran, dtype = np.lib.format.read_array_header_2_0(f)
    else:
        raise ValueError(f"unknown .npy version {major}")
    if dtype.hasobject:
        raise ValueError("it holds Python objects, which this app never loads")
    count = 1
    for d in shape:
        count *= int(d)
    return tuple(shape), dtype, count * dtype.itemsize, f.tell()


def load_npy_bytes(data: bytes) -> np.ndarray:
    """An array from .npy bytes whose header must match the bytes that are really there (no huge allocation
    from a lying header). Raises ValueError."""
    _shape, _dtype, needed, offset = npy_bytes_needed(data)
    if needed != len(data) - offset:
        raise ValueError(f"its header promises {needed} bytes of data but it holds {len(data) - offset}")
    return np.load(io.BytesIO(data), allow_pickle=False)


def load_npy_file(path: str | os.PathLike, max_bytes: int) -> np.ndarray:
    """An .npy file, refused (ValueError) when its header disagrees with its size or it exceeds max_bytes."""
    size = os.stat(path).st_size
    if size > max_bytes:
        raise ValueError(f"it is {size} bytes, more than the {max_bytes} this app reads")
    with open(path, "rb") as f:
        return load_npy_bytes(f.read())
