"""The store's locks and its disk-error message: the pieces both installing and moving models need.

Kept below installer.py and move.py so that moving the store (which pauses every download) does not import the
installer, and the installer does not import the move.
"""

from __future__ import annotations

import errno
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..io.fileio import OwnFileError, check_own_file
from .store import ModelStore, StoreError, shown_path

LOCKS = ".locks"  # hidden like every work folder: never listed as a model


@contextmanager
def download_lock(store: ModelStore, name: str, doing: str = "starting the download") -> Iterator[None]:
    """One download of a model at a time, across the app's windows, the command line and every process: an OS
    lock (flock / LockFileEx, released by the system when the holder dies, so a killed download never leaves it
    held) on `.locks/<name>.lock` in the models folder. filelock is what huggingface_hub itself locks its cache
    with, so it is installed already; a hand-written fcntl/msvcrt pair would repeat it. `doing` says what the
    lock is taken for, in a failure's message ("removing the model"). A link at the lock's name is refused."""
    from filelock import FileLock, Timeout

    try:
        folder = store.root / LOCKS
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{name}.lock"
        check_own_file(path)
        lock = FileLock(str(path), timeout=0)
        lock.acquire()
    except Timeout:
        raise StoreError(f"The model {name} is already being downloaded (in this app or another program); wait "
                         "for it to finish, or cancel it there.") from None
    except OwnFileError as e:
        raise StoreError(f"Cannot lock {shown_path(Path(e.filename))} while {doing}: {e.strerror}.") from None
    except (OSError, ValueError) as e:
        raise disk_error(e, store.root, doing) from None
    try:
        yield
    finally:
        lock.release()


def disk_error(e: OSError | ValueError, root: Path, doing: str) -> Exception:
    """The one-line message for a failed write in the models folder: a full disk says so and that the download
    resumes; anything else names the folder and the system's reason."""
    if getattr(e, "errno", None) == errno.ENOSPC:
        return StoreError(f"The disk holding {shown_path(root)} is full ({doing}); free some space and try again: "
                          "the download resumes where it stopped.")
    return StoreError(f"Cannot write in {shown_path(root)} while {doing}: {getattr(e, 'strerror', None) or e}.")
