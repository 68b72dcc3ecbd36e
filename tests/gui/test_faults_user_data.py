"""Whatever is in the data, settings or models folders, the app starts: a damaged take, an unusable stored value,
a FIFO where a file should be or a path no folder can have is skipped, named once where the user sees it (takes
in their own message, not under "Some settings were reset") and left for the user.

Part of the fault suite (tests/faults); here because it needs the GUI fixtures.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from PySide6.QtCore import QCoreApplication, QSettings

from qwen3tts_gui import APP_ID, APP_NAME
from qwen3tts_gui.data import settings as settings_module
from qwen3tts_gui.data.paths import data_dir, takes_dir
from qwen3tts_gui.data.take_store import TakeStore
from tests.faults.test_faults_take_history import (
    _damage_empty,
    _damage_huge_audio_header,
    _damage_truncated,
    _meta_edit,
    _take,
    settings_a_string,
    text_a_number,
)

ROOT = Path(__file__).resolve().parents[2]
TOO_LONG = "/" + "/".join(["a" * 200] * 30)  # 6000 characters: more than any file system allows


def _damaged_history() -> list[str]:
    """Takes 1-7 in the take folder, 2-6 damaged in five ways, a stray '²' folder; the damaged folders' names."""
    store = TakeStore(takes_dir())
    for n in range(1, 8):
        assert store.save(_take(n, f"Take {n}."))
    damages = [_damage_truncated, _damage_empty, _damage_huge_audio_header, _meta_edit(text_a_number),
               _meta_edit(settings_a_string)]
    for n, damage in zip(range(2, 7), damages, strict=True):
        damage(takes_dir() / f"{n:06d}" / "take.npz")
    (takes_dir() / "²").mkdir()
    return [f"{n:06d}" for n in range(2, 7)]


def test_the_window_opens_whatever_is_in_the_take_history(qtbot, make_window, dialogs):
    damaged = _damaged_history()
    window = make_window(model=False, voice=False)
    assert sorted(t.number for t in window.output.takes) == [1, 7]
    assert [title for title, _ in dialogs.notices] == ["Some takes could not be read"]
    text = dialogs.notices[0][1]
    for name in damaged:
        assert text.count(name) == 1, (name, text)
    assert window.history.count == 7  # the next take is #8: a damaged take's number is never reused


@pytest.mark.parametrize("values", [
    '{"top_k": 1e30}', '{"max_frames": Infinity}', '{"top_k": 99999999999}', '{"temperature": "hot"}',
    '{"greedy": "yes", "top_p": -1}', '{"max_frames": 12.5}',
], ids=["top_k_1e30", "max_frames_infinity", "top_k_huge", "temperature_text", "greedy_text", "frames_fraction"])
def test_unusable_generation_values_fall_back_to_the_model_defaults(qtbot, make_window, dialogs, settings, tmp_path,
                                                                    values):
    raw = QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)
    raw.setValue("generate/values", values)
    raw.sync()
    window = make_window(model=True, voice=False)  # the model's defaults are loaded on top: the second reader
    box = window.settings_box
    assert (box.top_k.value(), box.max_frames.value(), box.greedy.isChecked()) == (50, 0, False)
    assert abs(box.temperature.value() - 0.9) < 1e-9 and box.top_p.value() == 1.0
    assert [title for title, _ in dialogs.notices] == ["Some settings were reset"]
    bad = [k for k in json.loads(values)]
    for key in bad:
        assert key in dialogs.notices[0][1]
    assert not set(bad) & set(settings.generation_values)  # forgotten: named once, not at every start
    assert settings.take_problems() == []


def test_a_models_folder_setting_no_folder_can_have_is_reset(qtbot, make_window, dialogs, settings):
    settings.models_dir = TOO_LONG
    window = make_window(model=False, voice=False)
    assert window.ctx.models_folder() == data_dir() / "models"
    assert [title for title, _ in dialogs.notices] == ["Some settings were reset"]
    assert "folders/models" in dialogs.notices[0][1] and settings.models_dir == ""


def test_a_models_folder_variable_no_folder_can_have_is_named(qtbot, make_window, dialogs, monkeypatch):
    monkeypatch.setenv("QWEN3TTS_MODELS_DIR", TOO_LONG)
    window = make_window(model=False, voice=False)
    assert window.ctx.models_folder() == data_dir() / "models"
    assert [title for title, _ in dialogs.notices] == ["The models folder cannot be used"]
    assert "QWEN3TTS_MODELS_DIR" in dialogs.notices[0][1]


@pytest.fixture
def app_names():
    """The app's names, and no settings files yet (Qt fixes its settings folder once per process: files the
    tests make there are removed before and after)."""
    before = QCoreApplication.organizationName(), QCoreApplication.applicationName()
    QCoreApplication.setOrganizationName(APP_NAME)
    QCoreApplication.setApplicationName(APP_ID)

    def clean():
        for path in settings_module._settings_files():
            for p in path.parent.glob(path.name + "*"):
                shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
    clean()
    yield
    clean()
    QCoreApplication.setOrganizationName(before[0])
    QCoreApplication.setApplicationName(before[1])


def test_the_checked_settings_files_are_the_ones_qt_reads(qtbot, app_names):
    assert str(settings_module._settings_files()[0]) == QSettings().fileName()


@pytest.mark.parametrize("which", [0, 1], ids=["application_file", "organisation_file"])
@pytest.mark.parametrize("kind", ["fifo", "folder", "huge"])
def test_a_settings_file_that_is_not_a_file_is_moved_aside(qtbot, app_names, which, kind):
    path = settings_module._settings_files()[which]
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "huge":
        with open(path, "wb") as f:
            f.truncate(1_500_000_000)
    else:
        os.mkfifo(path) if kind == "fifo" else path.mkdir()
    out: dict = {}
    t = threading.Thread(target=lambda: out.setdefault("settings", settings_module.user_settings()), daemon=True)
    t.start()
    t.join(30)
    if t.is_alive():
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))  # release Qt's read, then fail
        t.join(10)
        pytest.fail("reading the settings blocked on a FIFO")
    settings = out["settings"]
    problems = settings.take_problems()
    assert len(problems) == 1 and str(path) in problems[0] and "damaged" in problems[0], problems
    assert path.with_name(path.name + ".damaged").exists()  # kept for the user, renamed
    settings.text = "kept"
    settings.sync()
    assert settings_module._settings_files()[0].is_file()


def test_the_app_starts_with_fifos_and_damage_everywhere(tmp_path, private_dirs):
    """The real start (app.main) in a fresh process: FIFOs as the settings file and a take file, damaged takes
    and an unusable models folder variable. The window opens and each problem is named."""
    damaged = _damaged_history()
    os.unlink(takes_dir() / "000007" / "take.npz")
    os.mkfifo(takes_dir() / "000007" / "take.npz")
    config = Path(os.environ["XDG_CONFIG_HOME"]) / APP_NAME
    config.mkdir(parents=True)
    os.mkfifo(config / f"{APP_ID}.conf")
    code = (
        "import sys\n"
        "from PySide6.QtCore import QTimer\n"
        "from PySide6.QtWidgets import QApplication, QMessageBox\n"
        "from qwen3tts_gui import app\n"
        "from qwen3tts_gui.main_window import MainWindow\n"
        "qapp = QApplication(['qwen3tts-gui'])\n"
        "def report():\n"
        "    tops = QApplication.topLevelWidgets()\n"
        "    if any(isinstance(w, MainWindow) and w.history.loading for w in tops):\n"
        "        return QTimer.singleShot(200, report)  # the history is still being read\n"
        "    print('WINDOWS', sum(isinstance(w, MainWindow) and w.isVisible() for w in tops))\n"
        "    for b in tops:\n"
        "        if isinstance(b, QMessageBox) and b.isVisible():\n"
        "            print('NOTICE', b.windowTitle(), '|', b.text().replace(chr(10), ' // '))\n"
        "    sys.stdout.flush()\n"
        "    qapp.quit()\n"
        "QTimer.singleShot(2000, report)\n"
        "sys.exit(app.main([]))\n"
    )
    env = {**os.environ, "QWEN3TTS_MODELS_DIR": TOO_LONG, "PYTHONPATH": str(ROOT)}
    fifos = [config / f"{APP_ID}.conf", takes_dir() / "000007" / "take.npz"]
    try:
        r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                           timeout=180)
    except subprocess.TimeoutExpired:
        pytest.fail("the app did not start within 180 s (blocked on a FIFO?)")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
    lines = r.stdout.splitlines()
    assert "WINDOWS 1" in lines, r.stdout
    notices = {line.split(" | ")[0][len("NOTICE "):]: line.split(" | ", 1)[1] for line in lines
               if line.startswith("NOTICE ")}
    assert set(notices) == {"Some settings were reset", "Some takes could not be read",
                            "The models folder cannot be used"}, notices
    for name in [*damaged, "000007"]:
        assert notices["Some takes could not be read"].count(name) == 1
    assert f"{APP_ID}.conf" in notices["Some settings were reset"]
    assert stat.S_ISFIFO(os.lstat(fifos[1]).st_mode)  # the take is left as it was
    assert stat.S_ISFIFO(os.lstat(config / f"{APP_ID}.conf.damaged").st_mode)  # the settings file moved aside


@pytest.fixture
def full_takes_folder():
    """The take folder on a tmpfs that is already full (a real full disk); skips where mounting is not allowed."""
    folder = takes_dir()
    folder.mkdir(parents=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(folder)], capture_output=True)
    if r.returncode != 0:
        pytest.skip("cannot mount a small tmpfs here (needs root)")
    try:
        with open(folder / "filler", "wb") as f:
            while True:
                f.write(bytes(4096))
                f.flush()
    except OSError:
        pass
    yield folder
    subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def test_a_take_not_kept_on_a_full_disk_is_said_and_stays(qtbot, make_window, dialogs, full_takes_folder):
    window = make_window()
    window.text_edit.setPlainText("A take the disk has no room for.")
    assert window.generate()
    qtbot.waitUntil(lambda: window.synth_worker is None and window.history.writing == 0, timeout=10000)
    assert [title for title, _ in dialogs.notices] == ["A take was not kept"]
    text = dialogs.notices[0][1]
    assert "#1" in text and "the disk is full" in text and "Save take as" in text
    assert [t.number for t in window.output.takes] == [1] and window.output.current.number == 1
    assert window.output.save_btn.isEnabled()  # it can still be saved elsewhere
    assert os.listdir(full_takes_folder) == ["filler"]  # no half-written take left behind


def test_takes_are_written_off_the_gui_thread(qtbot, make_window, monkeypatch):
    threads = []
    real_save = TakeStore.save
    monkeypatch.setattr(TakeStore, "save", lambda self, take: threads.append(threading.current_thread())
                        or real_save(self, take))
    window = make_window()
    window.text_edit.setPlainText("Written in the background.")
    assert window.generate()
    qtbot.waitUntil(lambda: window.synth_worker is None and window.history.writing == 0, timeout=10000)
    assert len(threads) == 1 and threads[0] is not threading.main_thread()
    assert (takes_dir() / "000001" / "take.npz").is_file()


def _write(content: bytes):
    def make(path: Path) -> None:
        path.write_bytes(content)
    return make


def _sparse(size: int):
    def make(path: Path) -> None:
        with open(path, "wb") as f:
            f.truncate(size)
    return make


def _fifo_file(path: Path) -> None:
    os.mkfifo(path)


def _folder_file(path: Path) -> None:
    path.mkdir()


READER_DAMAGE = {
    "truncated": _write(b'[["One.", "", "auto", ""], ["Tw'),
    "empty": _write(b""),
    "wrong_type": _write(b'{"lines": 3}'),
    "not_utf8": _write(b"\xff\xfe\x00bad"),
    "huge": _sparse(1_500_000_000),
    "fifo": _fifo_file,
    "folder": _folder_file,
}


def _start_within(make_window, seconds: float, fifo: Path | None):
    """make_window() in this thread, failing instead of hanging when a reader blocks on `fifo` (a watchdog
    writer releases it)."""
    done = threading.Event()

    def watchdog():
        if not done.wait(seconds) and fifo is not None:
            try:
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass
    threading.Thread(target=watchdog, daemon=True).start()
    window = make_window(model=False, voice=False)
    done.set()
    return window


@pytest.mark.parametrize("damage", list(READER_DAMAGE), ids=list(READER_DAMAGE))
def test_damaged_batch_lines_are_set_aside_and_named(qtbot, make_window, dialogs, damage):
    from qwen3tts_gui.data.batch_store import LINES_FILE

    path = data_dir() / LINES_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    READER_DAMAGE[damage](path)
    if damage == "wrong_type":
        path.write_text('[["One.", 5, "auto"], "two", ["Three.", "", "auto", ""]]')  # rows of the wrong type
    window = _start_within(make_window, 30, path if damage == "fifo" else None)
    if damage == "wrong_type":  # the usable row loads, the others are dropped
        assert [ln.text for ln in window.batch.model.lines] == ["Three."]
        return
    assert window.batch.model.rowCount() == 0
    titles = [title for title, _ in dialogs.notices]
    if damage == "empty":
        assert titles == ["The batch lines could not be read"]
    else:
        assert titles == ["The batch lines could not be read"], dialogs.notices
    assert os.path.lexists(path.with_name("batch lines.damaged.json"))  # kept, and not overwritten at the next save
    window.batch.add_rows([("New line.", "", "auto")])
    window.batch.save_lines()
    assert json.loads(path.read_text(encoding="utf-8")) == [["New line.", "", "auto", ""]]


def test_batch_lines_move_out_of_the_settings_file(qtbot, make_window, settings, tmp_path):
    from qwen3tts_gui.data.batch_store import LINES_FILE

    settings.batch_lines = [["Kept line.", "", "auto", ""]] * 3
    settings.sync()
    window = make_window(model=False, voice=False)
    assert [ln.text for ln in window.batch.model.lines] == ["Kept line."] * 3
    assert json.loads((data_dir() / LINES_FILE).read_text(encoding="utf-8")) == [["Kept line.", "", "auto", ""]] * 3
    settings.sync()
    assert "batch/lines" not in QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat).allKeys()


@pytest.mark.parametrize("damage", ["empty", "not_utf8", "huge", "fifo", "folder"])
def test_a_damaged_saved_text_is_set_aside_and_named(qtbot, make_window, dialogs, damage):
    from qwen3tts_gui.data.saved_text import TEXT_FILE

    path = data_dir() / TEXT_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    READER_DAMAGE[damage](path)
    window = _start_within(make_window, 30, path if damage == "fifo" else None)
    assert window.text_edit.toPlainText() == ""
    if damage == "empty":  # an empty text is a text
        assert dialogs.notices == []
        return
    assert [title for title, _ in dialogs.notices] == ["The text from last time was not loaded"]
    assert os.path.lexists(path.with_name("text.unread.txt"))


def test_a_text_too_long_for_the_text_box_is_not_loaded_and_not_spoken(qtbot, make_window, dialogs, settings):
    from qwen3tts_gui.data.saved_text import MAX_CHARS, TEXT_FILE

    settings.text = "x" * (MAX_CHARS + 1)  # as older versions kept it: moved out, then checked
    window = make_window(model=True, voice=True)
    assert window.text_edit.toPlainText() == ""
    assert [title for title, _ in dialogs.notices] == ["The text from last time was not loaded"]
    assert (data_dir() / "text.unread.txt").stat().st_size == MAX_CHARS + 1
    assert not (data_dir() / TEXT_FILE).exists() and settings.text == ""
    assert not window.generate("y" * (MAX_CHARS + 1))
    assert dialogs.errors[-1][0] == "Text too long" and f"{MAX_CHARS:,}" in dialogs.errors[-1][1]


@pytest.mark.parametrize("content", [
    b"", b"[generate]\nseed=12\nlanguage=engl", b"\x00\xff\xfe garbage \x00" * 100,
    b"[generate]\nvalues=@Variant(\\0\\0\\0\\x7f\\0\\0\\0\\x2QRect)\nseed=@Invalid()\n",
], ids=["empty", "truncated", "binary", "wrong_types"])
def test_a_damaged_settings_file_gives_defaults_not_a_failed_start(qtbot, app_names, content):
    path = settings_module._settings_files()[0]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    settings = settings_module.user_settings()
    problems = settings.take_problems()  # reads every option: none may raise
    assert all("\n" not in p for p in problems)
    assert isinstance(settings.seed, int) and isinstance(settings.generation_values, dict)
    assert isinstance(settings.language, str)


def test_a_take_whose_voice_file_is_damaged_plays_and_says_why_it_cannot_regenerate(qtbot, make_window, dialogs):
    window = make_window()
    window.text_edit.setPlainText("A take with its voice.")
    assert window.generate()
    qtbot.waitUntil(lambda: window.synth_worker is None and window.history.writing == 0, timeout=10000)
    window.close()
    (takes_dir() / "000001" / "voice.qvoice").write_bytes(b"PK\x03\x04 damaged")
    again = make_window()
    assert [t.number for t in again.output.takes] == [1] and not dialogs.notices
    again.output.history.setCurrentRow(0)
    assert len(again.output.current.audio) > 0
    again.regenerate(again.output.current)
    assert dialogs.errors[-1][0] == "Cannot regenerate" and "voice.qvoice" in dialogs.errors[-1][1]
    assert again.synth_worker is None


def test_the_window_appears_before_the_history_is_read(qtbot, settings, audio, dialogs, fake_synth, tmp_path,
                                                        monkeypatch):
    from qwen3tts_gui.context import AppContext
    from qwen3tts_gui.data.voices import VoiceLibrary
    from qwen3tts_gui.main_window import MainWindow

    store = TakeStore(takes_dir())
    for n in (1, 2):
        assert store.save(_take(n, f"Take {n}."))
    release, real = threading.Event(), TakeStore.load_all
    monkeypatch.setattr(TakeStore, "load_all", lambda self: release.wait(30) and real(self))
    ctx = AppContext(settings, audio, dialogs, open_synth=lambda path: fake_synth,
                     library=VoiceLibrary(tmp_path / "voices"))
    window = MainWindow(ctx)  # returns while the history is still being read
    qtbot.addWidget(window)
    assert window.history.loading and window.output.takes == []
    assert window.history.count == 2  # a take made now is #3 even before the history is shown
    window.output.add_take(_take(3, "Made while the history was read."))
    release.set()
    qtbot.waitUntil(lambda: not window.history.loading, timeout=10000)
    rows = [window.output.history.item(r).data(0x0100) for r in range(window.output.history.count())]
    assert rows == [3, 2, 1]  # newest first, the new take above the kept ones
    window.close()


def test_a_kept_take_is_read_off_the_gui_thread_when_chosen(qtbot, make_window, monkeypatch):
    from qwen3tts_gui.data import take_file

    store = TakeStore(takes_dir())
    for n in (1, 2):
        assert store.save(_take(n, f"Take {n}.", seconds=1.0 + n))
    window = make_window(model=False, voice=False)
    release, real, readers = threading.Event(), take_file.read_arrays, []

    def slow_read(path):
        readers.append(threading.current_thread())
        release.wait(30)
        return real(path)

    monkeypatch.setattr(take_file, "read_arrays", slow_read)
    window.output.history.setCurrentRow(0)  # returns at once: the read waits in its own thread
    assert window.output.current.number == 2 and "Reading take #2" in window.output.info.text()
    release.set()
    qtbot.waitUntil(lambda: len(window.output.wave.samples) == 72000, timeout=10000)
    assert readers and all(t is not threading.main_thread() for t in readers)
    assert window.output.info.text().startswith("3.0 s")


def test_a_take_that_arrives_as_the_app_closes_is_still_kept(qtbot, make_window):
    window = make_window(model=False, voice=False)
    window.close()
    window.history.keep(_take(1, "Finished as the window closed."))
    assert (takes_dir() / "000001" / "take.npz").is_file()
