"""Two copies of the app on one data folder, as real processes: a second launch brings the running window forward
instead of opening another, and where two windows still meet (a lock that could not be taken, a second data
folder pointing at the same takes) every take of both is kept under a number of its own.

Part of the fault suite (tests/faults); here because it needs the GUI fixtures.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from qwen3tts_gui.data.take_store import TakeStore

ROOT = Path(__file__).resolve().parents[2]
STARTED = "started; log file"  # the app's log line once its window is up
ASKED = "another launch asked for this window"


def _env() -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), QT_QPA_PLATFORM="offscreen")
    return env


def _wait_for(check, timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while not check():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def test_two_windows_on_one_takes_folder_keep_every_take(tmp_path):
    folder = tmp_path / "takes"
    folder.mkdir()
    windows = [subprocess.Popen([sys.executable, "-m", "tests.gui.window_process", str(folder), name, "4"],
                                cwd=ROOT, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for name in ("first", "second")]
    try:
        # both have read the (empty) history before either makes a take: both would number from 1
        _wait_for(lambda: all((folder / f"{n}.ready").exists() for n in ("first", "second"))
                  or any(w.poll() is not None for w in windows), 180, "both windows to open")
        (folder / "go").touch()
        outputs = [w.communicate(timeout=180) for w in windows]
    finally:
        for w in windows:
            if w.poll() is None:
                w.kill()
    results = []
    for w, (out, err) in zip(windows, outputs, strict=True):
        assert w.returncode == 0, err[-2000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    for result in results:
        assert result["notices"] == [] and result["errors"] == [], result
    numbers = results[0]["numbers"] + results[1]["numbers"]
    assert sorted(numbers) == list(range(1, 9))  # eight takes, eight numbers, none shared
    kept = TakeStore(folder).load_all()
    assert sorted(t.number for t in kept) == list(range(1, 9))
    texts = {t.number: t.text for t in kept}
    for name, result in zip(("first", "second"), results, strict=True):
        for i, number in enumerate(result["numbers"]):
            assert texts[number] == f"Take {i + 1} of the window called {name}."


@pytest.fixture
def launch():
    """launch() starts the app as a user would (python -m qwen3tts_gui); every copy is ended after the test."""
    apps: list[subprocess.Popen] = []

    def start(*args: str) -> subprocess.Popen:
        apps.append(subprocess.Popen([sys.executable, "-m", "qwen3tts_gui", *args], cwd=ROOT, env=_env(),
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        return apps[-1]

    yield start
    for app in apps:
        if app.poll() is None:
            app.terminate()  # closes the window as a logout would
        try:
            app.wait(60)
        except subprocess.TimeoutExpired:
            app.kill()
            app.wait()


def _log_count(words: str) -> int:
    from qwen3tts_gui.data.paths import log_file

    try:
        return log_file().read_text(encoding="utf-8").count(words)
    except FileNotFoundError:
        return 0


def _wait_started(app: subprocess.Popen, windows: int) -> None:
    _wait_for(lambda: _log_count(STARTED) == windows or app.poll() is not None, 180, "the window to open")
    assert app.poll() is None, app.communicate()[1][-2000:]


def test_a_second_launch_brings_the_running_window_forward(launch):
    first = launch()
    _wait_started(first, 1)
    second = launch()
    out, err = second.communicate(timeout=60)
    assert second.returncode == 0, err[-2000:]
    assert "already open; its window was brought to the front" in err
    assert _log_count(ASKED) == 1  # the first one heard it
    assert _log_count(STARTED) == 1  # the second never opened a window
    assert first.poll() is None


def test_a_second_launch_with_a_model_opens_it_in_the_running_window(launch, tmp_path):
    from engine.demo import make_demo_bundle

    bundle = make_demo_bundle(tmp_path / "demo")
    first = launch()
    _wait_started(first, 1)
    second = launch("--model", str(bundle))
    out, err = second.communicate(timeout=60)
    assert second.returncode == 0 and f"brought to the front and asked to open {bundle}" in err, err[-2000:]
    _wait_for(lambda: _log_count(f"opened model {bundle}") == 1 or first.poll() is not None, 180, "the model")
    assert first.poll() is None and _log_count(STARTED) == 1


def test_a_killed_window_does_not_keep_the_next_launch_out(launch):
    first = launch()
    _wait_started(first, 1)
    first.kill()  # kill -9: no clean-up of the lock or the socket
    first.wait()
    again = launch()
    _wait_started(again, 2)
    third = launch()  # the new window is the one later launches reach
    assert third.wait(60) == 0
    assert _log_count(ASKED) == 1


def test_a_lock_holder_that_does_not_answer_lets_this_launch_open_a_window(tmp_path, monkeypatch):
    from qwen3tts_gui import single_instance
    from qwen3tts_gui.single_instance import LOCK_FILE, SingleInstance, Start

    folder = tmp_path / "data"
    folder.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from filelock import FileLock; "
                               f"lock = FileLock({str(folder / LOCK_FILE)!r}, timeout=0); lock.acquire(); print('held', flush=True); "
                               "time.sleep(120)"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"  # a copy that holds the lock and never listens (hung)
        monkeypatch.setattr(single_instance, "ANSWER_SECONDS", 1.0)
        assert SingleInstance(folder).start() is Start.UNANSWERED
    finally:
        holder.kill()
        holder.wait()
    assert SingleInstance(folder).start() is Start.FIRST  # its death released the lock


def test_a_data_folder_that_is_a_file_does_not_stop_the_start(tmp_path):
    from qwen3tts_gui.single_instance import SingleInstance, Start

    (tmp_path / "data").write_text("x")
    instance = SingleInstance(tmp_path / "data")
    assert instance.start() is Start.UNCHECKED and "data" in (instance.problem or "")
