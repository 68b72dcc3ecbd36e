"""Moving the model store to another folder: copy, verify, switch, delete.

A kill (power cut, the app closed from the task manager) at any point leaves every model whole in the folder
the app will use: until the switch that is the old folder, untouched; from the switch on it is the new one,
already complete and verified. The steps:

1. copy every entry into `<new>/.incoming/` (a hard link on the same disk: instant, nothing to verify; else a
   copy, fsynced, hashed as it is read), 2. verify each copy against its source (size, and sha256 of copies read
   back from the disk), 3. place the entries in `<new>` (one rename each) with a journal naming where they came
   from, 4. switch: the pointer file (and the caller's setting) now names `<new>`, 5. delete the old entries.
A move killed before the switch is cleaned up by the next move to the same folder (its staging folder, and its
placed entries when the journal says they are copies of this very store). A destination inside the store is
refused: the copy would copy itself.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from .locks import LOCKS, download_lock
from .store import ModelStore, StoreError, folder_bytes, remember_models_dir, shown_path

STAGING = ".incoming"
JOURNAL = ".move.json"
# Work of the store itself, not moved: conversions, removals, locks, an earlier move's leftovers.
_NOT_MOVED = (".installing-", ".removing-", LOCKS, STAGING, JOURNAL)
_BLOCK = 1 << 20

Step = Callable[[str], None]


def move_store(store: ModelStore, new_root: str | os.PathLike, remember: bool = True,
               on_switch: Callable[[Path], None] | None = None, step: Step | None = None) -> Path:
    """Move every installed model (and unfinished downloads) of `store` to new_root and switch to it.

    on_switch(new_root) is called at the switch, after the pointer file: the app saves its setting there, so a
    kill after it finds the new folder. step(name) is told each step as it completes ("copying", "copied",
    "verified", "placing", "placed", "switched", "deleting", "done")."""
    told = step or (lambda _name: None)
    new_root = Path(new_root).expanduser()
    old = store.root
    with store.reading():
        old_real, new_real = old.resolve(), new_root.resolve()
        if new_real == old_real:
            return new_root
        if new_real.is_relative_to(old_real):
            raise StoreError(f"{shown_path(new_root)} is inside the models folder {shown_path(old)}; choose a folder "
                             "outside it.")
        entries = sorted(d for d in old.iterdir() if not d.name.startswith(_NOT_MOVED)) if old.is_dir() else []
    try:
        new_root.mkdir(parents=True, exist_ok=True)
        _clean_earlier_attempt(new_root, old_real)
        clashes = sorted(d.name for d in entries if (new_root / d.name).exists())
        if clashes:
            raise StoreError(f"{shown_path(new_root)} already has {', '.join(clashes)}; choose an empty folder.")
        linkable = _same_device(old, new_root)
        need = sum(folder_bytes(d) if d.is_dir() else d.stat().st_size for d in entries)
        if not linkable and shutil.disk_usage(new_root).free < need:
            raise StoreError(f"Not enough free space in {shown_path(new_root)}: the models take "
                             f"{need / 1e9:.1f} GB.")
        with _downloads_paused(store):
            staging = new_root / STAGING
            copies: dict[Path, str] = {}  # copied (not linked) file -> sha256 of its source
            for d in entries:
                _copy_tree(d, staging / d.name, linkable, copies, told)
            told("copied")
            _verify(entries, staging, copies)
            told("verified")
            _write_json(new_root / JOURNAL, {"from": str(old_real), "entries": [d.name for d in entries]})
            for d in entries:
                os.replace(staging / d.name, new_root / d.name)
                told("placing")
            staging.rmdir()
            told("placed")
            if remember:
                remember_models_dir(new_root)
            if on_switch is not None:
                on_switch(new_root)
            store.root = new_root
            (new_root / JOURNAL).unlink(missing_ok=True)
            told("switched")
            for d in entries:
                doomed = old / f".removing-{d.name}"
                os.replace(d, doomed)  # renamed first: a half-deleted folder is never taken for a model
                shutil.rmtree(doomed) if doomed.is_dir() else doomed.unlink()
                told("deleting")
    except (OSError, StoreError) as e:
        if store.root != new_root:  # before the switch: the copies go, the store stays where it was
            shutil.rmtree(new_root / STAGING, ignore_errors=True)
        if isinstance(e, StoreError):
            raise
        raise StoreError(f"Moving the models stopped ({e.strerror or e}); the models are whole in "
                         f"{shown_path(store.root)}.") from None
    told("done")
    return new_root


def _clean_earlier_attempt(new_root: Path, old_real: Path) -> None:
    """A move to new_root that was killed before its switch: its staging folder, and the entries it placed if
    its journal says they are copies of this store (the originals are still here, never deleted before the
    switch)."""
    shutil.rmtree(new_root / STAGING, ignore_errors=True)
    journal = new_root / JOURNAL
    try:
        info = json.loads(journal.read_bytes()) if journal.is_file() and journal.stat().st_size < 1 << 20 else None
    except (OSError, ValueError):
        info = None
    if not isinstance(info, dict) or info.get("from") != str(old_real):
        return
    for name in info.get("entries", []):
        if isinstance(name, str) and name and "/" not in name and name not in (".", ".."):
            target = new_root / name
            if (old_real / name).exists():  # only a copy of something still in the store is removed
                shutil.rmtree(target, ignore_errors=True) if target.is_dir() else target.unlink(missing_ok=True)
    journal.unlink(missing_ok=True)


def _copy_tree(src: Path, dst: Path, linkable: bool, copies: dict[Path, str], told: Step) -> None:
    if src.is_symlink() or not src.is_dir():
        _copy_file(src, dst, linkable, copies)
        told("copying")
        return
    dst.mkdir(parents=True, exist_ok=True)
    for child in sorted(src.iterdir()):
        _copy_tree(child, dst / child.name, linkable, copies, told)


def _copy_file(src: Path, dst: Path, linkable: bool, copies: dict[Path, str]) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    if src.is_symlink():
        os.symlink(os.readlink(src), dst)
        return
    if linkable:
        try:
            os.link(src, dst)
            return
        except OSError:
            pass  # a file system without hard links: copy
    h = hashlib.sha256()
    with open(src, "rb") as i, open(dst, "wb") as o:
        while block := i.read(_BLOCK):
            h.update(block)
            o.write(block)
        o.flush()
        os.fsync(o.fileno())
    shutil.copystat(src, dst)
    copies[dst] = h.hexdigest()


def _verify(entries: list[Path], staging: Path, copies: dict[Path, str]) -> None:
    for d in entries:
        for src in [d, *d.rglob("*")] if d.is_dir() and not d.is_symlink() else [d]:
            dst = staging / src.relative_to(d.parent)
            if src.is_symlink():
                ok = dst.is_symlink() and os.readlink(dst) == os.readlink(src)
            elif src.is_dir():
                ok = dst.is_dir()
            else:
                ok = dst.is_file() and dst.stat().st_size == src.stat().st_size and (
                    dst not in copies or _sha256(dst) == copies[dst])
            if not ok:
                raise StoreError(f"The copy of {src.relative_to(d.parent)} in {shown_path(staging.parent)} does not "
                                 "match the original; nothing was moved.")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(_BLOCK):
            h.update(block)
    return h.hexdigest()


def _write_json(path: Path, data: dict) -> None:
    from ..io.fileio import write_own_file

    write_own_file(path, json.dumps(data).encode("utf-8"))


@contextmanager
def _downloads_paused(store: ModelStore) -> Iterator[None]:
    """No download of any model runs while its files are being moved (StoreError naming it otherwise)."""
    locks = store.root / LOCKS
    names = sorted(p.name.removesuffix(".lock") for p in locks.glob("*.lock")) if locks.is_dir() else []
    with ExitStack() as held:
        for name in names:
            held.enter_context(download_lock(store, name, "moving the models"))
        yield


def _same_device(a: Path, b: Path) -> bool:
    try:
        return a.stat().st_dev == b.stat().st_dev
    except OSError:
        return False
