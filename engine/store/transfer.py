"""One file's bytes from a hub or mirror into its `.part` file: never past the listed size, cancellable at once.

Why not huggingface_hub's `http_get` (used before): it reads in whole chunks and drops the chunk in flight when
it stops, waits out its read timeout and five retries before a cancel is seen (63 s on a stalled line), and
trusts the server about how much to write (a 10 GB Content-Length or an endless body filled the disk). Here the
body is read on a transfer thread that appends each block as it arrives (unbuffered: every byte received is on
disk for the resume), refuses any byte past the size the repository lists, and checks a stop flag under the
same lock as each write. The calling thread polls cancel every POLL seconds; a cancel sets the flag and shuts
the socket down, which wakes a read blocked on a silent server. huggingface_hub still provides the HTTP client
(proxies from the environment, redirects to a CDN, its request headers) and its error classes.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

from ..errors import Cancelled
from ..io.fileio import open_own_file

CANCELLED = "download cancelled; it resumes where it stopped next time"
POLL = 0.1  # seconds between cancel checks and progress reports on the calling thread
RETRIES = 3  # attempts in a row that bring no new byte before a network failure is reported
RETRY_PAUSE = 1.0  # seconds between attempts
# Answers worth asking again (a busy hub or CDN); huggingface_hub's http_get retried 408 and 429.
TRANSIENT_STATUS = (408, 429, 500, 502, 503, 504)


class Overflow(Exception):
    """The server sends (or announces) more bytes than the repository lists for the file."""


class WrongSize(Exception):
    """The server announces fewer bytes, or another range, than the repository lists for the file."""


class _Attempt(threading.Thread):
    """One GET of bytes [have, size): appends to `part`; stop() makes sure nothing more is written."""

    def __init__(self, url: str, headers: dict, part: Path, have: int, size: int, timeout: float):
        super().__init__(daemon=True, name="model-download")
        self.url, self.headers, self.part, self.size, self.timeout = url, headers, part, size, timeout
        self.position = have  # bytes in the part file
        self.error: BaseException | None = None
        self._stopped = False
        self._lock = threading.Lock()
        self._socket: socket.socket | None = None

    def run(self) -> None:
        try:
            self._transfer()
        except BaseException as e:  # handed to the calling thread, which decides
            self.error = e

    def stop(self) -> None:
        with self._lock:  # after this no write starts, and none is half done
            self._stopped = True
            sock = self._socket
        if sock is not None:
            try:  # the base class's shutdown: it leaves a TLS socket's state to the reading thread
                socket.socket.shutdown(sock, socket.SHUT_RDWR)
            except OSError:
                pass

    def _transfer(self) -> None:
        import httpx2
        from huggingface_hub.utils import get_session, hf_raise_for_status

        have = self.position
        headers = dict(self.headers, **{"Accept-Encoding": "identity"})  # Content-Length is then the body's
        if have:
            headers["Range"] = f"bytes={have}-"
        with get_session().stream("GET", self.url, headers=headers, timeout=httpx2.Timeout(self.timeout)) as r:
            stream = r.extensions.get("network_stream")
            with self._lock:
                if self._stopped:
                    return
                self._socket = stream.get_extra_info("socket") if stream is not None else None
            hf_raise_for_status(r)
            start = have if r.status_code == 206 else 0  # a 200 to a range request: the whole file again
            if r.status_code == 206 and _range_start(r.headers.get("Content-Range")) != have:
                raise WrongSize(f"answered another range ({r.headers.get('Content-Range')})")
            announced = r.headers.get("Content-Length")
            if announced is not None and announced.isdigit() and not r.headers.get("Content-Encoding"):
                if int(announced) > self.size - start:
                    raise Overflow(f"the server announced {int(announced) + start} bytes")
                if int(announced) < self.size - start:
                    raise WrongSize(f"the server sends {int(announced) + start} bytes")
            with self._lock:
                if self._stopped:
                    return
                out = open_own_file(self.part, truncate=not start)  # never through a link planted at its name
                out.seek(start)
                out.truncate()
                self.position = start
            with out:
                for block in r.iter_bytes():
                    with self._lock:
                        if self._stopped:
                            return
                        if len(block) > self.size - self.position:
                            raise Overflow("the server sent more")
                        view = memoryview(block)
                        while view:  # an unbuffered write may take less than it is given
                            done = out.write(view)
                            self.position += done
                            view = view[done:]


def _range_start(content_range: str | None) -> int | None:
    if content_range is None:
        return None
    try:  # "bytes 123-456/789"
        return int(content_range.split()[1].split("-")[0])
    except (AttributeError, IndexError, ValueError):
        return None


def fetch_into(url: str, headers: dict, part: Path, size: int, timeout: float,
               moved: Callable[[int], None], cancelled: Callable[[], bool]) -> None:
    """Bring `part` to `size` bytes from `url`, resuming from what it holds. `moved(n)` is told every change
    (n < 0 when a server restarts the file); `cancelled()` is polled every POLL s. Raises Overflow / WrongSize
    (the caller removes the part), the last network error after RETRIES attempts without progress, the hub's
    HTTP error, or Cancelled within about POLL s of cancelled() turning true (the bytes received are kept)."""
    import httpx2

    have = part.stat().st_size if part.is_file() else 0
    fruitless = 0
    while have < size:
        begun = have
        attempt = _Attempt(url, headers, part, have, size, timeout)
        attempt.start()
        try:
            while attempt.is_alive():
                attempt.join(POLL)
                have = _report(attempt.position, have, moved)  # moved() may raise Cancelled too
                if cancelled():
                    raise Cancelled(CANCELLED)
        except BaseException:
            attempt.stop()
            attempt.join(1.0)  # a blocked read wakes at once; a connect may not, but it writes nothing
            raise
        progressed = attempt.position > begun
        have = _report(attempt.position, have, moved)
        error = attempt.error
        if error is None and have >= size:
            return
        transient = isinstance(error, httpx2.TransportError) or _status(error) in TRANSIENT_STATUS
        if error is not None and not transient:
            raise error  # too much, wrong size, refused, a full disk: no retry helps
        fruitless = 0 if progressed else fruitless + 1
        if fruitless >= RETRIES:
            raise error or ConnectionError(f"the server closed the connection at byte {have} of {size}")
        deadline = time.monotonic() + RETRY_PAUSE
        while time.monotonic() < deadline:
            if cancelled():
                raise Cancelled(CANCELLED)
            time.sleep(POLL)


def _status(error: BaseException | None) -> int | None:
    return getattr(getattr(error, "response", None), "status_code", None)


def _report(position: int, have: int, moved: Callable[[int], None]) -> int:
    if position != have:
        moved(position - have)
    return position


def run_cancellable(fn: Callable[[], object], cancelled: Callable[[], bool] | None):
    """fn() on a worker thread, its result or its exception here; Cancelled within POLL s of cancelled() turning
    true, whatever fn waits for (a listing from a server that accepted and went quiet). fn must write nothing:
    after a cancel it is left to finish on its own."""
    if cancelled is None:
        return fn()
    outcome: list = []

    def call() -> None:
        try:
            outcome.append((True, fn()))
        except BaseException as e:
            outcome.append((False, e))

    worker = threading.Thread(target=call, daemon=True, name="hub-request")
    worker.start()
    while worker.is_alive():
        worker.join(POLL)
        if not outcome and cancelled():
            raise Cancelled(CANCELLED)
    ok, value = outcome[0]
    if not ok:
        raise value
    return value
