"""Whether the app can keep files in the folders it writes (takes, voices, the text box, settings, the log).

A takes folder that is a file or a link that loops, a settings folder that is a file: the app still starts, but
every take and setting is lost at the end. Found once at the start, in words that name the place to fix.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from ..engine_adapter import os_reason


def folder_problem(folder: Path) -> str | None:
    """Why no file can be kept in `folder` (made here when it is missing), naming the path to fix; or None."""
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as e:
        return _in_the_way(folder) or f"{folder} cannot be made: {os_reason(e)}"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"{folder} cannot be written: no permission to write there"
    return None


def _in_the_way(folder: Path) -> str | None:
    """The first part of folder's path (from the root down) that is not a folder, or None."""
    for part in [*reversed(folder.parents), folder]:
        try:
            st = os.lstat(part)
        except OSError:
            return None  # absent (and the rest with it): the folder could not be made for another reason
        if stat.S_ISDIR(st.st_mode):
            continue
        if not stat.S_ISLNK(st.st_mode):
            return f"{part} is a file, not a folder"
        try:
            target = os.stat(part)
        except OSError as e:
            if e.errno == errno.ELOOP:
                return f"{part} is a link that loops back on itself"
            return f"{part} is a link to {os.readlink(part)}, which does not exist"
        if not stat.S_ISDIR(target.st_mode):
            return f"{part} is a link to a file, not to a folder"
    return None


@dataclass
class KeptFolder:
    """A folder the app keeps something in, and what is lost when it cannot ("Takes are not kept")."""

    what: str
    folder: Path


def unusable_folders(folders: list[KeptFolder]) -> list[str]:
    """One sentence for each folder that cannot keep files: what is lost and which path to fix."""
    return [f"{f.what}: {problem}." for f in folders if (problem := folder_problem(f.folder))]
