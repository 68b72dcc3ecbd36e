"""Messages that told the user the wrong thing, each case by name: the words now say what happened."""

from __future__ import annotations

import errno
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from engine.errors import BundleError, as_sentence
from engine.io.fileio import os_reason
from engine.io.safefile import regular_file_problem
from engine.runtime import device
from engine.runtime.bundle import Bundle
from engine.store import HubError, ModelStore, StoreError, install
from engine.store.locks import download_lock
from tests.bundles import bundle_for
from tests.hub_server import HubServer, Repo, isolate_store

from .conftest import REF, ROOT, one_line, run_cli

TINY = ROOT / "tests" / "fixtures" / "models" / "tiny06b"
REPO = "Qwen/Qwen3-TTS-12Hz-0.6B-Base"


@pytest.fixture
def bundle_copy(tmp_path) -> Path:
    dest = tmp_path / "bundle"
    shutil.copytree(bundle_for("tiny06b", "fp32"), dest)
    return dest


def _manifest(bundle: Path, change) -> None:
    m = json.loads((bundle / "manifest.json").read_text())
    change(m)
    (bundle / "manifest.json").write_text(json.dumps(m))


def synth(capsys, bundle: Path, out: Path) -> tuple[int, str]:
    return run_cli(capsys, "synth", "--model", bundle, "--text", "Hello.", "-o", out, "--greedy", "--max-frames",
                   "2", "--language", "english", "--ref", REF, "--x-vector-only", "--threads", "1")


def test_models_remove_on_a_read_only_folder_says_what_it_was_doing(small_disk, monkeypatch, capsys):
    """`models remove` on a read-only folder said "while starting the download"."""
    root = small_disk(16 * 1024)
    monkeypatch.setenv("QWEN3TTS_MODELS_DIR", str(root))
    shutil.copytree(bundle_for("tiny06b", "fp32"), root / "tiny")
    (root / ".downloads" / "half").mkdir(parents=True)
    assert ModelStore().get("tiny") is not None
    r = subprocess.run(["mount", "-o", "remount,ro", str(root)], capture_output=True)
    if r.returncode != 0:
        pytest.skip("cannot remount read-only here")
    code, err = run_cli(capsys, "models", "remove", "tiny")
    line = one_line(err)
    assert code != 0 and "Cannot remove tiny" in line and "read-only" in line and "download" not in line, line
    code, err = run_cli(capsys, "models", "remove", "half")
    line = one_line(err)
    assert code != 0 and "while removing the unfinished download" in line and "starting" not in line, line
    code, err = run_cli(capsys, "models", "remove", "nothing")
    line = one_line(err)
    assert code != 0 and "No installed model is called 'nothing'" in line, line


def test_a_file_name_with_a_dot_dot_part_is_said_in_plain_words(tmp_path, monkeypatch):
    """"a file name that is has a '..' path part"."""
    isolate_store(tmp_path, monkeypatch, 64 * 1024)
    repo = Repo.from_folder(TINY)
    repo.files["../outside.json"] = b"{}"
    with HubServer({REPO: repo}) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        with pytest.raises(HubError) as e:
            install(REPO)
    assert "lists a file name that has a '..' path part" in str(e.value) and "that is has" not in str(e.value)


def test_a_folder_given_as_an_audio_file_is_an_audio_file(tmp_path):
    """"not a audio file"."""
    assert regular_file_problem(tmp_path, "audio file") == f"{tmp_path} is a folder, not an audio file."
    assert regular_file_problem(tmp_path, "voice file") == f"{tmp_path} is a folder, not a voice file."


@pytest.mark.parametrize("positions", [-1, 0, 3, "32768", 1.5, None, 10**30])
def test_a_damaged_context_length_is_a_damaged_bundle_not_a_long_text(bundle_copy, capsys, tmp_path, positions):
    """`max_position_embeddings: -1` was reported as "text too long (3 characters)"."""
    _manifest(bundle_copy, lambda m: m["parts"]["text"].__setitem__("max_position_embeddings", positions))
    with pytest.raises(BundleError, match=r"is damaged: its 'text' part: the context length \(max_position_embeddings\)"):
        Bundle.open(bundle_copy)
    code, err = synth(capsys, bundle_copy, tmp_path / "a.wav")
    line = one_line(err)
    assert code == 2 and "max_position_embeddings" in line and "too long" not in line, line


@pytest.mark.parametrize("shape", [(10, 64), (1088,), (1088, 63), (1088, 64, 1)])
def test_a_wrong_shaped_text_table_is_a_damaged_bundle_not_a_text_problem(bundle_copy, capsys, tmp_path, shape):
    np.save(bundle_copy / "text_rows.npy", np.zeros(shape, np.float32))
    _manifest(bundle_copy, lambda m: m["files"].pop("text_rows.npy"))  # its size and checksum: not listed
    with pytest.raises(BundleError, match=r"text_rows\.npy: its shape is"):
        Bundle.open(bundle_copy)
    code, err = synth(capsys, bundle_copy, tmp_path / "a.wav")
    assert code == 2 and "text_rows.npy" in one_line(err)


@pytest.mark.parametrize("content, words", [
    (b"{ not json", "is damaged"),
    (b'{"file_format_version": "1.0.0", "ICD": {"library_path": "/nowhere/libvulkan_gone.so"}}', "which is not there"),
])
def test_a_broken_vulkan_driver_file_is_named_not_called_no_driver(tmp_path, monkeypatch, content, words):
    """A broken Vulkan ICD file was reported as "no GPU driver installed"."""
    icd = tmp_path / "broken_icd.json"
    icd.write_bytes(content)
    monkeypatch.setenv("VK_ICD_FILENAMES", str(icd))
    monkeypatch.delenv("VK_DRIVER_FILES", raising=False)
    reason = device._no_gpu_reason(["vkCreateInstance failed -9"])
    assert str(icd) in reason and words in reason and "no GPU driver" not in reason, reason
    icd.write_text('{"file_format_version": "1.0.0", "ICD": {"library_path": "libvulkan_lvp.so"}}')
    assert "-9" in device._no_gpu_reason(["vkCreateInstance failed -9"])  # a sound file: the loader's words


def test_a_read_only_disk_is_called_read_only_not_no_permission():
    assert "read-only" in os_reason(OSError(errno.EROFS, "Read-only file system"))
    assert "no permission" not in os_reason(OSError(errno.EROFS, "Read-only file system"))
    assert os_reason(OSError(errno.EACCES, "Permission denied")) == "no permission to write there"


def test_http_404_is_not_answered_with_try_again_later(tmp_path, monkeypatch):
    isolate_store(tmp_path, monkeypatch, 64 * 1024)
    repo = Repo.from_folder(TINY)
    with HubServer({REPO: repo}) as server:
        server.busy["config.json"] = [404] * 20
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        with pytest.raises(HubError) as e:
            install(REPO)
    message = str(e.value)
    assert "HTTP 404" in message and "try again later" not in message, message


def test_a_model_named_demo_is_not_capitalised_as_if_the_sentence_began_with_it(tmp_path, monkeypatch):
    """"Demo is already being downloaded" (the model is `demo`)."""
    monkeypatch.setenv("QWEN3TTS_MODELS_DIR", str(tmp_path))
    store = ModelStore()
    with download_lock(store, "demo"):
        with pytest.raises(StoreError) as e:
            with download_lock(store, "demo"):
                pass
    assert as_sentence(str(e.value)).startswith("The model demo is already being downloaded")


def test_a_huge_string_in_the_settings_is_reset_and_a_dialog_shows_a_capped_text(tmp_path, monkeypatch):
    """A 1 MB string in the settings file delayed the takes by 7 s and put the whole path in a dialog."""
    from PySide6.QtCore import QSettings

    from qwen3tts_gui import context
    from qwen3tts_gui.data.settings import Settings

    raw = QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)
    raw.setValue("folders/output", "/x" * 500_000)
    raw.setValue("model/recent", json.dumps(["/y" * 500_000]))
    raw.sync()
    settings = Settings(QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat))
    assert settings.output_dir == "" and settings.recent_models == []
    problems = settings.take_problems()
    assert len(problems) == 2 and all(len(p) < 300 for p in problems), problems
    shown = []
    monkeypatch.setattr(context.QMessageBox, "warning", lambda parent, title, text: shown.append(text))
    context.Dialogs().error(None, "Cannot save", f"Cannot write {'/z' * 500_000}/take.wav: the disk is full.")
    assert len(shown[0]) <= context.MAX_DIALOG_CHARS + 100 and shown[0].endswith("/take.wav: the disk is full.")
    assert "characters left out" in shown[0]
