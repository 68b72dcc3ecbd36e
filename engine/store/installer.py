"""Install a model: list the repository, check the disk, download (resumable), verify, convert, move into place.

Nothing appears under the store's model names until the bundle is complete: the checkpoint is fetched into
`.downloads/<name>/` (kept across cancels and restarts so the next attempt resumes), converted into
`.installing-<name>-<pid>/`, and renamed into place at the end; the raw checkpoint is then removed unless the
caller keeps it.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from ..io.fileio import read_own_file, write_own_file
from .catalogue import CATALOGUE, DEFAULT_PRECISION, WHISPER_CATALOGUE, WHISPER_PRECISION, find_entry
from .hub import (
    DownloadProgress,
    HubError,
    RemoteFile,
    RemoteRepo,
    bytes_present,
    endpoint_url,
    fetch_repo,
    format_bytes,
    repo_listing,
)
from .hub_names import redact, without_credentials
from .locks import disk_error, download_lock
from .store import SOURCE, InstalledModel, ModelStore, StoreError, check_name
from .transfer import run_cancellable

Progress = Callable[[float, str], None]
DOWNLOAD_SHARE = 0.85  # of the overall progress bar; conversion takes the rest
PENDING = "pending.json"
PENDING_MAX_BYTES = 4 << 20  # a listing of a few hundred files is a few kB
MARGIN = 50_000_000  # bytes kept free beyond the estimate (manifest, temporary files, the rest of the system)


@dataclass(frozen=True)
class PendingDownload:
    """A download that was started and not finished (cancelled, interrupted, the app closed)."""

    name: str
    repo_id: str
    revision: str
    precision: str
    total_bytes: int
    done_bytes: int
    folder: Path


def free_bytes(folder: Path) -> int:
    """Free space on the disk that holds folder (its nearest existing parent)."""
    probe = folder
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return shutil.disk_usage(probe).free


def estimated_bundle_bytes(repo: RemoteRepo, precision: str, repo_id: str) -> int:
    """Converted size: the catalogue's figure, else the download size times the 0.6B-Base ratio."""
    entry = find_entry(repo_id)
    size = entry.bundle_size(precision) if entry is not None else None
    if entry is not None and entry.recognises_speech:
        size = entry.bundle_size(precision) or entry.bundle_size(WHISPER_PRECISION)
    if size is not None:
        return int(size)
    ref = CATALOGUE[0]
    ratio = ref.bundle_bytes.get(precision, max(ref.bundle_bytes.values())) / ref.download_bytes
    return int(repo.size * ratio)


def is_whisper_listing(paths: set[str]) -> bool:
    """A repository laid out as a Whisper checkpoint (a feature extractor's config, no speech tokenizer)."""
    return "preprocessor_config.json" in paths and not any(p.startswith("speech_tokenizer/") for p in paths)


def whisper_download(repo: RemoteRepo, precision: str) -> tuple[RemoteRepo, str]:
    """Only the files the converter reads (Whisper repositories also hold the same weights for other frameworks
    and in other precisions), and the precision it converts to (8-bit is not offered for Whisper: fp16)."""
    from ..convert.whisper import PRECISIONS, REQUIRED_FILES, TOKENIZER_FILES

    have = {f.path for f in repo.files}
    missing = [f for f in REQUIRED_FILES if f not in have]
    if missing:
        raise HubError(f"{repo.repo_id} is not a complete Whisper checkpoint: it has no {', '.join(missing)}.")
    wanted = (set(REQUIRED_FILES) | set(TOKENIZER_FILES)) - {"tokenizer.json"}  # vocab.json is what is read
    files = tuple(f for f in repo.files if f.path in wanted)
    return RemoteRepo(repo.repo_id, repo.revision, files), precision if precision in PRECISIONS else WHISPER_PRECISION


def repo_for(source: str) -> str:
    """A repository id from a catalogue name or a repository id."""
    entry = find_entry(source)
    if entry is not None:
        return entry.repo_id
    if "/" not in source:
        names = ", ".join(e.name for e in CATALOGUE + WHISPER_CATALOGUE)
        raise StoreError(f"{source!r} is neither a repository id (OWNER/NAME) nor a catalogue model ({names}).")
    return source


def pending_downloads(store: ModelStore) -> list[PendingDownload]:
    """Unfinished downloads in the store; unreadable ones are left out (StoreError if the folder cannot be read)."""
    out: list[PendingDownload] = []
    root = store.downloads_dir()
    with store.reading():
        if not root.is_dir():
            return out
        folders = sorted(root.iterdir())
    for d in folders:
        try:
            info = dict(_read_pending(d))
            files = info.pop("files")
            repo = RemoteRepo(info["repo_id"], info["revision"], tuple(_remote_file(f) for f in files))
            out.append(PendingDownload(info["name"], repo.repo_id, repo.revision, info["precision"], repo.size,
                                       bytes_present(repo, d), d))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
    return out


def _read_pending(folder: Path) -> dict:
    """A download folder's pending.json; {} unless it is a small regular file holding an object (a FIFO would
    block the reader, a huge file fill its memory)."""
    try:
        info = json.loads(read_own_file(folder / PENDING, PENDING_MAX_BYTES).decode("utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}
    return info if isinstance(info, dict) else {}


def _remote_file(d: dict) -> RemoteFile:
    return RemoteFile(d["path"], int(d["size"]), d.get("sha256"), d.get("git_sha1"))


def discard_download(store: ModelStore, name: str) -> bool:
    folder = store.downloads_dir() / check_name(name)
    if not folder.is_dir():
        return False  # nothing to remove: no lock to take (a read-only folder is not "starting a download")
    with download_lock(store, name, "removing the unfinished download"):  # not while it is being downloaded
        if not folder.is_dir():
            return False
        shutil.rmtree(folder, ignore_errors=True)
    return True


def install(
    source: str,
    name: str | None = None,
    precision: str = DEFAULT_PRECISION,
    store: ModelStore | None = None,
    endpoint: str | None = None,
    token: str | None = None,
    keep_checkpoint: bool = False,
    progress: Progress | None = None,
    on_download: Callable[[DownloadProgress], None] | None = None,
    cancel: Callable[[], bool] | None = None,
) -> InstalledModel:
    """Download `source` (catalogue name or repository id) and install it as `name`; returns the model."""
    from ..runtime.bundle import OFFERED_PRECISIONS as PRECISIONS

    store = store or ModelStore()
    if precision not in PRECISIONS:
        raise StoreError(f"Unknown precision {precision!r}; choose one of {', '.join(PRECISIONS)}.")
    repo_id = repo_for(source)
    name = check_name(name or repo_id.rstrip("/").split("/")[-1])
    if store.get(name) is not None:
        raise StoreError(f"A model called {name!r} is already installed; remove it first or choose another --name.")
    if (store.root / name).exists():
        raise StoreError(f"{store.root / name} already exists and is not a model; choose another --name.")
    with download_lock(store, name):
        return _install(store, repo_id, name, precision, endpoint_url(endpoint), token, keep_checkpoint,
                        progress or (lambda _f, _m: None), on_download, cancel)


def _install(store: ModelStore, repo_id: str, name: str, precision: str, endpoint: str, token: str | None,
             keep_checkpoint: bool, report: Progress, on_download: Callable[[DownloadProgress], None] | None,
             cancel: Callable[[], bool] | None) -> InstalledModel:
    from ..convert import convert_checkpoint
    from ..convert.checkpoint import REQUIRED_FILES

    report(0.0, f"asking {redact(endpoint)} for {repo_id}")
    repo = run_cancellable(lambda: repo_listing(repo_id, endpoint=endpoint, token=token), cancel)
    have = {f.path for f in repo.files}
    if is_whisper_listing(have):
        repo, precision = whisper_download(repo, precision)
        report(0.0, f"{repo_id} is a Whisper (speech recognition) model: converting it to {precision}")
    else:
        missing = [f for f in REQUIRED_FILES if f not in have]
        if missing:
            raise HubError(f"{repo_id} is not a Qwen3-TTS 12 Hz checkpoint: it has no {', '.join(missing)}.")

    raw = store.downloads_dir() / name
    _claim_download_folder(raw, repo, name, precision)
    to_fetch = repo.size - bytes_present(repo, raw)
    bundle = estimated_bundle_bytes(repo, precision, repo_id)
    need = to_fetch + bundle + MARGIN
    free = free_bytes(store.root)
    if free < need:
        raise StoreError(
            f"Not enough free space in {store.root}: {name} needs {format_bytes(need)} "
            f"({format_bytes(to_fetch)} to download, about {format_bytes(bundle)} converted), "
            f"{format_bytes(free)} is free."
        )

    def download_progress(p: DownloadProgress) -> None:
        if on_download is not None:
            on_download(p)
        report(DOWNLOAD_SHARE * p.done / max(p.total, 1), p.describe())

    try:
        fetch_repo(repo, raw, endpoint=endpoint, token=token, progress=download_progress, cancel=cancel)
    except OSError as e:
        raise disk_error(e, store.root, "downloading") from None

    _sweep_dead_work(store.root, name)
    work = store.root / f".installing-{name}-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    try:
        bundle_dir = convert_checkpoint(
            raw, work / name, precision=precision, cancel=cancel,
            progress=lambda f, m: report(DOWNLOAD_SHARE + (1 - DOWNLOAD_SHARE) * f, m),
        )
        source_info = {"repo_id": repo_id, "revision": repo.revision, "endpoint": without_credentials(endpoint),
                       "precision": precision}
        write_own_file(bundle_dir / SOURCE, json.dumps(source_info, indent=1).encode("utf-8"))
        final = store.root / name
        if final.exists():
            raise StoreError(f"{final} appeared while converting; {name} was not installed.")
        os.replace(bundle_dir, final)
    except OSError as e:
        raise disk_error(e, store.root, "converting") from None
    finally:
        shutil.rmtree(work, ignore_errors=True)

    if keep_checkpoint:
        kept = store.root / "checkpoints" / name
        kept.parent.mkdir(parents=True, exist_ok=True)
        (raw / PENDING).unlink(missing_ok=True)
        shutil.rmtree(kept, ignore_errors=True)
        os.replace(raw, kept)
    else:
        shutil.rmtree(raw, ignore_errors=True)
    _remove_if_empty(store.downloads_dir())
    report(1.0, f"installed {name}")
    model = store.get(name)
    assert model is not None
    return model


def _claim_download_folder(raw: Path, repo: RemoteRepo, name: str, precision: str) -> None:
    """Reuse partial files only if they belong to this very commit of this repository."""
    old = _read_pending(raw)
    same = bool(old) and old.get("repo_id") == repo.repo_id and old.get("revision") == repo.revision
    if raw.exists() and not same:
        shutil.rmtree(raw, ignore_errors=True)
    raw.mkdir(parents=True, exist_ok=True)
    info = {"name": name, "repo_id": repo.repo_id, "revision": repo.revision, "precision": precision,
            "files": [asdict(f) for f in repo.files]}
    write_own_file(raw / PENDING, json.dumps(info, indent=1).encode("utf-8"))


def _sweep_dead_work(root: Path, name: str) -> None:
    """Conversions of this name left by a process that was killed (its pid no longer runs)."""
    for d in root.glob(f".installing-{name}-*"):
        pid = d.name.rsplit("-", 1)[-1]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(d, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True  # exists but not ours, or cannot tell: leave it
    return True


def _remove_if_empty(folder: Path) -> None:
    try:
        folder.rmdir()
    except OSError:
        pass



