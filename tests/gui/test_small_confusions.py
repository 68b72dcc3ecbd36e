"""Small things that confused a first user: an old take's Progress figures, a designed voice that looked
disabled, a transcript hint cut off, and a Yes/No question whose answers did not say what they do."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QRect, Qt, QTimer
from PySide6.QtWidgets import QApplication, QMessageBox, QPushButton

from qwen3tts_gui.context import Dialogs

from .fakes import speech_like


def _generate(qtbot, window, text: str) -> None:
    window.text_edit.setPlainText(text)
    assert window.generate()
    qtbot.waitUntil(lambda: window.synth_worker is None, timeout=10000)


def _figures(window) -> tuple[str, str, str, str, str]:
    p = window.progress
    return p.bar.format(), p.elapsed.text(), p.ms_per_frame.text(), p.rtf.text(), p.audio_len.text()


def test_an_old_take_shows_its_own_progress_figures(qtbot, make_window):
    window = make_window()
    _generate(qtbot, window, "A short one.")
    first = window.output.current
    first_figures = _figures(window)
    _generate(qtbot, window, "A much longer line than the first one, so that it has many more frames.")
    second = window.output.current
    assert second.frames > first.frames
    window.output.history.setCurrentRow(1)  # the history lists the newest first
    qtbot.waitUntil(lambda: window.output.current is first)
    bar, elapsed, per_frame, rtf, audio = _figures(window)
    assert bar.startswith(f"Take #{first.number}: {first.frames} frames"), bar
    assert audio == f"{first.result.seconds:.1f} s" == first_figures[4]
    total = first.result.timings.total
    assert elapsed == f"{total:.1f} s" and per_frame == f"{1000 * total / first.frames:.0f} ms"
    np.testing.assert_array_equal(window.progress.tokens.codes(), first.result.codes)


def test_a_designed_voice_is_not_greyed_out_and_says_why_in_its_tooltip(make_window):
    from qwen3tts_gui.engine_adapter import Voice, designed_voice

    window = make_window()
    lib = window.ctx.library
    lib.add(designed_voice(speech_like(2.0, 24000), "What it said.", "A deep calm voice", "vd-model", name="Deep"))
    lib.add(Voice(xvector=np.zeros(32, np.float32), model_id="another-model", name="Foreign"))
    window.ctx.voices_changed.emit()
    items = {window.voice_panel.library.list.item(i).text().split("\n")[0]: window.voice_panel.library.list.item(i)
             for i in range(window.voice_panel.library.list.count())}
    deep, foreign = items["Deep"], items["Foreign"]
    assert deep.foreground().color() != Qt.GlobalColor.gray and deep.data(Qt.ItemDataRole.ForegroundRole) is None
    assert "designed voice" in deep.toolTip() and "clones it" in deep.toolTip()
    assert foreign.foreground().color() == Qt.GlobalColor.gray and "different model" in foreign.toolTip()


def test_the_transcript_hint_is_shown_whole(qtbot, make_window):
    window = make_window()
    editor = window.voice_panel.editor
    editor.set_reference(speech_like(4.0, 48000).reshape(-1, 1), 48000, None)
    window.resize(960, 640)
    for _ in range(3):
        QApplication.processEvents()
        qtbot.wait(20)
    box = editor.transcript
    placeholder = box.placeholderText()
    margin = int(box.document().documentMargin())
    room = box.viewport().rect().adjusted(margin, margin, -margin, -margin)
    needed = box.fontMetrics().boundingRect(QRect(0, 0, room.width(), 10_000), Qt.TextFlag.TextWordWrap,
                                            placeholder)
    assert needed.height() <= room.height(), f"the placeholder needs {needed.height()} px, the box has {room}"
    hint = editor.transcript_hint
    assert hint.isVisibleTo(window) and "timbre" in hint.text() and "delivery" in hint.text()
    assert hint.wordWrap() and hint.height() >= hint.heightForWidth(hint.width())  # every line of it shown
    box.setPlainText("What the reference says.")
    assert not hint.isVisibleTo(window)  # it explains the empty box
    box.clear()
    assert hint.isVisibleTo(window)


def test_importing_a_text_asks_with_buttons_that_name_the_choices(make_window, dialogs, tmp_path):
    panel = make_window().batch
    path = tmp_path / "chapter.txt"
    path.write_text("First sentence.\nSecond sentence.\nThird sentence.\n", encoding="utf-8")
    dialogs.choice = None  # Cancel: nothing imported
    assert not panel.import_path(path) and panel.model.rowCount() == 0
    title, text, choices = dialogs.questions[-1]
    assert choices == ["3 separate lines", "One long text"] and "one long text, or 3 separate lines" in text
    dialogs.choice = 0
    assert panel.import_path(path) and panel.model.rowCount() == 3
    dialogs.choice = 1
    assert panel.import_path(path) and panel.model.rowCount() == 4
    assert panel.model.lines[-1].text == "First sentence.\nSecond sentence.\nThird sentence."


def test_the_real_choice_box_names_its_buttons_and_returns_the_one_pressed(qtbot):
    seen = []

    def press(label: str) -> None:
        box = next(w for w in QApplication.topLevelWidgets() if isinstance(w, QMessageBox) and w.isVisible())
        names = [b.text().replace("&", "") for b in box.findChildren(QPushButton)]
        seen.append(names)
        next(b for b in box.findChildren(QPushButton) if b.text().replace("&", "") == label).click()

    for label, expected in (("3 separate lines", 1), ("One long text", 0), ("Cancel", None)):
        QTimer.singleShot(50, lambda label=label: press(label))
        assert Dialogs().choose(None, "Import text", "Is it one long text?", ["One long text", "3 separate lines"]) \
            == expected
    assert all({"One long text", "3 separate lines", "Cancel"} <= set(names) for names in seen)
    assert not any(name in ("Yes", "No") for names in seen for name in names)
