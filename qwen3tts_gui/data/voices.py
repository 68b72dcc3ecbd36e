"""The voice library: .qvoice files (engine Voice.save/load) in one folder the user can change.

Listing and finding voices by name is the engine's (engine.store.VoiceLibrary, which the speech server shares);
the app adds saving, renaming, deleting, importing and exporting."""

from __future__ import annotations

import logging
from pathlib import Path

from ..engine_adapter import Voice, VoiceError, VoiceSummary
from ..engine_adapter import VoiceLibrary as SharedLibrary
from .paths import candidate_paths, readable_name

log = logging.getLogger("qwen3tts_gui")  # the app's log (diagnostics.py writes it to a file)

SUFFIX = ".qvoice"


VoiceEntry = VoiceSummary  # what the library list shows about one voice file (metadata only)


class VoiceLibrary(SharedLibrary):
    def _report(self, path: Path, message: str) -> None:
        log.warning("skipping voice file: %s", message)
        if (path, message) not in self._reported:
            self._reported.add((path, message))
            self._problems.append(message)

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
        self.forget(path)

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
