"""One window per data folder: a second launch (a double click on the launcher while the app is open) brings the
running window to the front and quits, instead of opening a second window on the same takes and settings.

The first copy holds an OS lock on <data>/window.lock (flock / LockFileEx through filelock, as the model
downloads do): the system releases it when the process ends in any way, so a crashed or killed app never keeps
the next launch out. The holder listens on a local socket named after the data folder; a launch that finds the
lock held asks there for the window and quits once it is shown. When the lock cannot be taken at all (the data
folder is unusable) or the running copy does not answer, the launch opens its own window: take numbers are
claimed on disk (TakeStore.claim_number), so two windows still keep every take.
"""

from __future__ import annotations

import enum
import hashlib
import logging
import os
import sys
import time
from pathlib import Path

from PySide6.QtCore import QObject, Signal
from PySide6.QtNetwork import QLocalServer, QLocalSocket

log = logging.getLogger("qwen3tts_gui")

LOCK_FILE = "window.lock"
SHOW = b"show"  # a line: "show", or "show <model>" when the launch named a model (--model)
SHOWN = b"shown\n"
MAX_LINE = 64 * 1024
ANSWER_SECONDS = 15.0  # the running copy answers from its event loop: it may still be opening its window


class Start(enum.Enum):
    FIRST = "first"  # this launch holds the lock: it opens the window
    HANDED_OVER = "handed over"  # the running copy showed its window: this launch quits
    UNANSWERED = "unanswered"  # another copy holds the lock but did not answer: this launch opens a window too
    UNCHECKED = "unchecked"  # no lock could be taken (the data folder is unusable): this launch opens a window


def server_name(folder: Path) -> str:
    """The local socket of the copy that holds `folder`: one per user and data folder. On Linux it lives in the
    user's private runtime folder when there is one (others cannot put a socket of that name there first)."""
    key = f"{getattr(os, 'getuid', lambda: 0)()}:{os.path.abspath(folder)}"
    name = f"qwen3tts-studio-{hashlib.sha256(key.encode('utf-8', 'surrogateescape')).hexdigest()[:16]}"
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    if sys.platform.startswith("linux") and runtime and os.path.isdir(runtime):
        path = os.path.join(runtime, name)
        if len(os.fsencode(path)) < 100:  # a Unix socket's path is at most 107 bytes
            return path
    return name


class SingleInstance(QObject):
    """start() once, right after the QApplication is made; keep the object for the app's life (it holds the
    lock and the socket). show_requested(model) fires when a later launch asks for the window; model is what
    its --model named, or ""."""

    show_requested = Signal(str)

    def __init__(self, folder: Path, parent: QObject | None = None):
        super().__init__(parent)
        self.folder = folder
        self.name = server_name(folder)
        self.problem: str | None = None  # why this copy runs without the lock or the socket (for the log)
        self._lock: object = None  # the filelock, held while this object lives
        self._server: QLocalServer | None = None

    def start(self, model: str = "") -> Start:
        """Take the lock, or hand over to the copy that holds it (asking it to open `model` too, when named)."""
        from filelock import FileLock, Timeout

        from .engine_adapter import check_own_file

        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            check_own_file(self.folder / LOCK_FILE)  # older filelocks open it through a link
            lock = FileLock(str(self.folder / LOCK_FILE), timeout=0)
            lock.acquire()
        except Timeout:
            return Start.HANDED_OVER if ask_to_show(self.name, ANSWER_SECONDS, model) else Start.UNANSWERED
        except (OSError, ValueError) as e:
            self.problem = f"no single-window lock in {self.folder}: {getattr(e, 'strerror', None) or e}"
            log.warning("%s", self.problem)
            return Start.UNCHECKED
        self._lock = lock
        self._listen()
        return Start.FIRST

    def _listen(self) -> None:
        server = QLocalServer(self)
        server.setSocketOptions(QLocalServer.SocketOption.UserAccessOption)
        QLocalServer.removeServer(self.name)  # a killed holder's socket file (the lock says it is gone)
        if not server.listen(self.name):
            self.problem = f"a second launch cannot reach this window: {server.errorString()}"
            log.warning("%s", self.problem)
            return
        server.newConnection.connect(self._connection)
        self._server = server

    def _connection(self) -> None:
        server = self._server
        while server is not None and server.hasPendingConnections():
            sock = server.nextPendingConnection()
            sock.readyRead.connect(lambda s=sock: self._read(s))
            sock.disconnected.connect(sock.deleteLater)
            self._read(sock)

    def _read(self, sock: QLocalSocket) -> None:
        if not sock.canReadLine():
            return
        line = bytes(sock.readLine(MAX_LINE).data()).rstrip(b"\n")
        if line == SHOW or line.startswith(SHOW + b" "):
            model = line[len(SHOW) + 1:].decode("utf-8", "replace")
            log.info("another launch asked for this window: brought to the front%s",
                     f"; it names the model {model}" if model else "")
            self.show_requested.emit(model)
            sock.write(SHOWN)
            sock.flush()
        sock.disconnectFromServer()


def ask_to_show(name: str, seconds: float = ANSWER_SECONDS, model: str = "") -> bool:
    """Ask the copy listening on `name` to show its window (and open `model`, when named); True once it says it
    has. Retried until `seconds` have passed: the holder may have taken the lock a moment ago and not be
    listening yet."""
    request = SHOW + (b" " + " ".join(model.split("\n")).encode("utf-8", "surrogateescape") if model else b"") + b"\n"
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        sock = QLocalSocket()
        sock.connectToServer(name)
        if sock.waitForConnected(500):
            sock.write(request)
            sock.waitForBytesWritten(1000)
            while not sock.canReadLine() and time.monotonic() < end:
                if not sock.waitForReadyRead(max(1, int((end - time.monotonic()) * 1000))):
                    break  # disconnected, or no answer in time
            answered = sock.canReadLine() and bytes(sock.readLine().data()) == SHOWN
            sock.abort()
            if answered:
                return True
        time.sleep(0.1)
    return False


def bring_forward(window) -> None:
    """Show a window that may be minimised or behind others (a window manager may only flash its task entry)."""
    from PySide6.QtWidgets import QApplication

    if window.isMinimized():
        window.showNormal()
    window.show()
    window.raise_()
    window.activateWindow()
    QApplication.alert(window)
