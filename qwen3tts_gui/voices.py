"""The voice library: .qvoice files (engine Voice.save/load) in one folder the user can change."""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .diagnostics import log
from .engine_adapter import Voice, VoiceError
from .paths import readable_name, unique_path

SUFFIX = ".qvoice"


@dataclass
class VoiceEntry:
    """What the library list shows about one voice file."""

    path: Path
    name: str
    language: str
    created: str
    ref_text: str | None
    model_id: str
    ref_seconds: float | None

    @property
    def icl(self) -> bool:
        return bool(self.ref_text)


class VoiceLibrary:
    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self._cache: dict[Path, tuple[float, VoiceEntry]] = {}

    def entries(self) -> list[VoiceEntry]:
        """Every readable voice in the folder, by name; unreadable files are skipped (and logged)."""
        out = []
        if not self.folder.is_dir():
            return out
        for path in sorted(self.folder.glob(f"*{SUFFIX}")):
            mtime = path.stat().st_mtime
            cached = self._cache.get(path)
            if cached and cached[0] == mtime:
                out.append(cached[1])
                continue
            try:
                voice = Voice.load(path)
            except VoiceError as e:
                log.warning("skipping voice file: %s", e)
                continue
            entry = VoiceEntry(
                path=path,
                name=voice.name or path.stem,
                language=voice.language,
                created=voice.created,
                ref_text=voice.ref_text,
                model_id=voice.model_id,
                ref_seconds=None if voice.ref_audio is None else len(voice.ref_audio) / 24000,
            )
            self._cache[path] = (mtime, entry)
            out.append(entry)
        return sorted(out, key=lambda e: e.name.casefold())

    def load(self, path: Path, model_id: str | None = None) -> Voice:
        return Voice.load(path, model_id=model_id)

    def add(self, voice: Voice) -> Path:
        """Save a new voice under a file name made from its name."""
        self.folder.mkdir(parents=True, exist_ok=True)
        path = unique_path(self.folder / f"{readable_name(voice.name, fallback='voice')}{SUFFIX}")
        return voice.save(path)

    def rename(self, path: Path, new_name: str) -> Path:
        new_name = new_name.strip()
        if not new_name:
            raise VoiceError("a voice needs a name")
        voice = Voice.load(path)
        voice.name = new_name
        target = self.folder / f"{readable_name(new_name, fallback='voice')}{SUFFIX}"
        if target != path:
            target = unique_path(target)
        voice.save(target)
        if target != path:
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
        """Copy a voice file out of the library (atomically)."""
        dest = Path(dest)
        if dest.suffix != SUFFIX:
            dest = dest.with_name(dest.name + SUFFIX)
        fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", dir=dest.parent)
        os.close(fd)
        try:
            shutil.copyfile(path, tmp)
            os.replace(tmp, dest)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return dest
