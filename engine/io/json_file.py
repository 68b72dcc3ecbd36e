"""JSON files that must hold one object (a checkpoint's config.json, a bundle's manifest, a tokenizer's vocabulary):
read without trusting them. A FIFO in their place would hang a plain read, so only regular files are read, and
none larger than a model's JSON ever is.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

# the largest JSON file of a checkpoint or bundle is a tokenizer.json, about 11 MB for Qwen's 151k tokens
MAX_JSON_BYTES = 64 * 2**20


class _NotReadable(ValueError):
    """Not a file to read as JSON: not a regular file, or larger than MAX_JSON_BYTES."""


def _load(path: Path) -> Any:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _NotReadable("is not a regular file (it is a pipe, device or socket)")
        if st.st_size > MAX_JSON_BYTES:
            raise _NotReadable(f"is {st.st_size} bytes, more than the {MAX_JSON_BYTES} a model's JSON file has")
        return json.loads(f.read(MAX_JSON_BYTES + 1).decode("utf-8"))


def read_json_object(path: str | os.PathLike, error: type[Exception], what: str | None = None) -> dict[str, Any]:
    """The JSON object file `path` holds; error(one line) when it cannot be read, is not JSON or not an object.
    `what` names the file in the line (default: its path)."""
    what = what or str(path)
    try:
        data = _load(Path(path))
    except _NotReadable as e:
        raise error(f"{what} {e}") from None
    except OSError as e:
        raise error(f"{what} cannot be read: {e.strerror or e}") from None
    except (UnicodeDecodeError, ValueError) as e:
        raise error(f"{what} is not valid JSON: {e}") from None
    if not isinstance(data, dict):
        raise error(f"{what} does not hold a JSON object")
    return data


def json_object_or_none(path: str | os.PathLike) -> dict[str, Any] | None:
    """The JSON object file `path` holds, or None when there is none to read there (for telling what a folder is)."""
    try:
        return read_json_object(path, ValueError)
    except ValueError:
        return None
