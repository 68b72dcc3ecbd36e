"""The welcome screen's download (progress, cancel, resume after a restart, the model opens when done) and the
Models dialog, against the local hub server (tests/hub_server.py) with the real engine store and converter."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from engine.store import installer
from qwen3tts_gui.engine_adapter import ModelStore
from tests.hub_server import HubServer, Repo

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "fixtures" / "models" / "tiny06b"
REPO = "Qwen/Qwen3-TTS-12Hz-0.6B-Base"
NAME = "Qwen3-TTS-12Hz-0.6B-Base"
BIG = "Qwen/Qwen3-TTS-12Hz-1.7B-Base"  # served with the same tiny checkpoint: the store does not mind
BIG_NAME = "Qwen3-TTS-12Hz-1.7B-Base"


@pytest.fixture
def hub(tmp_path, monkeypatch, settings):
    import huggingface_hub.constants

    assert (TINY / "config.json").is_file(), f"the committed fixture checkpoint {TINY} is missing"
    monkeypatch.setenv("QWEN3TTS_MODELS_DIR", str(tmp_path / "models"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "DOWNLOAD_CHUNK_SIZE", 1 << 16)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)  # run_tests.sh sets it; 127.0.0.1 only
    monkeypatch.setattr(installer, "free_bytes", lambda folder: 1 << 40)  # catalogue sizes are full-size GBs
    with HubServer({REPO: Repo.from_folder(TINY), BIG: Repo.from_folder(TINY)}) as server:
        monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # the app's own address field must win
        settings.hub_endpoint = server.url
        yield server


def test_welcome_download_cancel_resume_after_restart_and_open(qtbot, make_window, hub, dialogs, settings):
    window = make_window(model=False)
    panel = window.welcome.download
    assert panel is not None and window.stack.currentWidget() is window.welcome
    assert panel.source() == REPO  # the first catalogue entry, with its sizes shown
    assert "2.5 GB to download" in panel.sizes.text()
    panel.model_combo.setCurrentIndex(panel.model_combo.findData(BIG))
    assert panel.source() == BIG and "4.5 GB to download" in panel.sizes.text()
    panel.precision_combo.setCurrentIndex(panel.precision_combo.findData("fp32"))

    hub.seconds_per_block = 0.05  # slow enough to cancel in the middle of model.safetensors
    messages: list[str] = []
    window.downloader.progress.connect(lambda f, m: messages.append(m))
    qtbot.mouseClick(panel.download_btn, qtbot_left())
    qtbot.waitUntil(lambda: any("model.safetensors" in m and "of" in m for m in messages), timeout=10000)
    assert panel.cancel_btn.isEnabled() and not panel.download_btn.isEnabled()
    with qtbot.waitSignal(window.downloader.cancelled, timeout=10000):
        qtbot.mouseClick(panel.cancel_btn, qtbot_left())
    qtbot.waitUntil(lambda: not window.downloader.running, timeout=5000)
    assert ModelStore(Path(hub_models(settings))).installed() == []
    assert panel.download_btn.text() == "Resume download" and "resumes" in panel.status.text()
    window.close()

    # restart: a new window finds the unfinished download and resumes it
    hub.seconds_per_block = 0.0
    hub.requests.clear()
    window2 = make_window(model=False)
    panel2 = window2.welcome.download
    assert panel2.source() == BIG and panel2.precision() == "fp32"  # the unfinished one is offered
    assert panel2.download_btn.text() == "Resume download"
    with qtbot.waitSignal(window2.ctx.model_changed, timeout=20000):
        qtbot.mouseClick(panel2.download_btn, qtbot_left())
    installed = ModelStore(Path(hub_models(settings))).installed()
    assert [m.name for m in installed] == [BIG_NAME] and installed[0].precision == "fp32"
    assert window2.ctx.model_path == installed[0].path
    assert any(r[2] and r[2] != "bytes=0-" for r in hub.requests)  # a Range request: it resumed
    assert dialogs.errors == []


def test_download_failure_is_one_message(qtbot, make_window, hub, dialogs):
    window = make_window(model=False)
    panel = window.welcome.download
    panel.model_combo.setEditText("Qwen/Not-There")
    assert panel.source() == "Qwen/Not-There"
    with qtbot.waitSignal(window.downloader.failed, timeout=10000):
        qtbot.mouseClick(panel.download_btn, qtbot_left())
    assert dialogs.errors and "does not exist" in dialogs.errors[-1][1]
    assert panel.status.text() == dialogs.errors[-1][1]


def test_models_dialog_lists_sets_default_moves_and_removes(qtbot, make_window, tmp_path, monkeypatch, dialogs,
                                                           settings):
    from tests.bundles import bundle_for

    store_dir = tmp_path / "models"
    monkeypatch.setenv("QWEN3TTS_MODELS_DIR", str(store_dir))
    store_dir.mkdir()
    shutil.copytree(bundle_for("tiny06b", "fp16"), store_dir / "mine")
    window = make_window(model=True)
    dialog = window.show_models()
    # the catalogue, with sizes at the chosen precision: the five voice models, then the six Whisper models
    assert dialog.available.topLevelItemCount() == 11
    dialog.panel.precision_combo.setCurrentIndex(dialog.panel.precision_combo.findData("fp32"))
    big = dialog.available.topLevelItem(1)
    assert big.text(0) == "Qwen3-TTS-12Hz-1.7B-Base" and big.text(2) == "4.5 GB" and big.text(3) == "5.3 GB (fp32)"
    dialog.available.setCurrentItem(big)
    assert dialog.panel.source() == "Qwen/Qwen3-TTS-12Hz-1.7B-Base"
    assert dialog.table.topLevelItemCount() == 1
    item = dialog.table.topLevelItem(0)
    assert item.text(0) == "mine" and item.text(1) == "fp16" and item.text(3) == "imported"
    dialog.table.setCurrentItem(item)
    qtbot.mouseClick(dialog.default_btn, qtbot_left())
    assert settings.model_path == str(store_dir / "mine")
    assert dialog.table.topLevelItem(0).text(0) == "mine (default)"

    new_home = tmp_path / "elsewhere"
    dialogs.dirs.append(str(new_home))
    monkeypatch.delenv("QWEN3TTS_MODELS_DIR")
    settings.models_dir = str(store_dir)
    dialog._move()
    assert (new_home / "mine" / "manifest.json").is_file() and not (store_dir / "mine").exists()
    assert settings.models_dir == str(new_home) and settings.model_path == str(new_home / "mine")
    assert ModelStore().root == new_home  # the command line finds the moved folder too

    dialog.table.setCurrentItem(dialog.table.topLevelItem(0))
    dialogs.answer = True
    qtbot.mouseClick(dialog.remove_btn, qtbot_left())
    assert dialogs.questions and not (new_home / "mine").exists()
    assert dialog.table.topLevelItemCount() == 0 and settings.model_path == ""
    dialog.close()


def test_models_dialog_lists_the_demo_model_as_the_demo(make_window, tmp_path, monkeypatch, demo_bundle):
    store_dir = tmp_path / "models"
    monkeypatch.setenv("QWEN3TTS_MODELS_DIR", str(store_dir))
    store_dir.mkdir()
    shutil.copytree(demo_bundle, store_dir / "demo")
    dialog = make_window(model=False).show_models()
    assert dialog.table.topLevelItem(0).text(3) == "demo"  # neither downloaded nor imported
    dialog.close()


def qtbot_left():
    from PySide6.QtCore import Qt

    return Qt.MouseButton.LeftButton


def hub_models(settings) -> str:
    import os

    return os.environ["QWEN3TTS_MODELS_DIR"]


def test_gui_model_option_takes_an_installed_name(tmp_path, monkeypatch):
    from qwen3tts_gui.engine_adapter import installed_model

    monkeypatch.setenv("QWEN3TTS_MODELS_DIR", str(tmp_path / "models"))
    (tmp_path / "models" / "mine").mkdir(parents=True)
    (tmp_path / "models" / "mine" / "manifest.json").write_text("{}")
    assert installed_model(Path("mine")) == tmp_path / "models" / "mine"
    assert installed_model(Path("not-installed")) == Path("not-installed")  # app.py then says it does not exist


def test_a_download_does_not_replace_the_open_model(qtbot, make_window, tmp_path):
    window = make_window(model=True)
    before = window.ctx.model_path
    window.downloader.installed.emit(tmp_path / "models" / "new-model")
    qtbot.wait(50)
    assert window.ctx.model_path == before and window.ctx.busy is None  # nothing is being opened
    assert "open it from File > Models" in window.statusBar().currentMessage()


def test_folders_dialog_models_folder_is_shared_with_the_command_line(qtbot, make_window, tmp_path, monkeypatch):
    from qwen3tts_gui.widgets.folders_dialog import FoldersDialog

    monkeypatch.delenv("QWEN3TTS_MODELS_DIR", raising=False)
    window = make_window(model=False)
    dialog = FoldersDialog(window.ctx, window)
    dialog.models.setText(str(tmp_path / "my models"))
    dialog.accept()
    assert window.ctx.models_folder() == tmp_path / "my models" == ModelStore().root


def test_models_dialog_token_opens_a_gated_repository(qtbot, make_window, hub, dialogs):
    gated = "Qwen/Gated-Fine-Tune"
    hub.repos[gated] = Repo.from_folder(TINY, token="hf_secret")
    window = make_window(model=False)
    dialog = window.show_models()
    dialog.panel.model_combo.setEditText(gated)
    with qtbot.waitSignal(window.downloader.failed, timeout=10000):
        qtbot.mouseClick(dialog.panel.download_btn, qtbot_left())
    assert "gated" in dialogs.errors[-1][1] and "token" in dialogs.errors[-1][1]
    dialog.token.setText("hf_secret")
    dialog.token.editingFinished.emit()
    with qtbot.waitSignal(window.ctx.model_changed, timeout=20000):
        qtbot.mouseClick(dialog.panel.download_btn, qtbot_left())
    assert window.ctx.model_path.name == "Gated-Fine-Tune"  # any repository id; named after its last part
    dialog.close()


def test_precision_choice_is_fast_by_default_with_exact_one_click_away(make_window, hub, settings):
    """A first download is offered as 8-bit ("Fast"), the exact fp16 right next to it, and the trade-off is
    stated in one sentence beside the choice; what is converted is the precision behind the label."""
    window = make_window(model=False)
    panel = window.welcome.download
    combo = panel.precision_combo
    assert settings.download_precision == ""  # nothing remembered: the store's default applies
    assert (combo.currentText(), panel.precision()) == ("Fast (8-bit)", "q8")
    assert (combo.itemText(1), combo.itemData(1)) == ("Exact (fp16)", "fp16")
    assert panel.trade_off.text().count(".") == 1 and "Exact (fp16)" in panel.trade_off.text()
    assert "after conversion to Fast (8-bit)." in panel.sizes.text()
    combo.setCurrentIndex(1)
    assert panel.precision() == "fp16" and "after conversion to Exact (fp16)." in panel.sizes.text()
