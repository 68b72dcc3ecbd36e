"""Atomic file writes: a temporary sibling file, fsync, then rename over the target.

A crash, a full disk or a cancel never leaves a half-written file under the target's name. A new file gets the
ordinary umask mode (mkstemp alone would leave it readable by its owner only); a replaced file keeps its mode and
owner, a symlink keeps pointing where it did (its target is replaced) and a file with other hard links is
rewritten in place once the complete new content has been written next to it (renaming would split the links).
That is right for a path the user chose to save to.

The app's own files (caches, the tuning records, the saved text, the batch lines, the models-folder pointer, a
download's bookkeeping and parts) are different: a link planted in their place would have the app write its JSON
into whatever the link names (run as root, /etc/passwd). write_own_file and open_own_file never follow a link at
the file's name: a link, folder or other non-regular thing there is refused with one line (OwnFileError, the link
left as it is), and the rename that puts a new file in place replaces the name itself, never a link's target.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import stat
import tempfile
import threading
import time
from pathlib import Path
from typing import BinaryIO

_umask_lock = threading.Lock()


def write_atomic(path: str | os.PathLike, data: bytes | bytearray | memoryview) -> Path:
    """Write `data` to `path` atomically. Raises OSError (the temporary file is removed)."""
    path = Path(path)
    return place(_write_temp(target_of(path), memoryview(data)), path)


class OwnFileError(OSError):
    """Something other than a regular file is where the app keeps a file of its own; strerror says what, in words
    a user acts on ("it is a symbolic link (to ...); ...")."""


def check_own_file(path: str | os.PathLike) -> None:
    """Nothing, or a regular file, at `path` (never following a link); else OwnFileError."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        try:
            to = os.readlink(os.fspath(path))
        except OSError:
            to = "?"
        to = to if len(to) <= 120 else to[:117] + "..."
        raise OwnFileError(errno.ELOOP, f"it is a symbolic link (to {to}) where the app keeps a file of its own; "
                                        "the app never writes through a link: remove the link", str(path))
    if stat.S_ISDIR(st.st_mode):
        raise OwnFileError(errno.EISDIR, "it is a folder where the app keeps a file of its own; remove or rename "
                                         "the folder", str(path))
    if not stat.S_ISREG(st.st_mode):
        raise OwnFileError(errno.EEXIST, "it is not a regular file (a pipe, device or socket) where the app keeps a "
                                         "file of its own; remove it", str(path))


def write_own_file(path: str | os.PathLike, data: bytes | bytearray | memoryview) -> Path:
    """Write one of the app's own files atomically (fsync, then rename), never through a link: OwnFileError when
    a link, folder or other non-regular thing is in its place (left as it is); OSError otherwise. The temporary
    file is made exclusively beside `path`, and the rename replaces the name `path` itself: a link planted there
    meanwhile is replaced, its target never written. A file with other hard links is not rewritten in place (its
    links keep the old content)."""
    path = Path(path)
    check_own_file(path)
    tmp = _write_temp(path, memoryview(data))
    try:
        os.chmod(tmp, file_mode())
        check_own_file(path)
        os.replace(tmp, path)
    except BaseException:
        _discard(tmp)
        raise
    return path


def open_own_file(path: str | os.PathLike, truncate: bool) -> BinaryIO:
    """One of the app's own files opened for writing, unbuffered, created if missing (emptied if truncate), never
    through a link (O_NOFOLLOW where the system has it, and the opened file must be regular): OwnFileError
    otherwise. For a file written in pieces, such as a download's part."""
    check_own_file(path)
    flags = (os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if truncate else 0) | getattr(os, "O_NOFOLLOW", 0)
             | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        fd = os.open(path, flags, 0o666)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENXIO, errno.EISDIR):
            check_own_file(path)  # says what is there
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OwnFileError(errno.EEXIST, "it is not a regular file where the app keeps a file of its own",
                               str(path))
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "wb", buffering=0)


def read_own_file(path: str | os.PathLike, max_bytes: int) -> bytes:
    """The bytes of one of the app's own files, never through a link: FileNotFoundError when there is none,
    OwnFileError when something else is in its place, ValueError when it is larger than max_bytes."""
    check_own_file(path)
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        if e.errno == errno.ELOOP:
            check_own_file(path)
        raise
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OwnFileError(errno.EEXIST, "it is not a regular file where the app keeps a file of its own",
                               str(path))
        if st.st_size > max_bytes:
            raise ValueError(f"it is {st.st_size} bytes, more than the {max_bytes} it may have")
        return f.read(max_bytes + 1)[:max_bytes]


def target_of(path: str | os.PathLike) -> Path:
    """The file a write to `path` replaces: a symlink's target (the link itself stays), else path."""
    path = Path(path)
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def place(tmp: str | os.PathLike, path: str | os.PathLike, discard: bool = True) -> Path:
    """Put the complete, synced file `tmp` (made in the folder of target_of(path)) in place of `path`.

    An existing file keeps its mode and owner and its hard links (those are rewritten in place); a new one gets
    file_mode(). Raises OSError; tmp is removed (unless discard=False: the caller keeps it), except when an
    in-place rewrite failed half way: then it holds the complete new content and the error names it."""
    path, tmp = Path(path), str(tmp)
    target = target_of(path)
    try:
        old: os.stat_result | None
        try:
            old = target.stat()
        except FileNotFoundError:
            old = None
        if old is not None and not stat.S_ISREG(old.st_mode):
            old = None  # not a regular file: nothing to keep
        if old is not None:
            try:
                os.chown(tmp, old.st_uid, old.st_gid)
            except (OSError, AttributeError):  # AttributeError: no owners to keep (Windows)
                pass  # another owner: rewritten in place below
            os.chmod(tmp, stat.S_IMODE(old.st_mode))
        else:
            os.chmod(tmp, file_mode())
        if old is None or not (old.st_nlink > 1 or not _same_owner(tmp, old)):
            os.replace(tmp, target)
            return path
    except BaseException:
        if discard:
            _discard(tmp)
        raise
    try:
        _rewrite_in_place(target, tmp)
    except OSError as e:  # the target may be half written now: keep the complete copy and say where
        raise KeptCopyError(e.errno, f"{e.strerror or e} (the complete new content is kept in {tmp})",
                            str(path), kept=Path(tmp)) from None
    _discard(tmp)
    return path


class KeptCopyError(OSError):
    """Rewriting a file in place failed part way; `kept` holds the complete new content."""

    def __init__(self, *args, kept: Path):
        super().__init__(*args)
        self.kept = kept


def create_new(path: str | os.PathLike, data: bytes | bytearray | memoryview) -> Path:
    """Write `data` to `path` only if no file of that name exists, atomically with respect to other processes.

    Raises FileExistsError when the name is taken (two writers can never both get it), OSError otherwise."""
    path = Path(path)
    tmp = _write_temp(path, memoryview(data))
    try:
        os.chmod(tmp, file_mode())
        os.link(tmp, path)  # fails with EEXIST instead of replacing: the exclusive step
    finally:
        _discard(tmp)
    return path


def rescue(tmp: str | os.PathLike, suffix: str) -> Path | None:
    """Move a finished file that could not be put in place to the temp folder (or the home folder) so the work
    is not lost; returns where it went, or None (then tmp is removed)."""
    for folder in (Path(tempfile.gettempdir()), Path.home()):
        try:
            fd, name = tempfile.mkstemp(prefix="qwen3tts-rescued-", suffix=suffix, dir=folder)
            os.close(fd)
        except OSError:
            continue
        try:
            shutil.move(str(tmp), name)
            os.chmod(name, file_mode())
            return Path(name)
        except OSError:
            _discard(name)
    _discard(str(tmp))
    return None


def os_reason(e: OSError) -> str:
    """What went wrong with a write, in words a user acts on."""
    kept = f" (the complete new content is kept in {e.kept})" if isinstance(e, KeptCopyError) else ""
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        return "the disk is full" + kept
    if e.errno == errno.EROFS:
        return "the disk there is read-only (mounted read-only)" + kept
    if e.errno in (errno.EACCES, errno.EPERM):
        return "no permission to write there" + kept
    return e.strerror or str(e)


def current_umask() -> int:
    """The process umask, read without changing it where Linux allows (os.umask alone must set it, briefly
    giving files other threads create meanwhile the wrong mode)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    with _umask_lock:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def temp_beside(target: Path) -> tuple[int, str]:
    """(fd, name) of a new hidden temporary file beside `target`: '.NAME.PID.XXXXXXXX.tmp'. The process id lets
    a later run tell a temp left by a killed process (swept) from one another process is still writing."""
    parent = target.parent if str(target.parent) else Path(".")
    sweep_stale_temps(parent)
    return tempfile.mkstemp(prefix=f".{target.name}.{os.getpid()}.", suffix=".tmp", dir=parent)


_TEMP_NAME = re.compile(r"\..+\.(?P<pid>[0-9]{1,10})\.[a-z0-9_]{8}\.tmp")
STALE_SECONDS = 60  # a temp still being written is touched more often than this (every chunk, every block)
_swept: set[str] = set()
_swept_lock = threading.Lock()


def sweep_stale_temps(folder: str | os.PathLike[str], force: bool = False,
                      older_than: float = STALE_SECONDS) -> list[Path]:
    """Remove the temporary files a killed process left in `folder` (kill -9 during a long synthesis left up to
    78 MB, hidden, for ever): only names temp_beside makes, only when that process is gone and the file is older
    than `older_than` seconds. Once per folder per process unless force. Returns what was removed."""
    key = os.path.abspath(folder)
    with _swept_lock:
        if key in _swept and not force:
            return []
        _swept.add(key)
    removed = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return []
    now = time.time()
    for entry in entries:
        m = _TEMP_NAME.fullmatch(entry.name)
        if m is None or _process_alive(int(m["pid"])):
            continue
        try:
            st = entry.stat(follow_symlinks=False)
            if stat.S_ISREG(st.st_mode) and now - st.st_mtime >= older_than:
                os.unlink(entry.path)
                removed.append(Path(entry.path))
        except OSError:
            pass
    return removed


def _process_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError, OverflowError):
        return True  # another user's process, or cannot tell: keep its file
    return True


def _write_temp(target: Path, data: memoryview) -> str:
    fd, tmp = temp_beside(target)
    try:
        try:
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException:
        _discard(tmp)
        raise
    return tmp


def _same_owner(tmp: str, old: os.stat_result) -> bool:
    st = os.stat(tmp)
    return (st.st_uid, st.st_gid) == (old.st_uid, old.st_gid)


def _rewrite_in_place(target: Path, tmp: str) -> None:
    """Overwrite the existing inode with tmp's content (keeps hard links and owner)."""
    with open(tmp, "rb") as src, open(target, "r+b") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
        dst.truncate()
        dst.flush()
        os.fsync(dst.fileno())


def _discard(tmp: str) -> None:
    try:
        os.unlink(tmp)
    except OSError:
        pass


def _write_all(fd: int, data: memoryview) -> None:
    data = data.cast("B") if data.ndim != 1 or data.format != "B" else data
    while data:
        data = data[os.write(fd, data):]


def file_mode() -> int:
    """The permissions an ordinary new file gets (0o666 less the umask)."""
    return 0o666 & ~current_umask()
