"""Nothing in the config or the voice library stops the app from starting, and the app
never deletes a models/demo folder it does not recognise as its own demo (and asks before replacing its own).

Part of the fault suite (tests/faults); here because it needs the GUI fixtures.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
from PySide6.QtCore import QSettings

from engine.errors import BundleError
from qwen3tts_gui.app import ensure_home
from qwen3tts_gui.controllers import model_controller as model_controller_module
from qwen3tts_gui.data.paths import models_dir
from qwen3tts_gui.engine_adapter import Voice

ROOT = Path(__file__).resolve().parents[2]


def _bad_library(folder):
    folder.mkdir(parents=True, exist_ok=True)
    Voice(xvector=np.ones(8, np.float32), model_id="m", name="Good").save(folder / "good.qvoice")
    (folder / "dangling.qvoice").symlink_to(folder / "gone.qvoice")
    (folder / "loop.qvoice").symlink_to(folder / "loop.qvoice")
    os.mkfifo(folder / "pipe.qvoice")
    (folder / "damaged.qvoice").write_bytes(b"PK\x03\x04 not really a zip")


def test_bad_library_entries_are_skipped_and_shown_once(qtbot, make_window, dialogs, tmp_path):
    _bad_library(tmp_path / "voices")
    window = make_window(model=False, voice=False)
    names = [window.voice_panel.library.list.item(i).text().split("\n")[0] for i in range(window.voice_panel.library.list.count())]
    assert names == ["Good"]
    assert len(dialogs.notices) == 1
    text = dialogs.notices[0][1]
    for words in ("gone.qvoice, which does not exist", "loops back on itself", "not a regular file",
                  "damaged.qvoice"):
        assert words in text, words
    window.voice_panel.refresh()
    assert len(dialogs.notices) == 1  # once, not at every refresh


def test_out_of_range_settings_are_reset_and_shown_once(qtbot, make_window, dialogs, settings, tmp_path):
    raw = QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)
    raw.setValue("generate/seed", "99999999999999999999")
    raw.setValue("batch/gap_ms", "99999999999")
    raw.setValue("window/tab", "-7")
    raw.setValue("model/recent", json.dumps(["/ok", 5, None]))  # the File menu called addAction(5)
    raw.setValue("folders/voices", "/bad\0path")
    raw.sync()
    window = make_window(model=False, voice=False)
    assert window.settings_box.seed.value() == 1234
    assert len(dialogs.notices) == 1
    for key in ("generate/seed", "batch/gap_ms", "window/tab", "model/recent", "folders/voices"):
        assert key in dialogs.notices[0][1]
    window._fill_recent()
    assert [a.text() for a in window.recent_menu.actions()] == ["(none yet)"]  # the damaged list was reset
    assert settings.take_problems() == [] and settings.seed == 1234 and settings.batch_gap_ms == 500
    assert settings.take_problems() == []  # the bad values were removed: no notice at the next start


def _failing_open(path):
    raise BundleError(f"{path} is damaged")


def test_a_folder_called_demo_that_is_not_our_demo_is_never_deleted(qtbot, make_window, dialogs, monkeypatch):
    demo = models_dir() / "demo"
    demo.mkdir(parents=True)
    (demo / "manifest.json").write_text(json.dumps({"format": "qwen3tts-bundle", "version": 1, "config": {}}))
    (demo / "my recording.wav").write_bytes(b"precious")
    made = []
    monkeypatch.setattr(model_controller_module, "make_demo_bundle", lambda *a, **k: made.append(k))
    window = make_window(model=False, voice=False, open_synth=_failing_open)
    window.open_model(demo)
    qtbot.waitUntil(lambda: window.ctx.job is None, timeout=5000)
    assert (demo / "my recording.wav").read_bytes() == b"precious"
    assert made == [] and dialogs.questions == []
    assert dialogs.errors and "damaged" in dialogs.errors[-1][1]


def test_our_own_broken_demo_is_replaced_only_after_asking(qtbot, make_window, dialogs, monkeypatch):
    demo = models_dir() / "demo"
    demo.mkdir(parents=True)
    (demo / "manifest.json").write_text(json.dumps(
        {"format": "qwen3tts-bundle", "version": 1, "config": {"qwen3tts_studio_demo": True}, "files": {}}))
    made = []
    monkeypatch.setattr(model_controller_module, "make_demo_bundle", lambda dest, **k: made.append((dest, k)) or dest)
    window = make_window(model=False, voice=False, open_synth=_failing_open)
    dialogs.answer = False
    window.open_model(demo)
    qtbot.waitUntil(lambda: window.ctx.job is None, timeout=5000)
    assert len(dialogs.questions) == 1 and made == [] and (demo / "manifest.json").is_file()
    window.models.demo_retried = False
    dialogs.answer = True
    window.open_model(demo)
    qtbot.waitUntil(lambda: bool(made), timeout=5000)
    assert made[0][0] == demo and made[0][1].get("replace") is True


def test_qt_arguments_reach_qt_with_their_values(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "QT_QPA_PLATFORM"}
    code = ("import sys; from qwen3tts_gui.app import parse_args; from PySide6.QtWidgets import QApplication; "
            "a = parse_args(sys.argv[1:]); app = QApplication(['qwen3tts-gui', *a.qt_args]); "
            "print(app.platformName(), a.model)")
    r = subprocess.run([sys.executable, "-c", code, "-platform", "offscreen", "--model", "m"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-500:]
    assert r.stdout.split() == ["offscreen", "m"]


def test_home_unset_falls_back_to_the_account_home(monkeypatch):
    import pwd

    monkeypatch.delenv("HOME", raising=False)
    assert ensure_home() is not None
    assert os.environ["HOME"] == pwd.getpwuid(os.getuid()).pw_dir
    monkeypatch.setenv("HOME", "")
    ensure_home()
    assert os.environ["HOME"] == pwd.getpwuid(os.getuid()).pw_dir
    assert ensure_home() is None  # set: left alone


def test_full_disk_when_saving_a_new_voice_is_a_message(qtbot, make_window, dialogs, monkeypatch):
    import errno

    import engine.voice

    def full(*_a, **_k):
        raise OSError(errno.ENOSPC, "No space left on device")

    window = make_window(model=False, voice=False)
    monkeypatch.setattr(engine.voice, "create_new", full)
    window.voice_panel.editor._voice_created(Voice(xvector=np.ones(8, np.float32), model_id="m", name="Anna"))
    assert dialogs.errors and "disk is full" in dialogs.errors[-1][1]
    assert "Unexpected" not in dialogs.errors[-1][1]


def test_a_fifo_where_the_log_file_goes_does_not_block_the_start(tmp_path):
    import threading

    from qwen3tts_gui import diagnostics

    fifo = tmp_path / "qwen3tts-gui.log"
    os.mkfifo(fifo)
    before, configured = list(diagnostics.log.handlers), list(diagnostics._configured)
    t = threading.Thread(target=diagnostics.setup_logging, args=(fifo,), daemon=True)
    t.start()
    t.join(20)
    try:
        assert not t.is_alive(), "setup_logging blocked opening a FIFO"
    finally:
        for h in diagnostics.log.handlers[len(before):]:
            diagnostics.log.removeHandler(h)
        diagnostics._configured[:] = configured


def test_a_checkpoint_called_demo_is_never_imported_into_the_demo_folder(qtbot, make_window, dialogs, tmp_path,
                                                                         monkeypatch):
    src = tmp_path / "demo"
    src.mkdir()
    targets = []
    monkeypatch.setattr(model_controller_module, "convert_checkpoint",
                        lambda s, dest, **k: targets.append(dest) or dest)
    window = make_window(model=False, voice=False)
    dialogs.dirs = [str(src)]
    window.import_checkpoint()
    qtbot.waitUntil(lambda: bool(targets), timeout=5000)
    assert targets == [models_dir() / "demo (imported)"]


def test_a_model_path_that_cannot_be_checked_does_not_stop_the_start(monkeypatch, tmp_path):
    from qwen3tts_gui import app

    def denied(self):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "exists", denied)
    assert app._exists(tmp_path / "locked" / "model") is True  # opened, so the worker reports the problem


def test_the_demo_is_made_beside_a_demo_folder_that_is_not_ours(qtbot, make_window, monkeypatch):
    old = models_dir() / "demo"
    old.mkdir(parents=True)
    (old / "manifest.json").write_text(json.dumps({"format": "qwen3tts-bundle", "version": 1, "config": {}}))
    made = []
    monkeypatch.setattr(model_controller_module, "make_demo_bundle", lambda dest, **k: made.append(dest) or dest)
    window = make_window(model=False, voice=False)
    window.use_demo_model()
    qtbot.waitUntil(lambda: bool(made), timeout=5000)
    assert made == [models_dir() / "demo (2)"] and (old / "manifest.json").is_file()


def test_a_start_notice_does_not_block_and_does_not_keep_the_app_alive(qtbot):
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QApplication, QMessageBox, QWidget

    from qwen3tts_gui.context import Dialogs

    parent = QWidget()
    qtbot.addWidget(parent)
    Dialogs().notice(parent, "Some voice files were skipped", "x.qvoice is damaged.")  # returns: not modal
    boxes = [w for w in QApplication.topLevelWidgets() if isinstance(w, QMessageBox) and w.isVisible()]
    assert len(boxes) == 1 and not boxes[0].isModal()
    # closing the main window must still quit the app while the notice is open (it kept a killed app running)
    assert not boxes[0].testAttribute(Qt.WidgetAttribute.WA_QuitOnClose)
    boxes[0].close()
