"""Fetching a checkpoint repository from a Hugging Face hub (or a mirror) through huggingface_hub.

Why not hf_hub_download: in huggingface_hub 2.x a failed or cancelled download deletes its partial file (each
attempt writes to a uniquely named temporary file), so a 4 GB download interrupted at 90 % starts again from
zero. We keep our own `<file>.part` next to the target and fill it with Range requests (transfer.py: never
past the listed size, every byte received kept, cancel seen within 0.1 s); huggingface_hub still provides the
listing, the HTTP client (redirects, proxies from the environment) and the hub's error codes.
Every file is then checked against the repository's metadata: size, and sha256 (LFS files) or the git blob
id (small files).
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..errors import Cancelled, EngineError
from .hub_names import UnsafeName, check_remote_path, check_revision, inside, redact, redact_url_logs, shown
from .transfer import Overflow, WrongSize, fetch_into

DEFAULT_ENDPOINT = "https://huggingface.co"
# What the converter reads; other files in a repository (README, images, .gitattributes) are not fetched.
WANTED_SUFFIXES = (".json", ".txt", ".safetensors")
PART_SUFFIX = ".part"
LIST_TIMEOUT = 30.0  # seconds; file transfers use huggingface_hub's read timeout (HF_HUB_DOWNLOAD_TIMEOUT, 10 s)


redact_url_logs()


class HubError(EngineError):
    """A repository cannot be fetched: missing, refused, unreachable, or its files do not match.

    Its message never shows a mirror's credentials (https://user:pass@host becomes https://***@host)."""

    def __init__(self, message: str):
        super().__init__(redact(message))


@dataclass(frozen=True)
class RemoteFile:
    path: str  # relative path in the repository ("speech_tokenizer/model.safetensors")
    size: int
    sha256: str | None  # LFS files
    git_sha1: str | None  # small files: the git blob id

    def __post_init__(self) -> None:  # every RemoteFile, from a listing or from pending.json, is a safe name
        check_remote_path(self.path)
        if not isinstance(self.size, int) or self.size < 0:
            raise UnsafeName(f"has no valid size ({self.size!r})")


@dataclass(frozen=True)
class RemoteRepo:
    repo_id: str
    revision: str  # the commit the files are fetched at (so a push mid-download cannot mix versions)
    files: tuple[RemoteFile, ...]

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)


@dataclass(frozen=True)
class DownloadProgress:
    done: int  # bytes on disk for the wanted files (resumed bytes included)
    total: int
    bytes_per_second: float  # over the last few seconds; 0 until measured
    file: str  # the file being fetched
    stage: str = "downloading"  # or "checking" (its sha256, a few seconds for a large file)

    @property
    def seconds_left(self) -> float | None:
        if self.bytes_per_second <= 0:
            return None
        return max(self.total - self.done, 0) / self.bytes_per_second

    def describe(self) -> str:
        text = f"{self.stage} {self.file}: {format_bytes(self.done)} of {format_bytes(self.total)}"
        if self.bytes_per_second > 0:
            text += f", {format_bytes(self.bytes_per_second)}/s"
            left = self.seconds_left
            if left is not None:
                text += f", {format_duration(left)} left"
        return text


def format_bytes(n: float) -> str:
    for unit in ("bytes", "KB", "MB", "GB"):
        if abs(n) < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"  # unreachable


def format_duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


def endpoint_url(endpoint: str | None = None) -> str:
    """The hub to talk to: the given one, else HF_ENDPOINT (mirrors), else huggingface.co."""
    return (endpoint or os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def _explain(e: BaseException, repo_id: str, endpoint: str, token: str | None) -> HubError:
    """One line for the user from whatever huggingface_hub / httpx raised."""
    import httpx2
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        OfflineModeIsEnabled,
        RepositoryNotFoundError,
    )

    if isinstance(e, OfflineModeIsEnabled):
        return HubError("Downloads are switched off (HF_HUB_OFFLINE is set); unset it to download models.")
    status = getattr(getattr(e, "response", None), "status_code", None)
    if isinstance(e, GatedRepoError):
        if token:
            return HubError(f"The hub refused the token for {repo_id}: it has no access to this gated repository.")
        return HubError(f"{repo_id} is a gated repository: accept its terms on the hub and give a token "
                        "(--token or HF_TOKEN).")
    if isinstance(e, RepositoryNotFoundError):
        if status == 401 and token:
            return HubError(f"The hub refused the token for {repo_id}, or the repository does not exist.")
        if status == 401:
            return HubError(f"{repo_id} was not found on {endpoint}; if it is private or gated, give a token "
                            "(--token or HF_TOKEN).")
        return HubError(f"Repository {repo_id} does not exist on {endpoint}.")
    if isinstance(e, HfHubHTTPError) and status in (401, 403) and token:
        return HubError(f"The hub refused the token for {repo_id} (HTTP {status}); check it, or give a new one.")
    if isinstance(e, HfHubHTTPError) and status in (401, 403):
        return HubError(f"{repo_id} needs a token (HTTP {status}): give --token or set HF_TOKEN.")
    if isinstance(e, HfHubHTTPError) and status == 404:
        return HubError(f"The hub has no such repository, revision or file for {repo_id} (HTTP 404): check the "
                        "name (and the mirror address, HF_ENDPOINT).")
    if isinstance(e, HfHubHTTPError) and status is not None and 400 <= status < 500 and status not in (408, 429):
        return HubError(f"The hub refused the request for {repo_id} (HTTP {status}).")
    if isinstance(e, HfHubHTTPError):
        return HubError(f"The hub answered HTTP {status} for {repo_id}; try again later.")
    if isinstance(e, httpx2.HTTPError | ConnectionError | TimeoutError):
        return HubError(f"Cannot reach {endpoint} ({type(e).__name__}); check the network, the proxy or the mirror "
                        "address (HF_ENDPOINT).")
    return HubError(f"Cannot fetch {repo_id}: {str(e).splitlines()[0] if str(e) else type(e).__name__}.")


def repo_listing(repo_id: str, endpoint: str | None = None, token: str | None = None,
                 revision: str | None = None) -> RemoteRepo:
    """The files of a repository (the ones the converter needs) with their sizes and checksums."""
    import httpx2
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError

    endpoint = endpoint_url(endpoint)
    _check_repo_id(repo_id)
    try:
        info = HfApi(endpoint=endpoint, token=token or None).model_info(repo_id, revision=revision,
                                                                         files_metadata=True, timeout=LIST_TIMEOUT)
    except (HfHubHTTPError, httpx2.HTTPError, OSError, ValueError) as e:  # hub, network, bad id: one line
        raise _explain(e, repo_id, endpoint, token) from None
    files = []
    for s in info.siblings or []:
        name = s.rfilename
        try:  # any name that could not be written inside the download folder stops the whole download
            check_remote_path(name)
        except UnsafeName as e:
            raise _unsafe(repo_id, endpoint, f"a file name that {e}: {shown(name)}") from None  # "that has a '..' part"
        if not name.endswith(WANTED_SUFFIXES) or s.size is None:
            continue
        try:
            files.append(RemoteFile(name, int(s.size), s.lfs.sha256 if s.lfs else None,
                                    None if s.lfs else s.blob_id))
        except (UnsafeName, ValueError, TypeError) as e:
            raise _unsafe(repo_id, endpoint, f"a file {shown(name)} that {e}") from None
    commit = info.sha or revision or "main"
    try:
        check_revision(commit)
    except UnsafeName as e:
        raise _unsafe(repo_id, endpoint, f"a revision {shown(commit)} that {e}") from None
    return RemoteRepo(repo_id, commit, tuple(sorted(files, key=lambda f: f.path)))


def _unsafe(repo_id: str, endpoint: str, what: str) -> HubError:
    return HubError(f"{repo_id} on {endpoint} lists {what}; nothing was downloaded.")


def _check_repo_id(repo_id: str) -> None:
    parts = repo_id.split("/")
    if len(parts) != 2 or not all(parts) or any(p in (".", "..") for p in parts):
        raise HubError(f"{repo_id!r} is not a repository id; write it as OWNER/NAME, e.g. "
                       "Qwen/Qwen3-TTS-12Hz-0.6B-Base.")


def bytes_present(repo: RemoteRepo, dest: Path) -> int:
    """Bytes already on disk (complete files and resumable parts): what a restart does not fetch again."""
    total = 0
    for f in repo.files:
        done = dest / f.path
        part = done.with_name(done.name + PART_SUFFIX)
        if done.is_file() and done.stat().st_size == f.size:
            total += f.size
        elif part.is_file():
            total += min(part.stat().st_size, f.size)
    return total


class _Meter:
    """Counts bytes for the progress callback and raises Cancelled between chunks."""

    def __init__(self, total: int, done: int, progress: Callable[[DownloadProgress], None] | None,
                 cancel: Callable[[], bool] | None):
        self.total, self.done = total, done
        self.progress, self.cancel = progress, cancel
        self.file = ""
        self._window: list[tuple[float, int]] = [(time.monotonic(), done)]

    def add(self, n: int) -> None:
        if self.cancel is not None and self.cancel():
            raise Cancelled("download cancelled; it resumes where it stopped next time")
        self.done += n
        now = time.monotonic()
        self._window.append((now, self.done))
        while len(self._window) > 2 and now - self._window[0][0] > 5.0:
            self._window.pop(0)
        if self.progress is not None:  # at most every transfer.POLL s: callers throttle their own display
            self.progress(DownloadProgress(self.done, self.total, self.speed(now), self.file))

    def report(self, stage: str) -> None:
        if self.progress is not None:
            self.progress(DownloadProgress(self.done, self.total, 0.0, self.file, stage))

    def speed(self, now: float) -> float:
        t0, b0 = self._window[0]
        return (self.done - b0) / (now - t0) if now - t0 >= 0.5 else 0.0


def fetch_repo(repo: RemoteRepo, dest: Path, endpoint: str | None = None, token: str | None = None,
               progress: Callable[[DownloadProgress], None] | None = None,
               cancel: Callable[[], bool] | None = None) -> Path:
    """Download every file of `repo` into `dest`, resuming partial files; verify each one when complete.

    A cancel (Cancelled) or a network failure keeps the partial files, so calling again resumes."""
    endpoint = endpoint_url(endpoint)
    dest.mkdir(parents=True, exist_ok=True)
    meter = _Meter(repo.size, bytes_present(repo, dest), progress, cancel)
    for f in repo.files:
        try:
            target = inside(dest, f.path)
        except (UnsafeName, OSError) as e:
            raise _unsafe(repo.repo_id, endpoint, f"a file {shown(f.path)} that {e}") from None
        if target.is_file() and target.stat().st_size == f.size:
            continue  # verified when it was completed
        meter.file = f.path
        _fetch_file(repo, f, target, endpoint, token, meter)
    return dest


def _fetch_file(repo: RemoteRepo, f: RemoteFile, target: Path, endpoint: str, token: str | None,
                meter: _Meter) -> None:
    import httpx2
    from huggingface_hub import constants, hf_hub_url
    from huggingface_hub.errors import HfHubHTTPError
    from huggingface_hub.utils import build_hf_headers

    target.parent.mkdir(parents=True, exist_ok=True)
    part = target.with_name(target.name + PART_SUFFIX)
    have = part.stat().st_size if part.is_file() else 0
    if have > f.size:  # not ours, or the repository changed: start this file again
        meter.done -= f.size
        part.unlink()
    url = hf_hub_url(repo.repo_id, f.path, revision=repo.revision, endpoint=endpoint)
    headers = build_hf_headers(token=token or None)
    never = lambda: False  # noqa: E731
    try:
        fetch_into(url, headers, part, f.size, float(constants.HF_HUB_DOWNLOAD_TIMEOUT), meter.add,
                   meter.cancel or never)
    except (Overflow, WrongSize) as e:  # garbage is not kept to resume from
        part.unlink(missing_ok=True)
        raise HubError(f"{f.path} of {repo.repo_id} arrived with the wrong size ({e}; the repository lists "
                       f"{f.size} bytes); the partial file was removed, try again.") from None
    except (HfHubHTTPError, httpx2.HTTPError, ConnectionError, TimeoutError) as e:
        raise _explain(e, repo.repo_id, endpoint, token) from None
    meter.report("checking")
    _verify(repo, f, part)
    os.replace(part, target)


def _verify(repo: RemoteRepo, f: RemoteFile, part: Path) -> None:
    size = part.stat().st_size
    problem = None
    if size != f.size:
        problem = f"has {size} bytes, the repository says {f.size}"
    elif f.sha256 is not None and file_sha256(part) != f.sha256:
        problem = "does not match its sha256 in the repository"
    elif f.sha256 is None and f.git_sha1 is not None and git_blob_sha1(part) != f.git_sha1:
        problem = "does not match its git blob id in the repository"
    if problem:
        part.unlink(missing_ok=True)
        raise HubError(f"{f.path} of {repo.repo_id} {problem}; the download was removed, try again.")


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            h.update(block)
    return h.hexdigest()


def git_blob_sha1(path: Path) -> str:
    """The id git (and the hub's metadata) gives a small file: sha1 of 'blob <size>\\0' + content."""
    h = hashlib.sha1(f"blob {path.stat().st_size}\0".encode())
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            h.update(block)
    return h.hexdigest()
