"""The Studio and Batch tabs fit at the smallest window size (960x640) and at 1000x700: nothing is cut off at
the sides (panels give way, labels elide, the settings grid goes to one column), only vertical scrolling."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint, QRect
from PySide6.QtWidgets import QAbstractButton, QApplication, QScrollArea, QWidget


def _settle(qtbot) -> None:
    for _ in range(3):
        QApplication.processEvents()
        qtbot.wait(20)


def _cut_off(window, root: QWidget) -> list[str]:
    """Visible buttons whose horizontal extent leaves the window or their scroll area's viewport, or that are
    squeezed narrower than their text."""
    problems = []
    win = QRect(QPoint(0, 0), window.size())
    for button in root.findChildren(QAbstractButton):
        if not button.isVisibleTo(window) or button.width() == 0:
            continue
        rect = QRect(button.mapTo(window, QPoint(0, 0)), button.size())
        area = button.parent()
        while area is not None and not isinstance(area, QScrollArea):
            area = area.parent()
        bounds = win
        if area is not None:
            viewport = area.viewport()
            bounds = QRect(viewport.mapTo(window, QPoint(0, 0)), viewport.size())
        name = button.text() or button.objectName() or type(button).__name__
        if rect.left() < bounds.left() or rect.right() > bounds.right():
            problems.append(f"{name}: {rect} outside {bounds}")
        elif button.width() < button.minimumSizeHint().width():
            problems.append(f"{name}: squeezed to {button.width()} px, its text needs {button.minimumSizeHint().width()}")
    return problems


@pytest.mark.parametrize("size", [(960, 640), (1000, 700)])
@pytest.mark.parametrize("settings_open", [False, True])
def test_studio_fits(qtbot, make_window, size, settings_open):
    window = make_window()
    window.text_edit.setPlainText("Hello there.")
    assert window.generate()
    qtbot.waitUntil(lambda: window.synth_worker is None, timeout=10000)
    window.settings_box.toggle.setChecked(settings_open)
    window.resize(*size)
    _settle(qtbot)
    assert (window.width(), window.height()) == size
    for i in range(window.splitter.count()):
        area = window.splitter.widget(i)
        assert area.horizontalScrollBar().maximum() == 0, f"pane {i} needs sideways scrolling"
    assert _cut_off(window, window.splitter) == []


@pytest.mark.parametrize("size", [(960, 640), (1000, 700)])
def test_batch_fits(qtbot, make_window, size):
    window = make_window()
    window.tabs.setCurrentWidget(window.batch)
    window.resize(*size)
    _settle(qtbot)
    assert _cut_off(window, window.batch) == []


def test_new_voice_editor_fits_while_analysing(qtbot, make_window):
    from .fakes import speech_like

    window = make_window()
    editor = window.voice_panel.editor
    editor.set_reference(speech_like(4.0, 48000).reshape(-1, 1), 48000, None)
    editor.create_status.setText("Analysing the reference…")
    window.resize(960, 640)
    _settle(qtbot)
    left = window.splitter.widget(0)
    assert left.widget().minimumSizeHint().width() <= left.viewport().width()
    assert _cut_off(window, left) == []
