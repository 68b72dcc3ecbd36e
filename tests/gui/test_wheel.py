"""The wheel scrolls the pane under the pointer; it changes a combo or spin box only once that has been clicked."""

from __future__ import annotations

from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QWheelEvent
from PySide6.QtWidgets import QApplication, QScrollArea

from .fakes import speech_like


def _wheel(widget, steps: int = -3) -> None:
    """Turn the wheel over the middle of `widget` (negative: towards the user, i.e. scroll down)."""
    target = widget  # Qt delivers a synthetic wheel to its receiver only (no propagation to parents)
    pos = QPointF(widget.rect().center())
    glob = QPointF(widget.mapToGlobal(widget.rect().center()))
    event = QWheelEvent(pos, glob, QPoint(0, 0), QPoint(0, 120 * steps), Qt.MouseButton.NoButton,
                        Qt.KeyboardModifier.NoModifier, Qt.ScrollPhase.NoScrollPhase, False)
    QApplication.sendEvent(target, event)


def _scroll_area(widget) -> QScrollArea:
    parent = widget.parentWidget()
    while not isinstance(parent, QScrollArea):
        parent = parent.parentWidget()
    return parent


def test_wheel_over_the_voice_language_scrolls_the_pane_and_keeps_the_language(qtbot, make_window):
    window = make_window()
    window.resize(960, 640)
    editor = window.voice_panel.editor
    editor.set_reference(speech_like(4.0, 48000).reshape(-1, 1), 48000, None)
    qtbot.wait(50)
    combo = editor.lang_combo
    combo.setCurrentIndex(0)
    before = combo.currentIndex()
    window.text_edit.setFocus()
    bar = _scroll_area(combo).verticalScrollBar()
    assert bar.maximum() > 0, "at 960x640 the voice pane scrolls"
    bar.setValue(0)
    _wheel(combo)
    assert combo.currentIndex() == before
    assert bar.value() > 0, "the pane under the pointer scrolled"

    combo.setFocus()  # clicked: now the wheel is the combo's
    qtbot.waitUntil(combo.hasFocus)
    _wheel(combo, steps=-1)
    assert combo.currentIndex() != before


def test_wheel_over_a_settings_spin_box_leaves_its_value(qtbot, make_window):
    window = make_window()
    window.resize(960, 640)
    box = window.settings_box
    box.toggle.setChecked(True)
    qtbot.wait(50)
    window.text_edit.setFocus()
    box.seed_random.setChecked(False)
    for spin in (box.seed, box.max_frames):
        value = spin.value()
        _wheel(spin)
        assert spin.value() == value
    spin = box.max_frames
    spin.setFocus()  # clicked: now the wheel is the spin box's
    qtbot.waitUntil(spin.hasFocus)
    value = spin.value()
    _wheel(spin, steps=1)
    assert spin.value() != value
