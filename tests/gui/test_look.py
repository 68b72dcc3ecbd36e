"""The README screenshots are taken with the app's own look: the same style sheet and icon lookup."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _screenshot_script():
    spec = importlib.util.spec_from_file_location("make_screenshots", ROOT / "docs" / "screenshots" /
                                                  "make_screenshots.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_screenshot_script_sets_up_the_app_as_the_app_does(qapp):
    from qwen3tts_gui.app import load_style_sheet
    from qwen3tts_gui.data.paths import resource

    try:
        app = _screenshot_script().make_app()
        assert app is qapp
        sheet = load_style_sheet()
        assert sheet and app.styleSheet() == sheet
        icon = resource("icon.svg")
        assert icon is not None and not app.windowIcon().isNull()
    finally:
        qapp.setStyleSheet("")
