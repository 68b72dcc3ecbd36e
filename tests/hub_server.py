"""A local stand-in for the Hugging Face hub on 127.0.0.1, serving the two endpoints huggingface_hub 2.x uses
to list and fetch a model repository:

    GET  /api/models/OWNER/NAME[/revision/REV]?blobs=True   -> {"id", "sha", "siblings": [{rfilename, size,
                                                               blobId, lfs: {size, sha256, pointerSize}}]}
    GET|HEAD /OWNER/NAME/resolve/REV/PATH                    -> the file (Range requests answered with 206)

Errors carry the headers huggingface_hub turns into its exceptions (X-Error-Code RepoNotFound / GatedRepo,
X-Error-Message for a refused token). Faults for tests: drop a connection after N bytes of a file (once),
serve different bytes than the listing promises, require a token; a slow line, a stall mid-file, a listing that
hangs, a lying Content-Length or an endless body. Every request is recorded.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

LFS_SUFFIXES = (".safetensors",)


@dataclass
class Repo:
    files: dict[str, bytes]
    sha: str = "0123456789abcdef0123456789abcdef01234567"
    token: str | None = None  # required bearer token (a gated repository) when set
    served: dict[str, bytes] = field(default_factory=dict)  # bytes actually sent instead of files[path]

    @classmethod
    def from_folder(cls, folder: Path, **kw) -> Repo:
        files = {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
        return cls(files, **kw)

    def listing(self, repo_id: str) -> dict:
        siblings = []
        for path, data in self.files.items():
            s = {"rfilename": path, "size": len(data),
                 "blobId": hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()}
            if path.endswith(LFS_SUFFIXES):
                s["lfs"] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest(), "pointerSize": 134}
            siblings.append(s)
        return {"id": repo_id, "modelId": repo_id, "sha": self.sha, "private": False, "siblings": siblings}


class HubServer:
    """`with HubServer({"Qwen/x": Repo(...)}) as hub: hub.url` — serves until the block ends."""

    def __init__(self, repos: dict[str, Repo]):
        self.repos = repos
        self.requests: list[tuple[str, str, str | None]] = []  # (method, path, Range header)
        self.drop_after: dict[str, int] = {}  # path -> bytes sent before the connection is cut (once)
        self.seconds_per_block = 0.0  # a slow line: this pause after every 64 KB of a file
        self.stall_after: dict[str, tuple[int, float]] = {}  # path -> (bytes, seconds silent before hanging up), once
        # Misbehaving servers: announce this Content-Length for a file (a lie), then send its bytes and go on
        self.announce: dict[str, int] = {}
        self.endless: set[str] = set()  # no Content-Length: the file, then zeros until the client hangs up
        self.garbage_limit = 64 << 20  # the most zeros sent after a file (so a client that keeps reading ends)
        self.garbage_sent: dict[str, int] = {}  # path -> zeros sent past the file
        self.busy: dict[str, list[int]] = {}  # path -> HTTP statuses to answer (one per request) before serving
        self.hang_listing = 0.0  # seconds to wait before answering a listing (a server that accepts and hangs)
        self.lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._server.handle_error = lambda request, address: None  # a client that hung up is not news
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> HubServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def file_requests(self, path: str) -> list[tuple[str, str, str | None]]:
        return [r for r in self.requests if r[1].split("?")[0].endswith("/" + path)]

    def _hostile_name(self, path: str) -> tuple[Repo, str] | None:
        """The repository file a request is for when its listed name walks out of the URL (`../../x`), as a
        client that normalises the URL asks for it: a mirror that wants such names fetched serves them."""
        for repo_id, repo in self.repos.items():
            for name in repo.files:
                if ".." in name.split("/") and posixpath.normpath(f"/{repo_id}/resolve/{repo.sha}/{name}") == path:
                    return repo, name
        return None

    def _handler(self):
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # quiet
                pass

            def do_HEAD(self) -> None:
                self._serve(head=True)

            def do_GET(self) -> None:
                self._serve(head=False)

            def _serve(self, head: bool) -> None:
                with hub.lock:
                    hub.requests.append((self.command, self.path, self.headers.get("Range")))
                path = urlsplit(self.path).path  # absolute-form when we are asked as a proxy
                m = re.fullmatch(r"/api/models/([^/]+/[^/]+)(?:/revision/([^/]+))?", path)
                if m:
                    if hub.hang_listing:
                        time.sleep(hub.hang_listing)
                    repo = self._repo(m.group(1))
                    if repo is not None:
                        self._send(200, json.dumps(repo.listing(m.group(1))).encode(), "application/json", head)
                    return
                hostile = hub._hostile_name(unquote(path))
                if hostile is not None:  # a listed name with '..' in it: the client normalised the URL
                    self._file(*hostile, head)
                    return
                m = re.fullmatch(r"/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", path)
                if m:
                    repo = self._repo(m.group(1))
                    if repo is None:
                        return
                    rel = unquote(m.group(3))
                    if rel not in repo.files:
                        self._error(404, "EntryNotFound", "Entry not found")
                        return
                    with hub.lock:
                        status = hub.busy[rel].pop(0) if hub.busy.get(rel) else None
                    if status is not None:
                        self._error(status, None, "Busy, try again")
                        return
                    self._file(repo, rel, head)
                    return
                self._error(404, None, "Not found")

            def _repo(self, repo_id: str) -> Repo | None:
                repo = hub.repos.get(repo_id)
                if repo is None:
                    self._error(404, "RepoNotFound", "Repository not found")
                    return None
                if repo.token is not None:
                    auth = self.headers.get("Authorization")
                    if auth is None:
                        self._error(401, "GatedRepo", "Access to this repository is restricted")
                        return None
                    if auth != f"Bearer {repo.token}":
                        self._error(401, None, "Invalid credentials in Authorization header")
                        return None
                return repo

            def _file(self, repo: Repo, rel: str, head: bool) -> None:
                data = repo.served.get(rel, repo.files[rel])
                start = 0
                rng = self.headers.get("Range")
                if rng:
                    start = int(re.fullmatch(r"bytes=(\d+)-\d*", rng).group(1))
                body = data[start:]
                garbage = rel in hub.endless or rel in hub.announce
                self.send_response(206 if rng else 200)
                if rel in hub.endless:
                    self.send_header("Connection", "close")
                    self.close_connection = True
                else:
                    self.send_header("Content-Length", str(hub.announce.get(rel, len(body))))
                if rng:
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                self.send_header("ETag", f'"{hashlib.sha256(repo.files[rel]).hexdigest()}"')
                self.send_header("X-Repo-Commit", repo.sha)
                self.send_header("Accept-Ranges", "bytes")
                self.end_headers()
                if head:
                    return
                with hub.lock:
                    cut = hub.drop_after.pop(rel, None)
                with hub.lock:
                    stall = hub.stall_after.pop(rel, None)
                if stall is not None:  # send some, then go quiet (a stalled line), then hang up
                    self.wfile.write(body[:stall[0]])
                    self.wfile.flush()
                    time.sleep(stall[1])
                    self.close_connection = True
                    return
                if cut is not None:
                    self.wfile.write(body[:cut])
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(2)  # the peer sees the body end early
                    return
                if garbage:
                    self._send_garbage(rel, body)
                    return
                if hub.seconds_per_block <= 0:
                    self.wfile.write(body)
                    return
                for at in range(0, len(body), 1 << 16):
                    self.wfile.write(body[at:at + (1 << 16)])
                    self.wfile.flush()
                    time.sleep(hub.seconds_per_block)

            def _send_garbage(self, rel: str, body: bytes) -> None:
                """The file, then zeros until the client hangs up (or garbage_limit): a body that goes on."""
                self.close_connection = True
                block = bytes(1 << 16)
                try:
                    self.wfile.write(body)
                    while hub.garbage_sent.get(rel, 0) < hub.garbage_limit:
                        self.wfile.write(block)
                        with hub.lock:
                            hub.garbage_sent[rel] = hub.garbage_sent.get(rel, 0) + len(block)
                except OSError:
                    pass  # the client stopped reading

            def _send(self, code: int, body: bytes, ctype: str, head: bool) -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if not head:
                    self.wfile.write(body)

            def _error(self, code: int, error_code: str | None, message: str) -> None:
                body = json.dumps({"error": message}).encode()
                self.send_response(code)
                if error_code:
                    self.send_header("X-Error-Code", error_code)
                self.send_header("X-Error-Message", message)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

        return Handler


def isolate_store(tmp_path: Path, monkeypatch, chunk: int) -> Path:
    """A private model store and hub cache under tmp_path, no token from the environment, `chunk`-byte download
    blocks, the hub reachable (run_tests.sh sets HF_HUB_OFFLINE=1 so nothing reaches a real hub; the tests talk
    to 127.0.0.1 only), and room on the disk (the catalogue's sizes are full-size, GBs; the fixture checkpoint is
    4 MB: a small CI disk must not refuse it)."""
    import huggingface_hub.constants

    from engine.store import installer

    monkeypatch.setenv("QWEN3TTS_MODELS_DIR", str(tmp_path / "models"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    monkeypatch.setattr(huggingface_hub.constants, "DOWNLOAD_CHUNK_SIZE", chunk)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(installer, "free_bytes", lambda folder: 1 << 40)
    return tmp_path
