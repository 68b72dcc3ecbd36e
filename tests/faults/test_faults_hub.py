"""A hostile or broken hub/mirror (tests/hub_server.py on 127.0.0.1): file names that walk out of the download
folder, credentials in a mirror address, bodies longer than listed, stalled and slow lines, two downloads of one
model at once. Nothing from the network is written outside its folder or past its listed size, nothing secret is
stored or shown, and every refusal is one line naming the repository.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path

import pytest

from engine.errors import Cancelled
from engine.store import HubError, ModelStore, StoreError, install, installer
from tests.hub_server import HubServer, Repo, isolate_store

from .conftest import ROOT, one_line, run_cli

TINY = ROOT / "tests" / "fixtures" / "models" / "tiny06b"
REPO = "Qwen/Qwen3-TTS-12Hz-0.6B-Base"
NAME = "Qwen3-TTS-12Hz-0.6B-Base"
CHUNK = 64 * 1024


@pytest.fixture
def env(tmp_path, monkeypatch):
    """A private store and hub cache, no token from the environment, small download chunks, room on the disk."""
    return isolate_store(tmp_path, monkeypatch, CHUNK)


def tiny_repo() -> Repo:
    assert (TINY / "config.json").is_file(), f"the committed fixture checkpoint {TINY} is missing"
    return Repo.from_folder(TINY)


def _tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _victim(env: Path) -> Path:
    victim = env / "home" / "victim"
    victim.mkdir(parents=True)
    (victim / "thesis.txt").write_text("four years of work")
    return victim


# --- file names from the network ---------------------------------------------------------------------------------

def hostile_name(label: str, victim: Path) -> str:
    """A listed file name of each kind; the download folder is <env>/models/.downloads/<name>/, three levels
    below <env>, and the victim's folder is <env>/home/victim."""
    return {
        "parent parts": "../../../home/victim/thesis.txt",
        "deep parent parts": "../" * 40 + str(victim / "thesis.txt").lstrip("/"),
        "inside then out": "speech_tokenizer/../../../../home/victim/x.safetensors",
        "absolute": str(victim / "thesis.txt"),
        "backslashes": "..\\..\\..\\home\\victim\\thesis.txt",
        "drive path": "C:\\victim\\thesis.txt",
        "drive with slashes": "C:/victim/thesis.txt",
        "NUL": "speech_tokenizer/config\x00.json",
        "empty part": "speech_tokenizer//extra.json",
        "dot part": "./speech_tokenizer/./extra.json",
        "over-long part": "a" * 300 + ".json",
        "over-long name": "/".join(["abcdefghij"] * 60) + ".json",
        "newline": "extra\n.json",
        "windows device": "speech_tokenizer/CON.json",
    }[label]


HOSTILE = ["parent parts", "deep parent parts", "inside then out", "absolute", "backslashes", "drive path",
           "drive with slashes", "NUL", "empty part", "dot part", "over-long part", "over-long name", "newline",
           "windows device"]


@pytest.mark.parametrize("label", HOSTILE)
def test_a_file_name_that_leaves_the_folder_stops_the_download(env, monkeypatch, label, capsys):
    victim = _victim(env)
    name = hostile_name(label, victim)
    repo = tiny_repo()
    repo.files[name] = b"overwritten by the mirror"
    before = _tree(env / "home")
    with HubServer({REPO: repo}) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        code, err = run_cli(capsys, "models", "download", REPO)
        line = one_line(err)
        assert code == 2 and REPO in line and "nothing was downloaded" in line, line
        with pytest.raises(HubError, match="lists a file"):
            install(REPO)
        assert not [r for r in server.requests if "/resolve/" in r[1]]  # no file was even asked for
    assert _tree(env / "home") == before
    models = env / "models"
    assert not models.exists() or not [p for p in models.rglob("*") if p.is_file() and ".locks" not in p.parts]
    assert ModelStore().installed() == []


def test_a_symlink_in_the_download_folder_does_not_lead_out(env, monkeypatch):
    """An unfinished download's folder holding a link to elsewhere (made by anything): files are not written
    through it."""
    victim = _victim(env)
    repo = tiny_repo()
    with HubServer({REPO: repo}) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        raw = ModelStore().downloads_dir() / NAME
        raw.mkdir(parents=True)
        files = [{"path": p, "size": len(d), "sha256": None, "git_sha1": None} for p, d in repo.files.items()]
        (raw / "pending.json").write_text(json.dumps({"name": NAME, "repo_id": REPO, "revision": repo.sha,
                                                      "precision": "fp16", "files": files}))
        (raw / "speech_tokenizer").symlink_to(victim, target_is_directory=True)
        before = _tree(victim)
        with pytest.raises(HubError, match="leads outside the download folder"):
            install(REPO)
    assert _tree(victim) == before


def test_a_pending_download_naming_a_path_outside_is_not_offered(env):
    from engine.store import pending_downloads

    raw = ModelStore().downloads_dir() / NAME
    raw.mkdir(parents=True)
    files = [{"path": "../../../etc/passwd.json", "size": 10}]
    (raw / "pending.json").write_text(json.dumps({"name": NAME, "repo_id": REPO, "revision": "abc",
                                                  "precision": "fp16", "files": files}))
    assert pending_downloads(ModelStore()) == []


def test_a_revision_that_is_not_a_plain_name_is_refused(env, monkeypatch):
    repo = tiny_repo()
    repo.sha = "../../../x"
    with HubServer({REPO: repo}) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        with pytest.raises(HubError, match="revision"):
            install(REPO)
        assert not [r for r in server.requests if "/resolve/" in r[1]]


# --- credentials in a mirror address ----------------------------------------------------------------------------


def test_mirror_credentials_are_never_stored_or_shown(env, monkeypatch, capsys, caplog):
    caplog.set_level(logging.DEBUG)
    with HubServer({REPO: tiny_repo()}) as server:
        secret_url = server.url.replace("http://", "http://mirror-user:s3cret-pass@")
        monkeypatch.setenv("HF_ENDPOINT", secret_url)
        messages: list[str] = []
        model = install(REPO, progress=lambda f, m: messages.append(m))
        source = (model.path / "source.json").read_text()
        assert json.loads(source)["endpoint"] == server.url
        code, err = run_cli(capsys, "models", "download", "Qwen/No-Such-Model")
        line = one_line(err)
        assert code == 2 and "does not exist" in line
    assert messages and not [m for m in messages if "s3cret" in m or "mirror-user" in m]
    assert "s3cret" not in line and "mirror-user" not in line
    assert "s3cret" not in caplog.text
    stored = [p for p in env.rglob("*") if p.is_file() and b"s3cret" in p.read_bytes()]
    assert stored == []


def test_credentials_in_an_unreachable_mirror_are_not_shown(env, monkeypatch, capsys):
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("HF_ENDPOINT", f"http://joe:hunter2@127.0.0.1:{port}")
    code, err = run_cli(capsys, "models", "download", "0.6B-Base")
    line = one_line(err)
    assert code == 2 and f"Cannot reach http://***@127.0.0.1:{port}" in line and "hunter2" not in line


# --- a server that sends more than it lists ---------------------------------------------------------------------

BIG_FILE = "speech_tokenizer/model.safetensors"


class _Watch:
    """The largest size a file (or its .part) under a folder reaches while a download runs (polled every few ms)."""

    def __init__(self, folder: Path, name: str):
        self.folder, self.name, self.largest, self._stop = folder, name, 0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for p in list(self.folder.rglob(Path(self.name).name + "*")) if self.folder.exists() else []:
                if not p.as_posix().endswith((self.name, self.name + ".part")):
                    continue
                try:
                    self.largest = max(self.largest, p.stat().st_size if p.is_file() else 0)
                except OSError:
                    pass
            time.sleep(0.002)

    def __enter__(self) -> _Watch:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(5)


@pytest.mark.parametrize("mode", ["10 GB Content-Length", "endless body"])
def test_a_body_longer_than_listed_is_never_written_and_its_partial_is_removed(env, monkeypatch, capsys, mode):
    repo = tiny_repo()
    size = len(repo.files[BIG_FILE])
    with HubServer({REPO: repo}) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        server.garbage_limit = 24 << 20  # the disk this stands for holds far less than what the server sends
        if mode == "endless body":
            server.endless.add(BIG_FILE)
        else:
            server.announce[BIG_FILE] = 10 * 10**9
        with _Watch(env / "models", BIG_FILE) as watch:
            code, err = run_cli(capsys, "models", "download", REPO)
        line = one_line(err)
    assert code == 2 and REPO in line and BIG_FILE in line and "wrong size" in line, line
    assert watch.largest <= size  # nothing past the listed size ever reached the disk
    assert not list((env / "models").rglob("model.safetensors.part"))  # garbage is not kept to resume from
    assert ModelStore().installed() == []


def test_a_body_that_goes_on_after_a_resume_is_refused_too(env, monkeypatch):
    """A partial file from before, then a server whose answer to the range runs past the end."""
    repo = tiny_repo()
    data = repo.files[BIG_FILE]
    with HubServer({REPO: repo}) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        server.drop_after[BIG_FILE] = 100_000
        with pytest.raises(HubError):  # the first attempt is cut; the retry meets the endless body
            server.endless.add(BIG_FILE)
            server.garbage_limit = 8 << 20
            install(REPO)
    parts = list((env / "models").rglob("*.part"))
    assert parts == [] and len(data) > 100_000


# --- cancel on a stalled or slow line ---------------------------------------------------------------------------


def _download_in_background(cancel: threading.Event, **kw) -> tuple[threading.Thread, list]:
    outcome: list = []

    def run() -> None:
        try:
            install(REPO, cancel=cancel.is_set, **kw)
            outcome.append("installed")
        except BaseException as e:
            outcome.append(e)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


def _part_of(env: Path, path: str) -> Path:
    return ModelStore().downloads_dir() / NAME / (path + ".part")


def _wait_for(predicate, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return False


@pytest.mark.parametrize("line", ["stalled mid-file", "slow (128 KB/s)", "listing never answered"])
def test_cancel_takes_effect_within_a_second_and_keeps_every_byte_received(env, monkeypatch, line):
    import huggingface_hub.constants

    # the library's own chunk size and a long read timeout: neither may be what ends the wait
    monkeypatch.setattr(huggingface_hub.constants, "DOWNLOAD_CHUNK_SIZE", 10 << 20)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DOWNLOAD_TIMEOUT", 60)
    repo = tiny_repo()
    sent = 3 * CHUNK + 1000  # not a whole number of blocks: bytes in flight are kept too
    with HubServer({REPO: repo}) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        if line == "stalled mid-file":
            server.stall_after[BIG_FILE] = (sent, 60.0)
        elif line == "slow (128 KB/s)":
            server.seconds_per_block = 0.5
        else:
            server.hang_listing = 60.0
        cancel = threading.Event()
        thread, outcome = _download_in_background(cancel)
        part = _part_of(env, BIG_FILE)
        if line == "listing never answered":
            assert _wait_for(lambda: server.requests, 10)
            time.sleep(0.3)
        else:
            assert _wait_for(lambda: part.is_file() and part.stat().st_size >= (sent if "stalled" in line else
                                                                                  2 * CHUNK), 20)
            time.sleep(0.3)  # the line is quiet (or slow) now
        asked = time.monotonic()
        cancel.set()
        thread.join(5)
        took = time.monotonic() - asked
        assert not thread.is_alive() and isinstance(outcome[0], Cancelled), outcome
        assert took < 1.0, f"cancel took {took:.1f} s"
        if line == "stalled mid-file":
            assert part.stat().st_size == sent  # everything received is kept for the resume
            assert part.read_bytes() == repo.files[BIG_FILE][:sent]
        # and the next attempt resumes from there
        server.seconds_per_block, server.hang_listing = 0.0, 0.0
        server.requests.clear()
        install(REPO)
        if line == "stalled mid-file":
            assert [r[2] for r in server.file_requests(BIG_FILE)] == [f"bytes={sent}-"]
    assert [m.name for m in ModelStore().installed()] == [NAME]


# --- two downloads of one model ---------------------------------------------------------------------------------


def test_a_second_download_of_the_same_model_is_told_the_first_is_running(env, monkeypatch, capsys):
    from engine.store import discard_download

    repo = tiny_repo()
    with HubServer({REPO: repo}) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        server.seconds_per_block = 0.05
        cancel = threading.Event()
        thread, outcome = _download_in_background(cancel)
        assert _wait_for(lambda: [r for r in server.requests if "/resolve/" in r[1]], 20)
        fetched = len(server.requests)
        code, err = run_cli(capsys, "models", "download", REPO)
        line = one_line(err)
        assert code == 2 and NAME in line and "already being downloaded" in line, line
        with pytest.raises(StoreError, match="already being downloaded"):
            discard_download(ModelStore(), NAME)  # nor is its unfinished download thrown away under it
        assert not [r for r in server.requests[fetched:] if "/api/models/" in r[1]]  # told before asking the hub
        server.seconds_per_block = 0.0
        thread.join(60)
    assert outcome == ["installed"]  # the first was not disturbed
    (model,) = ModelStore().installed()
    assert (model.path / "manifest.json").is_file()
    # the lock went with the download: the model can be removed and downloaded again
    ModelStore().remove(NAME)
    with HubServer({REPO: tiny_repo()}) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        install(REPO)


def test_a_killed_download_does_not_keep_the_model_locked(env, monkeypatch):
    """The lock is the system's: a process killed mid-download releases it."""
    import subprocess
    import sys

    held = env / "holding"
    code = ("import sys, time; from pathlib import Path; from engine.store import ModelStore;"
            "from engine.store.installer import download_lock\n"
            f"with download_lock(ModelStore(), {NAME!r}):\n"
            f"    Path({str(held)!r}).write_text('1'); time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT)
    try:
        assert _wait_for(held.exists, 30)
        with pytest.raises(StoreError, match="already being downloaded"):
            with installer.download_lock(ModelStore(), NAME):
                pass
    finally:
        proc.kill()
        proc.wait()
    with installer.download_lock(ModelStore(), NAME):
        pass


# --- a models folder that cannot be used ------------------------------------------------------------------------


def _read_only(env: Path, small_disk) -> Path:
    """A read-only models folder: a read-only tmpfs as root (root ignores permission bits), else chmod."""
    import os
    import subprocess

    if os.geteuid() == 0:
        where = small_disk(1024)
        subprocess.run(["mount", "-o", "remount,ro", str(where)], check=True)
        return where
    where = env / "ro"
    where.mkdir()
    where.chmod(0o555)
    return where


@pytest.mark.parametrize("kind", ["a file", "read-only", "too long", "under a file"])
def test_a_models_folder_that_cannot_be_used_is_one_line(env, monkeypatch, capsys, small_disk, kind):
    if kind == "a file":
        folder = env / "models-file"
        folder.write_text("not a folder")
    elif kind == "read-only":
        folder = _read_only(env, small_disk)
    elif kind == "too long":
        folder = env / ("m" * 250) / ("m" * 250) / ("x" * 300)
    else:
        (env / "plain").write_text("x")
        folder = env / "plain" / "models"
    monkeypatch.setenv("QWEN3TTS_MODELS_DIR", str(folder))
    with HubServer({REPO: tiny_repo()}) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        code, err = run_cli(capsys, "models", "download", REPO)
        line = one_line(err)
        assert code == 2 and ("models folder" in line or "Cannot write in" in line), line
    for call in (lambda s: s.installed(), lambda s: s.get(NAME), lambda s: s.resolve(NAME),
                 lambda s: installer.pending_downloads(s)):
        try:
            call(ModelStore())
        except StoreError as e:  # its own one-line error, or nothing
            assert "\n" not in str(e) and len(str(e)) < 300
    code, err = run_cli(capsys, "models", "list")  # nothing installed, or one line saying why not
    assert code == 0 and len(err.strip().splitlines()) <= 1 or code == 2 and "models folder" in one_line(err), err
    if kind == "a file":
        assert folder.read_text() == "not a folder"


def test_a_models_folder_setting_that_is_not_a_path_is_one_error(monkeypatch):
    monkeypatch.setenv("QWEN3TTS_MODELS_DIR", "~no-such-user-here/models")
    with pytest.raises(StoreError, match="models folder"):
        ModelStore()


# --- the store's own small files, damaged -------------------------------------------------------------------------


def _within(seconds: float, fn):
    """fn() on a helper thread; fails (instead of hanging the suite) when it blocks, e.g. on a FIFO."""
    outcome: list = []
    helper = threading.Thread(target=lambda: outcome.append(fn()), daemon=True)
    helper.start()
    helper.join(seconds)
    assert outcome, f"blocked for more than {seconds} s"
    return outcome[0]


@pytest.mark.parametrize("kind", ["empty", "truncated", "a list", "files a string", "huge", "a FIFO", "a folder"])
def test_a_damaged_pending_download_is_left_out_and_a_new_download_starts_clean(env, monkeypatch, kind):
    import os

    raw = ModelStore().downloads_dir() / NAME
    raw.mkdir(parents=True)
    pending = raw / "pending.json"
    good = {"name": NAME, "repo_id": REPO, "revision": "0123456789abcdef0123456789abcdef01234567",
            "precision": "fp16", "files": [{"path": "config.json", "size": 10}]}
    if kind == "empty":
        pending.write_bytes(b"")
    elif kind == "truncated":
        pending.write_text(json.dumps(good)[:40])
    elif kind == "a list":
        pending.write_text(json.dumps([good]))
    elif kind == "files a string":
        pending.write_text(json.dumps(dict(good, files="config.json")))
    elif kind == "huge":
        pending.write_text(json.dumps(dict(good, padding="x" * (8 << 20))))
    elif kind == "a FIFO":
        os.mkfifo(pending)
    else:
        pending.mkdir()
    assert _within(5, lambda: installer.pending_downloads(ModelStore())) == []
    with HubServer({REPO: tiny_repo()}) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        _within(60, lambda: install(REPO))
    assert [m.name for m in ModelStore().installed()] == [NAME]


@pytest.mark.parametrize("kind", ["a FIFO", "a folder", "huge", "a NUL"])
def test_a_damaged_models_folder_pointer_is_ignored(env, monkeypatch, kind):
    import os

    from engine.store import default_models_dir

    monkeypatch.delenv("QWEN3TTS_MODELS_DIR")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(env / "config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(env / "data"))
    pointer = env / "config" / "Qwen3-TTS Studio" / "models-folder.txt"
    pointer.parent.mkdir(parents=True)
    if kind == "a FIFO":
        os.mkfifo(pointer)
    elif kind == "a folder":
        pointer.mkdir()
    elif kind == "huge":
        pointer.write_text("/x" * (1 << 20))
    else:
        pointer.write_text(str(env / "models\0evil"))
    assert _within(5, default_models_dir) == env / "data" / "Qwen3-TTS Studio" / "models"
