"""The voice library: the .qvoice files (engine Voice.save/load) in one folder, listed and found by name.

Read-only here, so that every front end can use it without the app: the app's library (which adds saving,
renaming and deleting) and the speech server (which resolves a request's voice by name, never by path). The folder is the one the app uses: `<user data folder>/voices` unless the app's user chose
another (the app passes it in).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import platformdirs

from ..errors import VoiceError
from ..voice import VOICE_SUFFIX, Voice, VoiceSummary
from .store import APP_NAME

log = logging.getLogger("engine.voices")


def default_voices_dir(chosen: str | os.PathLike | None = None) -> Path:
    """The voice library's folder: `chosen` (the app's setting) when given, else `<user data folder>/voices`."""
    if chosen:
        return Path(chosen).expanduser()
    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False)) / "voices"


class VoiceLibrary:
    """The readable voices of one folder, from metadata only (a voice's arrays load on use)."""

    def __init__(self, folder: str | os.PathLike):
        self.folder = Path(folder)
        self._cache: dict[Path, tuple[tuple[int, int, int], VoiceSummary]] = {}
        self._reported: set[tuple[Path, str]] = set()
        self._problems: list[str] = []

    def entries(self) -> list[VoiceSummary]:
        """Every readable voice in the folder, sorted by name.

        A file that cannot be listed (damaged, a dangling or looping symlink, a pipe) is skipped and its problem
        queued once for take_problems(): nothing in the folder can stop a caller from starting."""
        out: list[VoiceSummary] = []
        try:
            paths = sorted(self.folder.glob(f"*{VOICE_SUFFIX}")) if self.folder.is_dir() else []
        except OSError as e:
            self._report(self.folder, f"Cannot read the voice folder {self.folder}: {e.strerror or e}.")
            return out
        for path in paths:
            try:
                st = path.stat()
                stamp: tuple[int, int, int] | None = (st.st_size, st.st_mtime_ns, st.st_ino)
            except OSError:
                stamp = None  # dangling or looping link: Voice.summary says which
            cached = self._cache.get(path)
            if cached and stamp is not None and cached[0] == stamp:
                out.append(cached[1])
                continue
            try:
                entry = Voice.summary(path)
            except VoiceError as e:
                self._report(path, str(e))
                continue
            if stamp is not None:
                self._cache[path] = (stamp, entry)
            out.append(entry)
        return sorted(out, key=lambda e: e.name.casefold())

    def find(self, name: str) -> VoiceSummary | None:
        """The voice a name means: its file name without .qvoice first (unique in the folder), else the one voice
        of that name (either in any case); None when no voice, or more than one, answers to it. Only names are
        matched, never paths: a name with a folder separator finds nothing."""
        wanted = name.strip().casefold()
        if not wanted or "/" in wanted or "\\" in wanted or "\0" in wanted:
            return None
        entries = self.entries()
        by_file = [e for e in entries if e.path.stem.casefold() == wanted]
        if by_file:
            return by_file[0]
        by_name = [e for e in entries if e.name.strip().casefold() == wanted]
        return by_name[0] if len(by_name) == 1 else None

    def load(self, path: Path, model_id: str | None = None) -> Voice:
        return Voice.load(path, model_id=model_id)

    def take_problems(self) -> list[str]:
        """Problems found since the last call, each reported only once per file and message."""
        problems, self._problems = self._problems, []
        return problems

    def forget(self, path: Path) -> None:
        """Drop a file's cached listing (it was deleted or replaced)."""
        self._cache.pop(path, None)

    def _report(self, path: Path, message: str) -> None:
        log.warning("skipping voice file: %s", message)
        if (path, message) not in self._reported:
            self._reported.add((path, message))
            self._problems.append(message)
