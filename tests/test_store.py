"""The model store against a local hub server (tests/hub_server.py on 127.0.0.1): download, verify, convert,
install by name; resume after a dropped connection and after a cancel; refusals (bad bytes, 404, 401, no
network, full disk) leave nothing installed. Never talks to a real hub: HF_ENDPOINT points at the local server.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from engine.errors import Cancelled
from engine.store import CATALOGUE, HubError, ModelStore, StoreError, install, pending_downloads
from qwen3tts_cli.main import main
from tests.hub_server import HubServer, Repo, isolate_store

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT / "tests" / "fixtures" / "models" / "tiny06b"
REF = ROOT / "tests" / "fixtures" / "audio" / "en_24k_mono_2s.wav"
REPO = "Qwen/Qwen3-TTS-12Hz-0.6B-Base"
NAME = "Qwen3-TTS-12Hz-0.6B-Base"
CHUNK = 64 * 1024  # the unit the tests cut, stall and cancel at (the local hub server sends 64 KB blocks)


def tiny_repo(**kw) -> Repo:
    assert (TINY / "config.json").is_file(), f"the committed fixture checkpoint {TINY} is missing"
    repo = Repo.from_folder(TINY, **kw)
    repo.files["README.md"] = b"# not fetched\n"  # files the converter does not read are skipped
    return repo


@pytest.fixture
def env(tmp_path, monkeypatch):
    """A private store and hub cache; no token from the environment; small download chunks."""
    return isolate_store(tmp_path, monkeypatch, CHUNK)


@pytest.fixture
def hub(env, monkeypatch):
    with HubServer({REPO: tiny_repo()}) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        yield server


def listing_of(store: ModelStore) -> list[str]:
    """Everything in the store folder, hidden work folders included (not the folder of download locks: empty
    files that stay, one per model ever downloaded, so no two processes can ever lock different files)."""
    return sorted(p.name for p in store.root.iterdir() if p.name != ".locks") if store.root.is_dir() else []


def run(capsys, *args) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_download_convert_and_synth_by_name(hub, env, capsys, tmp_path):
    code, _, err = run(capsys, "models", "download", "0.6B-Base", "--precision", "fp32")
    assert code == 0, err
    store = ModelStore()
    assert listing_of(store) == [NAME]  # no download or conversion folders left behind
    code, out, _ = run(capsys, "models", "list")
    assert code == 0 and out.splitlines()[0].startswith(f"{NAME}  fp32")
    source = json.loads((store.root / NAME / "source.json").read_text())
    assert source["repo_id"] == REPO and source["revision"] == hub.repos[REPO].sha
    assert not hub.file_requests("README.md")

    # synth by installed name: the same codes as a bundle converted straight from the fixture folder
    from tests.bundles import bundle_for

    direct = bundle_for("tiny06b", "fp32")
    codes = {}
    for label, model in (("by name", NAME), ("direct", str(direct))):
        out_wav, out_codes = tmp_path / f"{label}.wav", tmp_path / f"{label}.npy"
        code, _, err = run(capsys, "synth", "--model", model, "--text", "Hello there.", "-o", out_wav,
                           "--ref", REF, "--x-vector-only", "--greedy", "--max-frames", "5",
                           "--language", "english", "--codes-out", out_codes)
        assert code == 0, err
        codes[label] = np.load(out_codes)
    assert np.array_equal(codes["by name"], codes["direct"])

    code, _, err = run(capsys, "models", "remove", NAME)
    assert code == 0 and listing_of(store) == []
    code, _, err = run(capsys, "synth", "--model", NAME, "--text", "Hi.", "-o", tmp_path / "x.wav",
                       "--ref", REF, "--x-vector-only")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "no installed model" in err


def test_conversion_left_by_a_killed_process_is_swept(hub, env):
    store = ModelStore()
    dead = _finished_pid()
    leftover = store.root / f".installing-{NAME}-{dead}" / NAME
    leftover.mkdir(parents=True)
    (leftover / "talker.bin").write_bytes(b"half")
    install(REPO)
    assert listing_of(store) == [NAME]


def _finished_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def test_dropped_connection_resumes_where_it_stopped(hub, env):
    size = len(hub.repos[REPO].files["model.safetensors"])
    cut = 5 * CHUNK + 123
    hub.drop_after["model.safetensors"] = cut
    model = install(REPO, precision="fp16", keep_checkpoint=True)
    gets = [r for r in hub.file_requests("model.safetensors") if "speech_tokenizer" not in r[1]]
    assert len(gets) == 2
    # the retry asks only for what was missing: every byte received before the cut is kept
    resumed_from = int(gets[1][2].removeprefix("bytes=").split("-")[0])
    assert resumed_from == cut and resumed_from < size
    assert model.precision == "fp16" and listing_of(ModelStore()) == [NAME, "checkpoints"]
    kept = ModelStore().root / "checkpoints" / NAME
    assert (kept / "model.safetensors").read_bytes() == hub.repos[REPO].files["model.safetensors"]
    assert ModelStore().installed()[0].name == NAME  # the kept checkpoint is not taken for a model


def test_a_busy_answer_is_asked_again(hub, env):
    """503 / 429 from a busy hub or CDN are transient: the file is asked for again after a pause."""
    hub.busy["model.safetensors"] = [503, 429]
    install(REPO)
    gets = [r for r in hub.file_requests("model.safetensors") if "speech_tokenizer" not in r[1]]
    assert len(gets) == 3 and [m.name for m in ModelStore().installed()] == [NAME]


def test_stalled_connection_times_out_and_resumes(hub, env, monkeypatch):
    """A server that goes quiet mid-file: the read timeout fires and the retry asks for the rest only."""
    import huggingface_hub.constants

    from engine.store.hub import fetch_repo, repo_listing

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DOWNLOAD_TIMEOUT", 0.5)
    hub.stall_after["speech_tokenizer/model.safetensors"] = (3 * CHUNK, 1.5)
    repo = repo_listing(REPO, endpoint=hub.url)
    fetch_repo(repo, env / "raw", endpoint=hub.url)
    gets = hub.file_requests("speech_tokenizer/model.safetensors")
    assert [r[2] for r in gets] == [None, f"bytes={3 * CHUNK}-"]
    assert (env / "raw" / "speech_tokenizer/model.safetensors").read_bytes() == \
        hub.repos[REPO].files["speech_tokenizer/model.safetensors"]


def test_system_proxy_is_used(env, monkeypatch):
    """HTTP_PROXY (what the system proxy settings become) carries every request; the hub host is never resolved."""
    from huggingface_hub.utils import close_session

    from engine.store.hub import fetch_repo, repo_listing

    with HubServer({REPO: tiny_repo()}) as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        close_session()  # huggingface_hub's shared client reads the proxy settings when it is made
        try:
            endpoint = "http://hub.example.invalid"
            repo = repo_listing(REPO, endpoint=endpoint)
            fetch_repo(repo, env / "raw", endpoint=endpoint)
        finally:
            close_session()
    assert proxy.requests and all(r[1].startswith(endpoint + "/") for r in proxy.requests)
    assert (env / "raw" / "model.safetensors").read_bytes() == proxy.repos[REPO].files["model.safetensors"]


def test_cancel_keeps_the_partial_file_and_the_next_run_resumes(hub, env):
    store = ModelStore()
    seen: list[int] = []

    def cancel_midway() -> bool:
        return bool(seen) and seen[-1] > 8 * CHUNK

    with pytest.raises(Cancelled):
        install(REPO, progress=None, on_download=lambda p: seen.append(p.done), cancel=cancel_midway)
    assert store.installed() == []
    (pending,) = pending_downloads(store)
    assert pending.name == NAME and 0 < pending.done_bytes < pending.total_bytes
    kept = pending.done_bytes

    # "after a restart": a new call with a new store object; only the missing bytes are fetched
    hub.requests.clear()
    progress: list[int] = []
    model = install(REPO, store=ModelStore(), on_download=lambda p: progress.append(p.done))
    assert model.name == NAME
    assert progress[0] >= kept  # counting starts from the bytes already on disk
    ranges = [r[2] for r in hub.requests if "/resolve/" in r[1] and r[2]]
    # the one partial file resumed (unless all its bytes had arrived: then it is only checked); completed files
    # were not fetched again
    assert len(ranges) <= 1
    fetched_again = sum(len(d) for p, d in hub.repos[REPO].files.items()
                        if p.endswith((".json", ".txt", ".safetensors")) and hub.file_requests(p))
    assert fetched_again < pending.total_bytes
    assert pending_downloads(store) == [] and listing_of(store) == [NAME]


@pytest.mark.parametrize("fault", ["bytes", "size"])
def test_file_that_does_not_match_the_listing_is_refused(hub, env, fault):
    repo = hub.repos[REPO]
    good = repo.files["speech_tokenizer/model.safetensors"]
    bad = bytes([good[0] ^ 1]) + good[1:] if fault == "bytes" else good[:-10]
    repo.served["speech_tokenizer/model.safetensors"] = bad
    with pytest.raises(HubError, match="sha256" if fault == "bytes" else "wrong size"):
        install(REPO)
    store = ModelStore()
    assert store.installed() == []
    leftovers = [p for p in store.root.rglob("model.safetensors*") if "speech_tokenizer" in p.as_posix()]
    assert leftovers == []  # the bad file is not kept for a later "resume"


def test_unknown_repository(hub, env, capsys):
    code, _, err = run(capsys, "models", "download", "Qwen/No-Such-Model")
    assert code == 2 and err.count("\n") == 1
    assert "Qwen/No-Such-Model does not exist" in err
    assert not (env / "models").exists() or listing_of(ModelStore()) == []


def test_gated_repository_needs_the_right_token(env, monkeypatch, capsys):
    with HubServer({REPO: tiny_repo(token="hf_right")}) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        code, _, err = run(capsys, "models", "download", REPO)
        assert code == 2 and err.count("\n") == 1 and "gated" in err and "token" in err
        code, _, err = run(capsys, "models", "download", REPO, "--token", "hf_wrong")
        assert code == 2 and err.count("\n") == 1 and "refused the token" in err
        assert ModelStore().installed() == []
        code, _, err = run(capsys, "models", "download", REPO, "--token", "hf_right")
        assert code == 0, err
        assert [m.name for m in ModelStore().installed()] == [NAME]


def test_offline_mode_is_said(hub, env, monkeypatch, capsys):
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    code, _, err = run(capsys, "models", "download", "0.6B-Base")
    assert code == 2 and err.count("\n") == 1 and "HF_HUB_OFFLINE" in err
    assert hub.requests == []


def test_no_network(env, monkeypatch, capsys):
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    code, _, err = run(capsys, "models", "download", "0.6B-Base")
    assert code == 2 and err.count("\n") == 1 and f"Cannot reach http://127.0.0.1:{port}" in err


def test_not_enough_space_is_said_before_downloading(hub, env, monkeypatch, capsys):
    import engine.store.installer as inst

    monkeypatch.setattr(inst, "free_bytes", lambda folder: 1_000_000)
    code, _, err = run(capsys, "models", "download", "0.6B-Base", "--precision", "fp16")
    assert code == 2 and err.count("\n") == 1 and "Not enough free space" in err
    entry = CATALOGUE[0]
    # the message states the need: this repository's bytes + the catalogue's converted size + the margin
    need = hub.repos[REPO].listing(REPO)["siblings"]
    download = sum(s["size"] for s in need if s["rfilename"].endswith((".json", ".txt", ".safetensors")))
    from engine.store import format_bytes

    assert format_bytes(download + entry.bundle_bytes["fp16"] + inst.MARGIN) in err
    assert not [r for r in hub.requests if "/resolve/" in r[1]]  # nothing was fetched


def test_disk_full_while_downloading(hub, env, monkeypatch, capsys):
    """A small tmpfs as the store (we may mount as root); the free-space check is told there is room."""
    import engine.store.installer as inst

    mount = env / "small"
    mount.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("needs root to mount a small tmpfs")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount tmpfs here: {done.stderr.decode().strip()}")
    try:
        monkeypatch.setenv("QWEN3TTS_MODELS_DIR", str(mount / "models"))
        monkeypatch.setattr(inst, "free_bytes", lambda folder: 1 << 40)
        code, _, err = run(capsys, "models", "download", "0.6B-Base")
        assert code == 2 and err.count("\n") == 1 and "is full" in err
        assert ModelStore().installed() == []
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def test_names_and_resolution(env, tmp_path):
    store = ModelStore()
    with pytest.raises(StoreError, match="cannot be a model name"):
        store.path_of("../escape")
    with pytest.raises(StoreError, match="neither a repository id"):
        install("tiny-thing")
    (store.root / "taken").mkdir(parents=True)  # a folder the user made: never overwritten
    with pytest.raises(StoreError, match="not a model"):
        install(REPO, name="taken", endpoint="http://127.0.0.1:9")
    # an existing folder is used as given, a missing path is left to Bundle.open to explain
    assert store.resolve(tmp_path) == tmp_path
    assert store.resolve(tmp_path / "missing" / "bundle") == tmp_path / "missing" / "bundle"
    with pytest.raises(StoreError, match="no installed model"):
        store.resolve("nothing-installed")


def test_catalogue_download_sizes_follow_the_official_tensor_lists():
    """The sizes shown to users are the ones tools/model_sizes.py computes from tests/data/official_tensors_*."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("model_sizes", ROOT / "tools" / "model_sizes.py")
    sizes = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sizes)
    for e in CATALOGUE:
        assert e.download_bytes == sizes.download_bytes(e.size.lower(), e.kind == "Base"), e.name
    from engine.runtime.bundle import PRECISIONS

    assert all(set(e.bundle_bytes) == set(PRECISIONS) for e in CATALOGUE)  # rerun the tool for a new precision
    # bf16 weights: 0.6B-Base is 914.6 M talker + speaker parameters x 2 bytes + the fp32 speech tokenizer
    base = next(e for e in CATALOGUE if e.name == NAME)
    assert abs(base.download_bytes - (914_643_008 * 2 + 170_557_441 * 4)) < 5_000_000


def test_git_blob_id_matches_git(tmp_path):
    from engine.store.hub import git_blob_sha1

    f = tmp_path / "a.txt"
    f.write_bytes(b"hello\n")
    # `git hash-object` of "hello\n"
    assert git_blob_sha1(f) == "ce013625030ba8dba906f756967f9e9ca394464a"
    assert hashlib.sha1(b"blob 6\0hello\n").hexdigest() == git_blob_sha1(f)


def test_progress_reports_bytes_speed_and_time_left(monkeypatch):
    """The meter's speed is bytes over the last seconds; time left is what remains at that speed."""
    import engine.store.hub as hub_mod

    clock = [100.0]
    monkeypatch.setattr(hub_mod.time, "monotonic", lambda: clock[0])
    seen: list = []
    meter = hub_mod._Meter(total=10_000_000, done=1_000_000, progress=seen.append, cancel=None)
    meter.file = "model.safetensors"
    for _ in range(4):  # 500 kB every second
        clock[0] += 1.0
        meter.add(500_000)
    last = seen[-1]
    assert last.done == 3_000_000 and last.total == 10_000_000
    assert last.bytes_per_second == pytest.approx(500_000)
    assert last.seconds_left == pytest.approx(14.0)
    assert last.describe() == ("downloading model.safetensors: 3.0 MB of 10.0 MB, 500.0 KB/s, 14 s left")
    for _ in range(6):  # the line gets faster: the speed follows within the 5 s window
        clock[0] += 1.0
        meter.add(1_000_000)
    assert seen[-1].done == 9_000_000
    assert seen[-1].bytes_per_second == pytest.approx(1_000_000) and seen[-1].seconds_left == pytest.approx(1.0)
