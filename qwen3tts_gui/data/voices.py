"""The voice library: .qvoice files (engine Voice.save/load) in one folder the user can change."""

from __future__ import annotations

import logging
from pathlib import Path

from ..engine_adapter import Voice, VoiceError, VoiceSummary
from .paths import candidate_paths, readable_name

log = logging.getLogger("qwen3tts_gui")  # the app's log (diagnostics.py writes it to a file)

SUFFIX = ".qvoice"


VoiceEntry = VoiceSummary  # what the library list shows about one voice file (metadata only)


class VoiceLibrary:
    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self._cache: dict[Path, tuple[tuple[int, int, int], VoiceEntry]] = {}
        self._reported: set[tuple[Path, str]] = set()
        self._problems: list[str] = []

    def entries(self) -> list[VoiceEntry]:
        """Every readable voice in the folder, by name, from metadata only (the audio loads on use).

        A file that cannot be listed (damaged, a dangling or looping symlink, a pipe) is skipped and its problem
        queued once for take_problems(): nothing in the folder can stop the app from starting."""
        out: list[VoiceEntry] = []
        try:
            paths = sorted(self.folder.glob(f"*{SUFFIX}")) if self.folder.is_dir() else []
        except OSError as e:
            self._report(self.folder, f"Cannot read the voice folder {self.folder}: {e.strerror or e}.")
            return out
        for path in paths:
            try:
                st = path.stat()
                stamp = (st.st_size, st.st_mtime_ns, st.st_ino)
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

    def take_problems(self) -> list[str]:
        """Problems found since the last call, each reported only once per file and message."""
        problems, self._problems = self._problems, []
        return problems

    def _report(self, path: Path, message: str) -> None:
        log.warning("skipping voice file: %s", message)
        if (path, message) not in self._reported:
            self._reported.add((path, message))
            self._problems.append(message)

    def load(self, path: Path, model_id: str | None = None) -> Voice:
        return Voice.load(path, model_id=model_id)

    def add(self, voice: Voice) -> Path:
        """Save a new voice under a file name made from its name: 'Anna', 'Anna (2)'... Each name is claimed
        exclusively, so voices added at once by several processes never overwrite one another."""
        self.folder.mkdir(parents=True, exist_ok=True)
        return self._save_new(voice, readable_name(voice.name, fallback="voice"))

    def _save_new(self, voice: Voice, stem: str) -> Path:
        for path in candidate_paths(self.folder / f"{stem}{SUFFIX}"):
            try:
                return voice.save_new(path)
            except FileExistsError:
                continue
        raise AssertionError("unreachable")  # candidate_paths never ends

    def rename(self, path: Path, new_name: str) -> Path:
        new_name = new_name.strip()
        if not new_name:
            raise VoiceError("a voice needs a name")
        voice = Voice.load(path)
        voice.name = new_name
        stem = readable_name(new_name, fallback="voice")
        if self.folder / f"{stem}{SUFFIX}" == path:
            voice.save(path, own_file=True)
            return path
        target = self._save_new(voice, stem)
        path.unlink(missing_ok=True)
        return target

    def delete(self, path: Path) -> None:
        path.unlink(missing_ok=True)
        self._cache.pop(path, None)

    def import_file(self, src: Path) -> Path:
        """Copy a voice file into the library after checking it is one."""
        voice = Voice.load(src)  # raises VoiceError for anything that is not a readable voice
        return self.add(voice)

    def export(self, path: Path, dest: Path) -> Path:
        """Copy a voice file out of the library (atomically, with ordinary permissions like library files)."""
        dest = Path(dest)
        if dest.suffix != SUFFIX:
            dest = dest.with_name(dest.name + SUFFIX)
        return Voice.load(path).save(dest)
