"""Logging to a file in the platformdirs log folder, and turning exceptions into one short line for the user."""

from __future__ import annotations

import logging
import logging.handlers
import os
from pathlib import Path

from .data.paths import log_file
from .engine_adapter import EngineError, as_sentence

log = logging.getLogger("qwen3tts_gui")
_configured: list[Path] = []


def setup_logging(path: Path | None = None) -> Path:
    """Send the app's log (and every traceback) to a rotating file; return its path."""
    path = path or log_file()
    if _configured and _configured[0] == path:
        return path
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_symlink() or path.exists() and not path.is_file():
            raise IsADirectoryError(path)  # a link, a folder or a FIFO (that would wait forever): use stderr
        handler: logging.Handler = _OwnLogFile(path, maxBytes=1_000_000, backupCount=2, encoding="utf-8")
    except OSError:  # read-only home: keep working, log to stderr instead
        handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    _configured[:] = [path]
    return path


class _OwnLogFile(logging.handlers.RotatingFileHandler):
    """The log, opened never through a link (a link planted at its name makes the open fail: logged to stderr)."""

    def _open(self):
        flags = (os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
                 | getattr(os, "O_CLOEXEC", 0))
        fd = os.open(self.baseFilename, flags, 0o666)
        os.set_blocking(fd, True)
        return open(fd, self.mode, encoding=self.encoding, errors=self.errors)


def current_log_file() -> Path:
    return _configured[0] if _configured else log_file()


def one_line(exc: BaseException) -> str:
    """The first line of an exception's message (engine errors are written to be shown as is)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def user_message(exc: BaseException, doing: str = "") -> str:
    """What to show for any exception: the engine's own line, or a short note plus where the details are.

    Unexpected exceptions are logged here with their traceback (the user never sees one).
    """
    if isinstance(exc, EngineError):
        return as_sentence(one_line(exc))
    if isinstance(exc, MemoryError):
        log.exception("out of memory while %s", doing or "working")
        return "Not enough memory for this; close other programs or use a smaller model."
    if isinstance(exc, OSError) and exc.strerror:
        log.warning("%s failed: %s", doing or "operation", exc)
        name = f" ({Path(exc.filename).name})" if exc.filename else ""
        return as_sentence(f"{exc.strerror}{name}")
    log.error("unexpected error while %s", doing or "working", exc_info=exc)
    what = f" while {doing}" if doing else ""
    return f"Unexpected error{what}: {type(exc).__name__}: {one_line(exc)}. Details are in {current_log_file()}."
