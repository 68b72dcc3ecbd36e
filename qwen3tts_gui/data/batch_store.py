"""The batch table's lines on disk, in a file of their own: <data>/batch lines.json.

They used to live in the settings file, where a million-row import made a 64 MB settings file that Qt rewrote,
and the window waited for, at every edit. The file is written atomically (synced, then renamed) and read without
trusting it: a regular file of bounded size, a list of rows of text; anything else is set aside, not overwritten.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..engine_adapter import os_reason, write_own_file
from .batch_lines import MAX_LINES, Row
from .user_files import UnusableFile, read_regular, set_aside

LINES_FILE = "batch lines.json"
MAX_BYTES = 64 * 2**20  # 10,000 lines, or a few chapters imported as single items


def rows_from(raw: object) -> list[Row]:
    """The usable rows of a stored list: [text, voice, language[, instruction]], text not empty (rows saved
    before instructions existed have three items)."""
    if not isinstance(raw, list):
        return []
    rows = []
    for row in raw[:MAX_LINES]:
        if isinstance(row, list) and len(row) in (3, 4) and all(isinstance(c, str) for c in row) and row[0]:
            rows.append((row[0], row[1], row[2], row[3] if len(row) == 4 else ""))
    return rows


def load_rows(path: Path) -> tuple[list[Row], str | None]:
    """(rows, problem): no file gives no rows; a file that cannot be used is set aside (so the next save does not
    replace it) and named in `problem`."""
    try:
        data = read_regular(path, MAX_BYTES)
        try:
            raw = json.loads(data.decode("utf-8"))
        except ValueError as e:
            raise UnusableFile(f"it is damaged ({str(e).splitlines()[0] if str(e) else type(e).__name__})") from None
        if not isinstance(raw, list):
            raise UnusableFile("it is not a list of lines")
    except FileNotFoundError:
        return [], None
    except UnusableFile as e:
        return [], (f"The batch lines in {path} could not be read: {e}; {set_aside(path, 'damaged')}, and the "
                    "table starts empty.")
    return rows_from(raw), None


def save_rows(path: Path, rows: list[Row]) -> str | None:
    """Write the rows atomically; a problem in words (the disk is full...), or None."""
    data = json.dumps([list(r) for r in rows], ensure_ascii=False).encode("utf-8")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_own_file(path, data)
    except OSError as e:
        return f"The batch lines could not be saved in {path}: {os_reason(e)}."
    return None
