"""Writing a bundle: into a temporary sibling folder, renamed into place when complete; replacing only a previous
bundle, never a folder of the user's; sweeping the temporary folders of a writer that died.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import BundleError
from ..io.fileio import current_umask
from ..io.json_file import json_object_or_none
from .bundle import FORMAT, FORMAT_VERSION, MANIFEST, sha256_file
from .manifest_parts import ManifestPart

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

STORE_RECORD = "source.json"  # written beside the manifest by the model store (engine/store)
PARTIAL_MARK = ".qwen3tts-partial-"  # in the name of a bundle being written; a dead writer's are swept


def is_bundle(path: Path) -> bool:
    """True if `path` is a folder holding this app's manifest (any format version)."""
    manifest = json_object_or_none(path / MANIFEST)
    return manifest is not None and manifest.get("format") == FORMAT


def check_replaceable(dest: Path, protect: Iterable[Path] = ()) -> None:
    """Refuse to replace anything but an empty folder or a previous bundle holding only its own files.

    `protect` lists paths (the checkpoint being converted) that must survive: dest may be neither one of them
    nor a folder containing one."""
    real = dest.resolve()
    for p in protect:
        kept = Path(p).resolve()
        if kept == real or real in kept.parents:
            raise BundleError(f"{dest} holds the checkpoint being converted ({p}); choose another output folder")
    if not dest.is_dir():
        raise BundleError(f"{dest} is a file, not a model bundle; choose another output folder")
    if not any(dest.iterdir()):
        return
    manifest = json_object_or_none(dest / MANIFEST)  # read once: what is_bundle reads, and its file list
    if manifest is None or manifest.get("format") != FORMAT:
        raise BundleError(f"{dest} is not a model bundle (it has no {MANIFEST} of this app), so it is not "
                          "replaced; choose another output folder")
    files = manifest.get("files")
    listed = set(files if isinstance(files, dict) else {}) | {MANIFEST, STORE_RECORD}
    for f in sorted(dest.rglob("*")):
        rel = f.relative_to(dest).as_posix()
        if rel not in listed and not (f.is_dir() and not f.is_symlink()):
            raise BundleError(f"{dest} holds a file that is not part of the bundle ({rel}), so it is not "
                              "replaced; move that file or choose another output folder")


def sweep_partials(folder: Path) -> list[Path]:
    """Remove bundle temp folders left in `folder` by a writer that died (killed, power cut); returns them.

    A live writer holds a lock on its temp folder, so a conversion still running elsewhere is left alone."""
    swept: list[Path] = []
    if fcntl is None:
        return swept  # no advisory locks (Windows): a live writer cannot be told from a dead one
    try:
        candidates = [p for p in folder.iterdir() if PARTIAL_MARK in p.name and p.name.startswith(".")]
    except OSError:
        return swept
    for p in candidates:
        if p.is_symlink() or not p.is_dir():
            continue
        try:
            fd = os.open(p, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue  # a live writer holds it
        try:
            shutil.rmtree(p, ignore_errors=True)
            swept.append(p)
        finally:
            os.close(fd)
    return swept


def check_writable(dest: Path, overwrite: bool, protect: Iterable[Path] = ()) -> Path:
    """Where a bundle for `dest` goes (a link to a folder: the folder it points to), or the BundleError saying why
    it may not go there (BundleWriter's rules; asked before long work too)."""
    if dest.is_symlink() and dest.is_dir():
        dest = Path(os.path.realpath(dest))  # replace what the link points to, keep the link
    if dest.exists() or dest.is_symlink():
        if overwrite:
            check_replaceable(dest, protect)
        elif not (dest.is_dir() and not any(dest.iterdir())):
            raise BundleError(f"{dest} already exists; choose a new folder or remove it")
    return dest


class BundleWriter:
    """Writes a bundle into a temporary sibling folder and renames it into place when complete.

    With overwrite=True only a previous bundle (or an empty folder) is replaced, never a protected path."""

    def __init__(self, dest: str | os.PathLike, overwrite: bool = False, protect: Iterable[Path] = ()):
        self.dest = check_writable(Path(dest), overwrite, protect)
        try:
            self.dest.parent.mkdir(parents=True, exist_ok=True)
            sweep_partials(self.dest.parent)
            self.tmp = Path(tempfile.mkdtemp(prefix=f".{self.dest.name}{PARTIAL_MARK}", dir=self.dest.parent))
        except OSError as e:
            raise BundleError(f"cannot write the bundle in {self.dest.parent}: {e.strerror or e}") from None
        self._lock = None
        if fcntl is not None:
            self._lock = os.open(self.tmp, os.O_RDONLY | os.O_DIRECTORY)
            fcntl.flock(self._lock, fcntl.LOCK_EX)  # tells sweep_partials that this folder is alive
        self.manifest: dict[str, Any] = {"format": FORMAT, "version": FORMAT_VERSION, "parts": {}}

    def __enter__(self) -> BundleWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)  # still there: failed or never finished
        if self._lock is not None:
            os.close(self._lock)

    def path(self, rel: str) -> Path:
        p = self.tmp / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        return p

    def add_graph(self, name: str, graph) -> None:
        graph.save(self.path(f"{name}.param"), self.path(f"{name}.bin"))

    def add_table(self, name: str, array: np.ndarray) -> None:
        np.save(self.path(f"{name}.npy"), np.ascontiguousarray(array))

    def copy_file(self, src: Path, rel: str) -> None:
        shutil.copyfile(src, self.path(rel))

    def set_part(self, name: str, info: dict[str, Any]) -> None:
        self.manifest["parts"][name] = info

    def write_record(self, record: ManifestPart) -> None:
        """A typed part (manifest_parts.py) under its own name; Bundle.record reads it back."""
        self.set_part(record.PART, record.to_manifest())

    def finish(self) -> Path:
        files = {}
        for f in sorted(self.tmp.rglob("*")):
            if f.is_file():
                rel = f.relative_to(self.tmp).as_posix()
                files[rel] = {"size": f.stat().st_size, "sha256": sha256_file(f)}
        self.manifest["files"] = files
        (self.tmp / MANIFEST).write_text(json.dumps(self.manifest, indent=1, ensure_ascii=False), encoding="utf-8")
        mode = 0o777 & ~current_umask()  # mkdtemp made it private; a bundle is an ordinary folder
        for d in [self.tmp, *(p for p in self.tmp.rglob("*") if p.is_dir())]:
            os.chmod(d, mode)
        if self.dest.exists() or self.dest.is_symlink():
            old = Path(tempfile.mkdtemp(prefix=f".{self.dest.name}{PARTIAL_MARK}old-", dir=self.dest.parent))
            os.replace(self.dest, old)  # checked by check_replaceable: a previous bundle or an empty folder
            os.replace(self.tmp, self.dest)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(self.tmp, self.dest)
        return self.dest
