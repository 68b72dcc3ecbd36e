"""Small text and JSON files of the checkpoint, written atomically."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engine.io.fileio import write_atomic


def write_text(path: Path, text: str) -> None:
    write_atomic(path, text.encode("utf-8"))


def write_json(path: Path, obj: Any, indent: int | None = 2) -> None:
    write_text(path, json.dumps(obj, indent=indent, ensure_ascii=False) + "\n")
