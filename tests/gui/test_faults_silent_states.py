"""Folders that cannot keep anything (a file or a looping link where the takes, the settings or the data go): the
app starts and works, and says once, in the window, what will not be kept and which path to fix.

Part of the fault suite (tests/faults); here because it needs the GUI fixtures.
"""

from __future__ import annotations

from PySide6.QtCore import QSettings

from qwen3tts_gui.data.paths import data_dir, takes_dir
from qwen3tts_gui.data.settings import Settings

TITLE = "Some of your work will not be kept"


def _generate(qtbot, window, text: str) -> None:
    window.text_edit.setPlainText(text)
    assert window.generate()
    qtbot.waitUntil(lambda: window.synth_worker is None and window.history.writing == 0, timeout=10000)


def _said_once(dialogs) -> str:
    assert [title for title, _ in dialogs.notices] == [TITLE], dialogs.notices
    return dialogs.notices[0][1]


def test_a_takes_folder_that_is_a_file_is_named_once(qtbot, make_window, dialogs):
    takes = takes_dir()
    takes.parent.mkdir(parents=True)
    takes.write_text("my notes, not a folder")
    window = make_window()
    text = _said_once(dialogs)
    assert f"Takes are not kept for the next session: {takes} is a file, not a folder." in text
    for n in (1, 2):  # takes still work in the session; no message box for each of them
        _generate(qtbot, window, f"Take number {n}.")
    assert len(dialogs.notices) == 1 and not dialogs.errors
    assert [t.number for t in window.output.takes] == [1, 2]
    assert str(takes) in window.statusBar().currentMessage()
    assert takes.read_text() == "my notes, not a folder"  # left as it was


def test_a_takes_folder_that_loops_is_named_once(qtbot, make_window, dialogs):
    takes = takes_dir()
    takes.parent.mkdir(parents=True)
    takes.symlink_to(takes)
    window = make_window()
    assert f"{takes} is a link that loops back on itself" in _said_once(dialogs)
    _generate(qtbot, window, "A take with nowhere to go.")
    assert len(dialogs.notices) == 1 and [t.number for t in window.output.takes] == [1]


def test_a_data_folder_that_is_a_file_names_the_file(qtbot, make_window, dialogs):
    data = data_dir()
    data.parent.mkdir(parents=True)
    data.write_text("x")
    make_window(model=False)
    text = _said_once(dialogs)
    # the takes and the text box's text live in it: each says so, naming the data folder (the thing to fix)
    assert f"Takes are not kept for the next session: {data} is a file, not a folder." in text
    assert f"The text box's text is not kept: {data} is a file, not a folder." in text


def test_a_settings_folder_that_is_a_file_is_named_once(qtbot, make_window, dialogs, tmp_path):
    config = tmp_path / "config-file"
    config.write_text("x")
    settings = Settings(QSettings(str(config / "app" / "settings.ini"), QSettings.Format.IniFormat))
    make_window(model=False, window_settings=settings)
    assert f"Settings are not kept: {config} is a file, not a folder." in _said_once(dialogs)


def test_usable_folders_say_nothing(qtbot, make_window, dialogs):
    window = make_window()
    _generate(qtbot, window, "A take kept as usual.")
    assert dialogs.notices == [] and dialogs.errors == []
    assert (takes_dir() / "000001").is_dir()


def test_the_app_started_on_a_config_folder_that_is_a_file_says_so(private_dirs):
    """The real start (python -m qwen3tts_gui, Qt's own settings file): the window opens and names the file."""
    import os
    import subprocess
    import sys
    import time
    from pathlib import Path

    from qwen3tts_gui.data.paths import log_file

    root = Path(__file__).resolve().parents[2]
    config = private_dirs / "config"
    config.write_text("not a folder")
    app = subprocess.Popen([sys.executable, "-m", "qwen3tts_gui"], cwd=root, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True,
                           env=dict(os.environ, PYTHONPATH=str(root), QT_QPA_PLATFORM="offscreen"))
    try:
        end = time.monotonic() + 180
        while app.poll() is None and time.monotonic() < end and not (
                log_file().exists() and "started; log file" in log_file().read_text(encoding="utf-8")):
            time.sleep(0.05)
        assert app.poll() is None, app.communicate()[1][-2000:]  # it starts
    finally:
        app.terminate()
        app.wait(60)
    assert f"Settings are not kept: {config} is a file, not a folder." in log_file().read_text(encoding="utf-8")
    assert config.read_text() == "not a folder"
