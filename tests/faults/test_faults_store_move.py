"""Moving the model store: a destination inside the store is refused, and a move killed at any step (a real
SIGKILL in a child process) leaves every model whole in the folder the app and the command line will use."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from engine.store import ModelStore, StoreError, move_store
from engine.store import move as move_mod

from .conftest import ROOT

STEPS = ["copying", "copied", "verified", "placing", "placed", "switched", "deleting"]
WORK = (".locks", ".incoming", ".move.json", ".removing-")


@pytest.fixture
def store(tmp_path, monkeypatch) -> ModelStore:
    """Two models and an unfinished download in <tmp>/old, found through the pointer file (no environment)."""
    monkeypatch.delenv("QWEN3TTS_MODELS_DIR", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    from engine.store import remember_models_dir

    root = tmp_path / "old"
    for i, name in enumerate(["Model-A", "Model-B"]):
        (root / name / "sub").mkdir(parents=True)
        (root / name / "manifest.json").write_text('{"precision": "fp16"}')
        (root / name / "talker.bin").write_bytes(os.urandom(300_000 + i))
        (root / name / "sub" / "codec.bin").write_bytes(os.urandom(200_000))
    (root / ".downloads" / "Model-C").mkdir(parents=True)
    (root / ".downloads" / "Model-C" / "model.safetensors.part").write_bytes(os.urandom(50_000))
    remember_models_dir(root)
    assert ModelStore().root == root
    return ModelStore()


def tree(folder: Path) -> dict[str, bytes]:
    """The store's content: every file but the store's own work files."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and not p.relative_to(folder).as_posix().startswith(WORK)}


def models_in(folder: Path) -> list[str]:
    return sorted(d.name for d in folder.iterdir() if (d / "manifest.json").is_file()) if folder.is_dir() else []


@pytest.mark.parametrize("inside", ["sub", "Model-A/deeper", "."])
def test_a_destination_inside_the_store_is_refused(store, inside):
    before = tree(store.root)
    if inside == ".":
        assert move_store(store, store.root) == store.root  # the same folder: nothing to do
    else:
        with pytest.raises(StoreError, match="inside the models folder"):
            move_store(store, store.root / inside)
        assert not (store.root / "sub").exists()
    assert tree(store.root) == before and ModelStore().root == store.root


@pytest.mark.parametrize("mode", ["hard links (one disk)", "copies (another disk)"])
@pytest.mark.parametrize("kill_at", STEPS)
def test_a_move_killed_at_any_step_leaves_the_store_whole_in_one_place(store, tmp_path, mode, kill_at):
    old, new = store.root, tmp_path / "new"
    before = tree(old)
    script = (
        "import os, signal, sys\n"
        "from engine.store import ModelStore, move\n"
        "if sys.argv[3] == 'copy':\n"
        "    move._same_device = lambda a, b: False\n"
        "def step(name):\n"
        "    if name == sys.argv[2]:\n"
        "        os.kill(os.getpid(), signal.SIGKILL)\n"
        "move.move_store(ModelStore(), sys.argv[1], step=step)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", script, str(new), kill_at, "copy" if "copies" in mode else "link"],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == -signal.SIGKILL, done.stderr
    active = ModelStore().root
    assert active == (new if STEPS.index(kill_at) >= STEPS.index("switched") else old)
    assert tree(active) == before  # every model whole where the app looks
    # moving again finishes the job (or there is nothing left to do) and leaves one store
    move_store(ModelStore(), new)
    assert ModelStore().root == new and tree(new) == before
    assert models_in(new) == ["Model-A", "Model-B"]
    if STEPS.index(kill_at) < STEPS.index("switched"):
        assert models_in(old) == []  # the finished move deleted the originals
    assert not (new / ".incoming").exists() and not (new / ".move.json").exists()


def test_a_copy_that_does_not_match_its_original_moves_nothing(store, tmp_path, monkeypatch):
    old, new = store.root, tmp_path / "new"
    before = tree(old)
    monkeypatch.setattr(move_mod, "_same_device", lambda a, b: False)
    copy = move_mod._copy_file

    def damaging_copy(src, dst, linkable, copies):
        copy(src, dst, linkable, copies)
        if src.name == "codec.bin":
            with open(dst, "r+b") as f:  # a bad sector, a flaky USB disk
                f.seek(1000)
                f.write(b"\0\1\2")

    monkeypatch.setattr(move_mod, "_copy_file", damaging_copy)
    with pytest.raises(StoreError, match="does not match the original; nothing was moved"):
        move_store(store, new)
    assert ModelStore().root == old and tree(old) == before
    assert models_in(new) == [] and not (new / ".incoming").exists()


def test_a_move_waits_for_no_download_it_would_cut_in_half(store, tmp_path):
    from engine.store.locks import download_lock

    with download_lock(store, "Model-C"):
        with pytest.raises(StoreError, match="already being downloaded"):
            move_store(ModelStore(), tmp_path / "new")
    assert ModelStore().root == store.root and models_in(store.root) == ["Model-A", "Model-B"]
