"""The app's download on a bad line (tests/hub_server.py on 127.0.0.1, the real engine store): Cancel takes
effect within a second whether the server is stalled, slow or never answers, closing the window waits for
nothing (a QThread destroyed while running aborts the app), and every byte received is kept for the resume."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from engine.store import installer
from qwen3tts_gui.engine_adapter import ModelStore
from tests.hub_server import HubServer, Repo

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "fixtures" / "models" / "tiny06b"
REPO = "Qwen/Qwen3-TTS-12Hz-0.6B-Base"
NAME = "Qwen3-TTS-12Hz-0.6B-Base"
BIG_FILE = "speech_tokenizer/model.safetensors"
SENT = 3 * 65536 + 1000  # what a stalled server sends before going quiet: not a whole number of blocks


@pytest.fixture
def hub(tmp_path, monkeypatch, settings):
    import huggingface_hub.constants

    assert (TINY / "config.json").is_file(), f"the committed fixture checkpoint {TINY} is missing"
    monkeypatch.setenv("QWEN3TTS_MODELS_DIR", str(tmp_path / "models"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)  # 127.0.0.1 only
    # a long read timeout: it must not be what ends the wait
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DOWNLOAD_TIMEOUT", 60)
    monkeypatch.setattr(installer, "free_bytes", lambda folder: 1 << 40)
    with HubServer({REPO: Repo.from_folder(TINY)}) as server:
        settings.hub_endpoint = server.url
        yield server


def _part(tmp_path: Path) -> Path:
    return ModelStore(tmp_path / "models").downloads_dir() / NAME / (BIG_FILE + ".part")


def _start_on_a_bad_line(qtbot, make_window, hub, tmp_path, line: str):
    if line == "stalled":
        hub.stall_after[BIG_FILE] = (SENT, 60.0)
    elif line == "slow":
        hub.seconds_per_block = 0.5  # 128 KB/s
    else:
        hub.hang_listing = 60.0
    window = make_window(model=False)
    panel = window.welcome.download
    assert panel.source() == REPO
    qtbot.mouseClick(panel.download_btn, Qt.MouseButton.LeftButton)
    part = _part(tmp_path)
    if line == "listing never answered":
        qtbot.waitUntil(lambda: bool(hub.requests), timeout=10000)
    else:
        qtbot.waitUntil(lambda: part.is_file() and part.stat().st_size >= (SENT if line == "stalled" else 131072),
                        timeout=20000)
    qtbot.wait(300)  # the line is quiet (or slow) now
    assert window.downloader.running
    return window, panel, part


LINES = ["stalled", "slow", "listing never answered"]


@pytest.mark.parametrize("line", LINES)
def test_cancel_takes_effect_within_a_second(qtbot, make_window, hub, tmp_path, line):
    window, panel, part = _start_on_a_bad_line(qtbot, make_window, hub, tmp_path, line)
    asked = time.monotonic()
    qtbot.mouseClick(panel.cancel_btn, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not window.downloader.running, timeout=5000)
    took = time.monotonic() - asked
    assert took < 1.0, f"cancel took {took:.1f} s"
    assert panel.download_btn.isEnabled()
    if line == "stalled":
        assert part.stat().st_size == SENT  # every byte received is kept for the resume
        assert "resume" in panel.status.text()


@pytest.mark.parametrize("line", LINES)
def test_closing_the_window_during_a_download_waits_for_nothing(qtbot, make_window, hub, tmp_path, line):
    window, _panel, part = _start_on_a_bad_line(qtbot, make_window, hub, tmp_path, line)
    worker = window.downloader._worker
    asked = time.monotonic()
    window.close()
    took = time.monotonic() - asked
    assert took < 1.0, f"closing took {took:.1f} s"
    assert worker.isFinished()  # nothing left running for Qt to destroy
    if line == "stalled":
        assert part.stat().st_size == SENT


@pytest.mark.parametrize("where", ["QWEN3TTS_MODELS_DIR too long", "setting too long", "a file"])
def test_a_models_folder_that_cannot_be_used_does_not_stop_the_start(qtbot, make_window, settings, dialogs,
                                                                      tmp_path, monkeypatch, where):
    long_path = str(tmp_path / ("m" * 250) / ("m" * 250) / ("x" * 300))
    monkeypatch.delenv("QWEN3TTS_MODELS_DIR", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    if where == "QWEN3TTS_MODELS_DIR too long":
        monkeypatch.setenv("QWEN3TTS_MODELS_DIR", long_path)
    elif where == "setting too long":
        settings.models_dir = long_path
    else:
        (tmp_path / "models-file").write_text("not a folder")
        monkeypatch.setenv("QWEN3TTS_MODELS_DIR", str(tmp_path / "models-file"))
    window = make_window(model=False)
    assert window.isVisible() and window.welcome.download is not None
    qtbot.mouseClick(window.welcome.download.download_btn, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not window.downloader.running, timeout=10000)
    message = dialogs.errors[-1][1]
    assert "\n" not in message and "Traceback" not in message
    if where == "a file":
        assert "Cannot write in" in message and (tmp_path / "models-file").read_text() == "not a folder"


def test_an_unreadable_models_folder_is_said_in_the_models_dialog(qtbot, make_window, monkeypatch):
    """The store's readers raise StoreError only (held by the engine's fault tests): the dialog and the download
    panel show it instead of failing to open."""
    from engine.store import StoreError
    from qwen3tts_gui.widgets import download_panel, models_dialog

    def unreadable(*_args, **_kw):
        raise StoreError("The models folder /x cannot be read (Permission denied); choose another folder.")

    monkeypatch.setattr(ModelStore, "installed", unreadable)
    monkeypatch.setattr(models_dialog, "pending_downloads", unreadable)
    monkeypatch.setattr(download_panel, "pending_downloads", unreadable)
    window = make_window(model=False)
    assert "cannot be read" in window.welcome.download.status.text()
    dialog = models_dialog.ModelsDialog(window.downloader, window)
    qtbot.addWidget(dialog)
    assert "cannot be read" in dialog.folder_label.text()


@pytest.mark.parametrize("name", ["../../../home/victim/thesis.txt", "speech_tokenizer/config\0.json",
                                  "a" * 300 + ".json"])
def test_a_hostile_file_name_in_the_app_is_one_line_naming_the_repository(qtbot, make_window, hub, dialogs,
                                                                            settings, tmp_path, name):
    hub.repos[REPO].files[name] = b"from the mirror"
    settings.hub_endpoint = hub.url.replace("http://", "http://joe:hunter2@")
    window = make_window(model=False)
    messages: list[str] = []
    window.downloader.progress.connect(lambda f, m: messages.append(m))
    with qtbot.waitSignal(window.downloader.failed, timeout=10000):
        qtbot.mouseClick(window.welcome.download.download_btn, Qt.MouseButton.LeftButton)
    message = dialogs.errors[-1][1]
    assert REPO in message and "nothing was downloaded" in message and "\n" not in message, message
    assert "hunter2" not in message + window.welcome.download.status.text() + "".join(messages)
    assert not [r for r in hub.requests if "/resolve/" in r[1]]
