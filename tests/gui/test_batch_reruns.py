"""Running a batch again: "No" to replacing files changes nothing, "Run all" asks before making finished lines
again, and a line's unknown voice is marked as soon as the line is there, not only when the batch runs."""

from __future__ import annotations

from PySide6.QtCore import Qt

from qwen3tts_gui.data.batch_lines import LineState
from qwen3tts_gui.widgets.batch_table import VOICE


def _run(qtbot, panel, start) -> bool:
    started = start()
    qtbot.waitUntil(lambda: not panel.running, timeout=20000)
    return started


def _finished_batch(qtbot, make_window, settings, dialogs, tmp_path, lines=3):
    window = make_window()
    panel = window.batch
    settings.batch_dir = str(tmp_path / "out")
    panel._show_folder()
    panel.merge.setChecked(False)
    panel.add_rows([(f"Line number {i}.", "", "auto") for i in range(lines)])
    assert _run(qtbot, panel, panel.run_all)
    assert [ln.state for ln in panel.model.lines] == [LineState.DONE] * lines
    dialogs.questions.clear()
    return window, panel


def _results(panel) -> list[tuple]:
    return [(ln.state, ln.duration, ln.output) for ln in panel.model.lines]


def test_no_to_replacing_files_leaves_the_finished_lines_as_they_were(qtbot, make_window, settings, dialogs,
                                                                     tmp_path, fake_synth):
    _window, panel = _finished_batch(qtbot, make_window, settings, dialogs, tmp_path)
    before = _results(panel)
    assert all(output and duration for _state, duration, output in before)
    calls = len(fake_synth.calls)
    dialogs.choice = 0  # "Run all again"
    dialogs.answer = False  # "3 file(s) ... will be replaced. Go on?" No
    assert not _run(qtbot, panel, panel.run_all)
    assert "will be replaced" in dialogs.questions[-1][1]
    assert _results(panel) == before  # status, duration and output file untouched
    assert len(fake_synth.calls) == calls
    shown = [panel.model.data(panel.model.index(r, c)) for r in range(3) for c in range(panel.model.columnCount())]
    assert "Done" in shown and all(f"{d:.1f} s" in shown for _s, d, _o in before)


def test_run_all_with_finished_lines_offers_the_unfinished_ones(qtbot, make_window, settings, dialogs, tmp_path,
                                                               fake_synth):
    _window, panel = _finished_batch(qtbot, make_window, settings, dialogs, tmp_path)
    panel.add_rows([("A new line.", "", "auto")])
    finished = _results(panel)[:3]
    dialogs.choice = None  # Cancel
    assert not _run(qtbot, panel, panel.run_all)
    title, text, choices = dialogs.questions[-1]
    assert choices == ["Run the unfinished ones", "Run all again"] and "3 of 4 lines are finished" in text
    assert panel.model.lines[3].state == LineState.READY
    calls = len(fake_synth.calls)
    dialogs.choice = 0
    assert _run(qtbot, panel, panel.run_all)
    assert [c["text"] for c in fake_synth.calls[calls:]] == ["A new line."]
    assert _results(panel)[:3] == finished and panel.model.lines[3].state == LineState.DONE
    # all finished: the only choice is to make them all again
    dialogs.choice, dialogs.answer = 0, True  # "Run all again"; yes, replace the files
    calls = len(fake_synth.calls)
    assert _run(qtbot, panel, panel.run_all)
    assert dialogs.questions[-2][2] == ["Run all again"] and "will be replaced" in dialogs.questions[-1][1]
    assert len(fake_synth.calls) == calls + 4


def test_an_unknown_voice_is_marked_when_the_line_is_entered_or_imported(qtbot, make_window, dialogs, tmp_path):
    window = make_window()  # its library holds "Test voice"
    panel, model = window.batch, window.batch.model
    panel.add_rows([("Known.", "Test voice", "auto"), ("Unknown.", "Bob", "auto"), ("Selected.", "", "auto")])
    csv = tmp_path / "lines.csv"
    csv.write_text("text,voice\nImported.,Carol\n", encoding="utf-8")
    assert panel.import_path(csv)

    def marked(row: int) -> bool:
        index = model.index(row, VOICE)
        return (model.data(index).startswith("⚠") and "no voice called" in model.data(index, Qt.ItemDataRole.ToolTipRole)
                and model.data(index, Qt.ItemDataRole.ForegroundRole) is not None)

    assert [marked(r) for r in range(4)] == [False, True, False, True]
    assert model.data(model.index(1, VOICE), Qt.ItemDataRole.EditRole) == "Bob"  # the name itself is kept
    assert all(ln.state == LineState.READY for ln in model.lines)  # marked, not run
    # picking a known voice clears the mark; a voice that appears in the library clears it too
    assert model.setData(model.index(1, VOICE), "Test voice")
    assert not marked(1)
    import numpy as np

    from qwen3tts_gui.engine_adapter import Voice

    window.ctx.library.add(Voice(xvector=np.zeros(32, np.float32), model_id="fake-model", name="Carol"))
    window.ctx.voices_changed.emit()
    assert not marked(3)
