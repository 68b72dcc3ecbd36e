"""The first window fits the screen it opens on (a 1366x768 laptop, the 960x640 minimum): every button of
record-or-load, generate, play and save is on the screen; a saved geometry is restored only where it still
fits. The Models dialog's Download section does not draw over itself."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QByteArray, QPoint, QRect
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QLabel, QWidget

from qwen3tts_gui.widgets.screen_fit import FRAME


def _screen(name: str):
    screen = next((s for s in QGuiApplication.screens() if s.name() == name), None)
    assert screen is not None, "tests/gui/offscreen-screen.json names this screen"
    return screen


def _on_screen(widget: QWidget) -> QRect:
    return QRect(widget.mapToGlobal(QPoint(0, 0)), widget.size())


def _settle(qtbot) -> None:
    qtbot.wait(50)
    QGuiApplication.processEvents()


@pytest.mark.parametrize("name, size", [("Laptop", (1366, 768)), ("Small", (960, 640))])
def test_first_window_fits_the_screen_it_opens_on(qtbot, make_window, name, size):
    screen = _screen(name)
    assert screen.availableGeometry().size().toTuple() == size
    window = make_window()
    window.place_window(screen)
    _settle(qtbot)
    available = screen.availableGeometry()
    if window.isMaximized():
        assert available.contains(window.geometry())
    else:
        assert available.contains(window.geometry().marginsAdded(FRAME)), (window.geometry(), available)
    editor, output = window.voice_panel.editor, window.output
    for button in (editor.new_file_btn, editor.record_btn, output.play_btn, output.save_btn, window.generate_btn):
        assert button.isVisible() and available.contains(_on_screen(button)), \
            f"{button.text()} at {_on_screen(button)} is outside the screen {available}"


def test_saved_geometry_is_restored_only_where_it_still_fits(qtbot, make_window, settings):
    big = make_window()
    big.setGeometry(QRect(100, 80, 1280, 860))
    _settle(qtbot)
    settings.geometry = QByteArray(big.saveGeometry())
    again = make_window()  # same settings: the saved geometry fits the 1920x1080 screen and is kept
    _settle(qtbot)
    assert again.geometry().size().toTuple() == (1280, 860)

    laptop = _screen("Laptop").availableGeometry()
    big.setGeometry(QRect(laptop.x() + 20, 40, 1280, 860))  # saved on the laptop screen, where it does not fit
    _settle(qtbot)
    settings.geometry = QByteArray(big.saveGeometry())
    moved = make_window()
    moved.place_window(_screen("Laptop"))
    _settle(qtbot)
    assert laptop.contains(moved.geometry().marginsAdded(FRAME)), (moved.geometry(), laptop)


def _overlaps(container: QWidget) -> list[str]:
    """Siblings laid out over each other, and word-wrapped labels given less height than their lines need."""
    problems = []
    for parent in [container, *container.findChildren(QWidget)]:
        layout = parent.layout()
        if layout is None:
            continue
        kids = [layout.itemAt(i).widget() for i in range(layout.count())]
        kids = [k for k in kids if k is not None and k.isVisible()]
        for i, a in enumerate(kids):
            for b in kids[i + 1:]:
                if a.geometry().intersects(b.geometry()):
                    problems.append(f"{type(a).__name__} {a.geometry()} overlaps {type(b).__name__} {b.geometry()}")
    for label in container.findChildren(QLabel):
        if label.isVisible() and label.wordWrap() and label.text():
            if label.height() < label.heightForWidth(label.width()):
                problems.append(f"label {label.text()[:30]!r} has {label.height()} px of "
                                f"{label.heightForWidth(label.width())}")
    return problems


@pytest.mark.parametrize("name", ["Desktop", "Laptop"])
def test_models_dialog_download_section_does_not_draw_over_itself(qtbot, make_window, name):
    window = make_window()
    window.place_window(_screen(name))
    dialog = window.show_models()
    _settle(qtbot)
    assert _screen(name).availableGeometry().height() >= dialog.height()
    assert _overlaps(dialog) == []
    dialog.close()
