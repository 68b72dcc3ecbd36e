"""Every step from a reference to a saved take from the keyboard alone, in a sensible focus order: load a
reference (Ctrl+Shift+O), name it, Tab to the language and the transcript, Tab on (no tab character typed),
Enter in the name or Ctrl+Shift+C creates the voice, the text box is next, Ctrl+Return generates, Ctrl+P plays,
Ctrl+S saves."""

from __future__ import annotations

import soundfile as sf
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from .fakes import speech_like

CTRL = Qt.KeyboardModifier.ControlModifier
CTRL_SHIFT = Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier


def _focus():
    return QApplication.focusWidget()


def _key(qtbot, key, modifier=Qt.KeyboardModifier.NoModifier) -> None:
    """A key pressed by the user: it goes to whatever has the focus."""
    qtbot.keyClick(_focus(), key, modifier)


def _type(qtbot, text: str) -> None:
    qtbot.keyClicks(_focus(), text)


def _reference_file(tmp_path):
    path = tmp_path / "speaker.wav"
    sf.write(path, speech_like(4.0, 24000), 24000)
    return path


def test_reference_to_saved_take_from_the_keyboard(qtbot, make_window, dialogs, tmp_path):
    window = make_window(voice=False)
    window.activateWindow()
    window.text_edit.setFocus()
    qtbot.waitUntil(lambda: _focus() is window.text_edit)
    editor = window.voice_panel.editor

    dialogs.files.append(str(_reference_file(tmp_path)))
    _key(qtbot, Qt.Key.Key_O, CTRL_SHIFT)  # Voice > New voice from file…
    qtbot.waitUntil(lambda: editor.frame.isVisible())
    assert _focus() is editor.name_edit, "after loading, the name is next"
    assert editor.name_edit.selectedText() == "speaker", "the file's name, selected: typing replaces it"
    _type(qtbot, "Anna")
    _key(qtbot, Qt.Key.Key_Tab)
    assert _focus() is editor.lang_combo
    _key(qtbot, Qt.Key.Key_Tab)
    assert _focus() is editor.transcript
    _type(qtbot, "Hello there.")
    _key(qtbot, Qt.Key.Key_Tab)
    assert editor.transcript.toPlainText() == "Hello there.", "Tab moved on, it typed no tab character"
    assert _focus() is not editor.transcript

    editor.name_edit.setFocus()
    _key(qtbot, Qt.Key.Key_Return)  # Enter in the name creates the voice
    qtbot.waitUntil(lambda: window.voice_panel.selected_name() == "Anna", timeout=10000)
    entry = window.voice_panel.selected_entry()
    assert entry.ref_text == "Hello there."
    assert _focus() is window.text_edit, "after the voice, the text is next"

    _type(qtbot, "Hello from the keyboard.")
    _key(qtbot, Qt.Key.Key_Tab)
    assert window.text_edit.toPlainText() == "Hello from the keyboard.", "Tab moved on, it typed no tab character"
    window.text_edit.setFocus()
    _key(qtbot, Qt.Key.Key_Return, CTRL)
    assert window.synth_worker is not None, dialogs.errors
    qtbot.waitUntil(lambda: window.synth_worker is None, timeout=10000)
    assert window.output.current is not None and not dialogs.errors

    _key(qtbot, Qt.Key.Key_P, CTRL)
    qtbot.waitUntil(lambda: window.ctx.player.playing, timeout=5000)
    _key(qtbot, Qt.Key.Key_P, CTRL)  # and stops
    qtbot.waitUntil(lambda: not window.ctx.player.playing, timeout=5000)

    out = tmp_path / "take.wav"
    dialogs.files.append(str(out))
    _key(qtbot, Qt.Key.Key_S, CTRL)
    qtbot.waitUntil(out.exists, timeout=10000)
    assert sf.info(out).frames == len(window.output.current.audio)


def test_create_voice_has_a_shortcut(qtbot, make_window, dialogs, tmp_path):
    window = make_window(voice=False)
    window.activateWindow()
    editor = window.voice_panel.editor
    dialogs.files.append(str(_reference_file(tmp_path)))
    window.voice_panel.choose_reference_file()
    qtbot.waitUntil(lambda: editor.frame.isVisible())
    editor.lang_combo.setFocus()
    _key(qtbot, Qt.Key.Key_C, CTRL_SHIFT)
    qtbot.waitUntil(lambda: window.voice_panel.selected_name() == "speaker", timeout=10000)


def test_tab_in_the_text_boxes_moves_focus(qtbot, make_window):
    window = make_window()
    boxes = [window.text_edit, window.voice_panel.editor.transcript, window.speaker_panel.instruct_edit,
             window.design_panel.description]
    assert all(box.tabChangesFocus() for box in boxes)
