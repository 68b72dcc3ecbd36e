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


@pytest.fixture
def app_style():
    """The app's own style sheet (padding, bold buttons): the window as users see it, wider buttons included."""
    from qwen3tts_gui.app import load_style_sheet

    app = QApplication.instance()
    app.setStyleSheet(load_style_sheet())
    yield
    app.setStyleSheet("")


@pytest.mark.parametrize("size", [(960, 640), (1000, 700)])
def test_voice_pane_keeps_every_button_inside_it_with_the_style_sheet_and_no_microphone(qtbot, make_window,
                                                                                       app_style, size):
    from .fakes import FakeAudioBackend

    window = make_window(backend=FakeAudioBackend(has_input=False))  # "Record (no microphone)": the widest row
    window.resize(*size)
    _settle(qtbot)
    pane = window.splitter.widget(0)
    assert "no microphone" in window.voice_panel.editor.record_btn.text()
    viewport = QRect(pane.viewport().mapTo(window, QPoint(0, 0)), pane.viewport().size())
    buttons = [b for b in pane.findChildren(QAbstractButton) if b.isVisibleTo(window) and b.width()]
    assert {"Delete", "● Record (no microphone)"} <= {b.text() for b in buttons}
    for button in buttons:
        rect = QRect(button.mapTo(window, QPoint(0, 0)), button.size())
        assert viewport.contains(QRect(rect.left(), viewport.top(), rect.width(), 1)), \
            f"{button.text()}: {rect} leaves its pane {viewport}"
    assert _cut_off(window, window.splitter) == []


def test_models_dialog_shows_the_whole_catalogue_at_its_default_size(qtbot, make_window, app_style):
    window = make_window()
    dialog = window.show_models()
    _settle(qtbot)
    tree = dialog.available
    assert tree.topLevelItemCount() >= 3
    height = tree.viewport().height()
    shown = [i for i in range(tree.topLevelItemCount())
             if 0 <= tree.visualItemRect(tree.topLevelItem(i)).top()
             and tree.visualItemRect(tree.topLevelItem(i)).bottom() < height]
    assert len(shown) == tree.topLevelItemCount(), \
        f"only {len(shown)} whole rows of the catalogue fit in {tree.viewport().size()}"
    # the installed models keep room for three rows beside a catalogue that holds the Whisper models too
    assert dialog.table.viewport().height() >= 3 * tree.sizeHintForRow(0)
    dialog.close()
