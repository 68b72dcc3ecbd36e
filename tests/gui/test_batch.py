"""Batch panel: lines in, numbered files out, a bad line does not stop the others, retry, import, close."""

from __future__ import annotations

import json

import numpy as np
import soundfile as sf
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication

from qwen3tts_gui.data.batch_lines import MERGED_NAME
from qwen3tts_gui.data.batch_store import LINES_FILE
from qwen3tts_gui.data.paths import data_dir
from qwen3tts_gui.widgets.batch_table import LANGUAGE

from .fakes import FakeSynthesizer


def _run(qtbot, panel, start):
    assert start()
    qtbot.waitUntil(lambda: not panel.running, timeout=20000)


def test_batch_with_bad_lines(qtbot, make_window, settings, dialogs, tmp_path, fake_synth):
    window = make_window()
    panel = window.batch
    settings.batch_dir = str(tmp_path / "out")
    panel._show_folder()
    panel.merge.setChecked(True)
    panel.gap.setValue(250)
    panel.add_rows([("First line.", "", "auto"), ("Second line is bad.", "", "klingon"),
                    ("Third line.", "Test voice", "english"), ("Fourth line.", "Nobody", "auto")])
    _run(qtbot, panel, panel.run_all)
    states = [ln.state for ln in panel.model.lines]
    assert states == ["done", "failed", "done", "failed"]
    assert panel.model.lines[1].error.startswith("Unknown language 'klingon'")
    assert "Nobody" in panel.model.lines[3].error
    out = tmp_path / "out"
    first, third = out / "001 - First line.wav", out / "003 - Third line.wav"
    a, sr = sf.read(first, dtype="float32")
    c, _ = sf.read(third, dtype="float32")
    assert sr == 24000 and len(a) == panel.model.lines[0].duration * 24000
    merged, _ = sf.read(out / MERGED_NAME, dtype="float32")
    assert len(merged) == len(a) + len(c) + 6000
    assert np.all(merged[len(a) : len(a) + 6000] == 0)
    # two lines became two files; the merged file is named on its own, not counted as a line
    assert panel.progress.format() == (f"Done: 2 lines written, 2 failed (hover the status for the reason), "
                                       f"and the merged file {MERGED_NAME}")
    assert not dialogs.errors  # line failures are shown in the table, not as message boxes

    # fix the bad line and retry only the failed ones
    assert panel.model.setData(panel.model.index(1, LANGUAGE), "english")
    calls_before = len(fake_synth.calls)
    _run(qtbot, panel, panel.retry_failed)
    assert [ln.state for ln in panel.model.lines] == ["done", "done", "done", "failed"]
    assert len(fake_synth.calls) == calls_before + 1  # line 4 fails before reaching the engine
    assert (out / "002 - Second line is bad.wav").is_file()


def test_batch_cancel_and_progress(qtbot, make_window, settings, tmp_path):
    """Two lines at a time (the batch-size setting): both rows show their own progress; cancel stops both."""
    synth = FakeSynthesizer(frame_delay=0.02)
    window = make_window(synth=synth)
    panel = window.batch
    settings.batch_dir = str(tmp_path / "out")
    panel.at_once.setValue(2)
    assert settings.batch_size == 2  # remembered
    panel.add_rows([(f"Line number {i} with some words in it.", "", "auto") for i in range(5)])
    assert panel.run_all()
    assert not window.generate_btn.isEnabled() and not panel.at_once.isEnabled()  # one engine job at a time
    qtbot.waitUntil(lambda: "left" in panel.progress.format(), timeout=10000)  # time left, once it can tell

    def generating() -> list[int]:
        return [i for i, ln in enumerate(panel.model.lines) if ln.state == "running"]

    qtbot.waitUntil(lambda: len(generating()) == 2 and generating()[0] > 0, timeout=5000)
    running = generating()  # the first pair is done, the next two generate side by side
    qtbot.waitUntil(lambda: all(panel.model.lines[i].frames > 3 for i in running), timeout=5000)
    assert all("Generating" in panel.model.lines[i].status_text() for i in running)
    panel.cancel()
    qtbot.waitUntil(lambda: not panel.running, timeout=5000)
    states = [ln.state for ln in panel.model.lines]
    assert states == ["done"] * running[0] + ["cancelled"] * (5 - running[0])
    assert synth.most_at_once == 2
    assert panel.retry_btn.isEnabled()
    assert window.generate_btn.isEnabled()


def test_closing_mid_batch_asks_first(qtbot, make_window, settings, dialogs, tmp_path):
    synth = FakeSynthesizer(frame_delay=0.02)
    window = make_window(synth=synth)
    panel = window.batch
    settings.batch_dir = str(tmp_path / "out")
    panel.add_rows([("A fairly long line of text to keep the batch busy.", "", "auto")] * 3)
    assert panel.run_all()
    dialogs.answer = False
    window.close()
    assert dialogs.questions[-1][0] == "Batch running"
    assert window.isVisible() and panel.running
    dialogs.answer = True
    window.close()
    assert not window.isVisible()
    qtbot.waitUntil(lambda: not panel.running and window.ctx.job is None, timeout=5000)


def test_import_paste_reorder_remove(qtbot, make_window, dialogs, tmp_path):
    window = make_window()
    panel = window.batch
    txt = tmp_path / "lines.txt"
    txt.write_text("One.\n\nTwo.\nThree.\n", encoding="utf-8")
    csv = tmp_path / "lines.csv"
    csv.write_text("language,text,voice\nenglish,\"Four, with a comma.\",Test voice\nfrench,Cinq.,\n",
                   encoding="utf-8")
    dialogs.answer = True  # "lines.txt: separate lines or one long text?" the default: each line is an item
    assert panel.import_path(txt) and panel.import_path(csv)
    assert len(dialogs.questions) == 1 and "lines.txt one long text" in dialogs.questions[0][1]
    texts = [ln.text for ln in panel.model.lines]
    assert texts == ["One.", "Two.", "Three.", "Four, with a comma.", "Cinq."]
    assert (panel.model.lines[3].voice, panel.model.lines[3].language) == ("Test voice", "english")
    QGuiApplication.clipboard().setText("Six.\nSeven.\tTest voice\tgerman\n")
    panel.paste_lines()
    assert [ln.text for ln in panel.model.lines[-2:]] == ["Six.", "Seven."]
    assert panel.model.lines[-1].language == "german"
    panel.table.selectRow(0)
    panel.move_selected(1)
    assert [ln.text for ln in panel.model.lines[:2]] == ["Two.", "One."]
    panel.table.selectRow(1)
    panel.remove_selected()
    assert "One." not in [ln.text for ln in panel.model.lines]
    assert panel.model.data(panel.model.index(0, 0), Qt.ItemDataRole.DisplayRole) == "1"
    # bad import files: a message, nothing added
    binary = tmp_path / "data.txt"
    binary.write_bytes(b"\x00\x01\x02\xff\xfe")
    count = panel.model.rowCount()
    assert not panel.import_path(binary)
    assert not panel.import_path(tmp_path / "missing.csv")
    assert panel.model.rowCount() == count
    assert [t for t, _ in dialogs.errors] == ["Cannot import", "Cannot import"]


def test_empty_table_says_what_to_do(qtbot, make_window):
    window = make_window()
    window.tabs.setCurrentWidget(window.batch)
    panel = window.batch
    assert panel.model.rowCount() == 0 and panel.empty_hint.isVisible()
    assert "paste lines" in panel.empty_hint.text() and "(selected voice)" in panel.empty_hint.text()
    panel.add_rows([("A line.", "", "auto")])
    assert not panel.empty_hint.isVisible()
    panel.table.selectRow(0)
    panel.remove_selected()
    assert panel.empty_hint.isVisible()


def test_batch_files_follow_the_wav_format_setting(qtbot, make_window, settings, tmp_path):
    window = make_window()
    panel = window.batch
    settings.batch_dir = str(tmp_path / "out")
    panel._show_folder()
    panel.merge.setChecked(True)
    panel.add_rows([("One line.", "", "auto"), ("Two lines.", "", "auto")])
    _run(qtbot, panel, panel.run_all)
    files = sorted((tmp_path / "out").glob("*.wav"))
    assert len(files) == 3 and {sf.info(str(f)).subtype for f in files} == {"PCM_16"}  # the default
    settings.wav_float = True
    for f in files:
        f.unlink()
    _run(qtbot, panel, panel.run_all)
    assert {sf.info(str(f)).subtype for f in (tmp_path / "out").glob("*.wav")} == {"FLOAT"}


def test_lines_at_once_auto_follows_the_model(qtbot, make_window, settings, tmp_path):
    """"Auto" (the default) asks the model how many lines to run side by side."""
    synth = FakeSynthesizer(frame_delay=0.01)
    synth.batch_size_hint = 3
    window = make_window(synth=synth)
    panel = window.batch
    settings.batch_dir = str(tmp_path / "out")
    assert panel.at_once.value() == 0 and panel.at_once.text() == "Auto"
    panel.add_rows([(f"Line number {i} with some words in it.", "", "auto") for i in range(5)])
    assert panel.run_all()
    qtbot.waitUntil(lambda: not panel.running, timeout=20000)
    assert [ln.state for ln in panel.model.lines] == ["done"] * 5
    assert synth.most_at_once == 3


def test_instruction_column_imports_persists_and_hides_for_models_without_instructions(qtbot, make_window,
                                                                                        tmp_path):
    from qwen3tts_gui.widgets.batch_table import INSTRUCT, STUDIO_INSTRUCTION

    window = make_window()
    panel = window.batch
    assert panel.table.isColumnHidden(INSTRUCT)  # a Base model takes no style instruction
    assert panel.resolve_instruct("Whisper.") is None  # and none is sent, whatever a line holds
    csv = tmp_path / "lines.csv"
    csv.write_text("text,speaker,style\nHello.,serena,Slowly and softly.\nBye.,,\n", encoding="utf-8")
    assert panel.import_path(csv)
    QGuiApplication.clipboard().setText("Tab line.\tserena\tenglish\tCheerfully.\nPlain line.\n")
    panel.paste_lines()
    lines = panel.model.lines
    assert [(ln.voice, ln.instruct) for ln in lines] == [
        ("serena", "Slowly and softly."), ("", ""), ("serena", "Cheerfully."), ("", "")]
    shown = [panel.model.data(panel.model.index(r, INSTRUCT), Qt.ItemDataRole.DisplayRole) for r in range(4)]
    assert shown == ["Slowly and softly.", STUDIO_INSTRUCTION, "Cheerfully.", STUDIO_INSTRUCTION]
    assert panel.model.setData(panel.model.index(1, INSTRUCT), "  Angrily.  ")
    assert lines[1].instruct == "Angrily."
    panel.save_lines()
    assert json.loads((data_dir() / LINES_FILE).read_text(encoding="utf-8"))[1] == ["Bye.", "", "auto", "Angrily."]


def test_batch_lines_saved_before_instructions_still_load(qtbot, make_window, settings):
    settings.batch_lines = [["Old line.", "Test voice", "english"], ["New line.", "", "auto", "Slowly."],
                            ["Broken", 3], "not a row"]
    window = make_window()
    assert [(ln.text, ln.voice, ln.language, ln.instruct) for ln in window.batch.model.lines] == [
        ("Old line.", "Test voice", "english", ""), ("New line.", "", "auto", "Slowly.")]


def test_a_line_that_runs_away_is_judged_as_a_take_is(qtbot, make_window, settings, tmp_path):
    """A batch line of one chunk goes through the engine's one door like a take: the runaway guard stops a line
    that runs far past its text, tries other seeds, and the line fails in words instead of saving the runaway."""
    synth = FakeSynthesizer(frame_delay=0.0, frames_per_char=10.0)  # every line runs ten times too long
    window = make_window(synth=synth)
    panel = window.batch
    settings.batch_dir = str(tmp_path / "out")
    panel.add_rows([("Hello there.", "", "auto")])
    _run(qtbot, panel, panel.run_all)
    line = panel.model.lines[0]
    assert line.state == "failed" and "ran past" in line.error
    assert len(synth.calls) == 3 and len({c["seed"] for c in synth.calls}) == 3  # first try and two other seeds
    assert not (tmp_path / "out" / "001 - Hello there.wav").exists()


def test_a_long_line_with_a_chunk_left_out_is_saved_and_reported(qtbot, make_window, settings, tmp_path):
    """A line longer than one chunk is spoken chunk by chunk like a chapter: a chunk that runs away every time is
    left out, what was made is saved, and the line is reported with the chunk that is missing."""
    long_sentence = "This sentence goes on and on " * 6 + "until it stops."
    synth = FakeSynthesizer(frame_delay=0.0, frames_per_char=20.0)  # the long chunk runs far past its estimate
    window = make_window(synth=synth)
    panel = window.batch
    settings.batch_dir = str(tmp_path / "out")
    panel.add_rows([(f"Hi.\n\n{long_sentence}", "", "auto")])
    _run(qtbot, panel, panel.run_all)
    line = panel.model.lines[0]
    assert line.state == "failed", line.error
    assert "without some parts" in line.error and "Chunk 2 of 2 was left out" in line.error
    saved = list((tmp_path / "out").glob("001 - *.wav"))
    assert len(saved) == 1
    audio, _ = sf.read(saved[0], dtype="float32")
    assert len(audio) == 3 * 20 * 1920  # "Hi." alone: the fake's 20 frames per character
