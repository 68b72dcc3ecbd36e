"""Started without a display (over SSH, say), the app says so in one line and exits non-zero; Qt's own abort
named libxcb-cursor0, which was installed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from qwen3tts_gui.app import display_problem

ROOT = Path(__file__).resolve().parent.parent


def test_app_without_a_display_says_so_in_one_line(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    env.update(HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path / "config"), XDG_DATA_HOME=str(tmp_path / "data"),
               XDG_STATE_HOME=str(tmp_path / "state"), PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-m", "qwen3tts_gui"], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode != 0
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("qwen3tts-gui: no display"), out.stderr
    assert "libxcb" not in out.stderr and "Traceback" not in out.stderr
    assert "for testing only" in lines[0]  # offscreen is named, as a testing aid, not as the way to run it


def test_a_display_or_a_chosen_platform_needs_no_message():
    assert display_problem({}, [], "linux") is not None
    assert display_problem({"QT_QPA_PLATFORM": "xcb"}, [], "linux") is not None
    assert display_problem({"DISPLAY": ":0"}, [], "linux") is None
    assert display_problem({"WAYLAND_DISPLAY": "wayland-0"}, [], "linux") is None
    assert display_problem({"QT_QPA_PLATFORM": "offscreen"}, [], "linux") is None
    assert display_problem({}, ["-platform", "offscreen"], "linux") is None
    assert display_problem({}, [], "darwin") is None and display_problem({}, [], "win32") is None
