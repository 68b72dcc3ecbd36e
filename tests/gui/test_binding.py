"""The Qt binding itself must be sound: PySide6 6.12.0 on Python 3.11 loses a reference to None per call."""

from qwen3tts_gui.app import binding_problem


def test_qt_binding_keeps_none_alive():
    assert binding_problem() is None
