"""The batch tab against files that would lose work or take the machine: the merged file is never replaced without
asking, a quote left open is named by its line instead of merging rows, and an import is refused in one line,
before it is read, when it is huge, endless or not a regular file.

Part of the fault suite (tests/faults); here because it needs the GUI fixtures.
"""

from __future__ import annotations

import os
import threading
import tracemalloc
from pathlib import Path

import pytest

from qwen3tts_gui.data.batch_lines import MAX_LINES, MERGED_NAME


def _run(qtbot, panel, start) -> bool:
    started = start()
    qtbot.waitUntil(lambda: not panel.running, timeout=20000)
    return started


def test_the_merged_file_is_not_replaced_without_asking(qtbot, make_window, settings, dialogs, tmp_path):
    window = make_window()
    panel = window.batch
    out = tmp_path / "out"
    out.mkdir()
    (out / MERGED_NAME).write_bytes(b"last week's chapter")
    settings.batch_dir = str(out)
    panel._show_folder()
    panel.merge.setChecked(True)
    panel.add_rows([("First line.", "", "auto"), ("Second line.", "", "auto")])
    dialogs.answer = False
    assert not _run(qtbot, panel, panel.run_all)
    assert dialogs.questions and MERGED_NAME in dialogs.questions[-1][1]
    assert (out / MERGED_NAME).read_bytes() == b"last week's chapter"
    assert sorted(os.listdir(out)) == [MERGED_NAME]
    dialogs.answer = True
    assert _run(qtbot, panel, panel.run_all)
    assert (out / MERGED_NAME).read_bytes()[:4] == b"RIFF"


def test_the_merged_file_alone_is_not_asked_about_when_merging_is_off(qtbot, make_window, settings, dialogs,
                                                                      tmp_path):
    window = make_window()
    panel = window.batch
    out = tmp_path / "out"
    out.mkdir()
    (out / MERGED_NAME).write_bytes(b"kept")
    settings.batch_dir = str(out)
    panel._show_folder()
    panel.merge.setChecked(False)
    panel.add_rows([("Only line.", "", "auto")])
    assert _run(qtbot, panel, panel.run_all)
    assert dialogs.questions == [] and (out / MERGED_NAME).read_bytes() == b"kept"


@pytest.mark.parametrize("content, line", [
    ('text,voice\n"Hello there,anna\nSecond line,bob\nThird line",carl\nFourth,dan\n', 2),
    ('First,anna\nSecond,bob\n"Third never closes,carl\nFourth,dan\n', 3),
    ('text,voice\nOne,anna\nTwo "with" quotes,bob\nThree,"carl" x\n', 4),
], ids=["closed_three_lines_later", "never_closed", "text_after_a_closing_quote"])
def test_a_quote_left_open_is_named_by_its_line(qtbot, make_window, dialogs, tmp_path, content, line):
    window = make_window(model=False)
    panel = window.batch
    path = tmp_path / "lines.csv"
    path.write_text(content, encoding="utf-8")
    assert not panel.import_path(path)
    title, text = dialogs.errors[-1]
    assert title == "Cannot import" and f"line {line}" in text and "quote" in text and "\n" not in text, text
    assert panel.model.rowCount() == 0


def _sparse(path, size):
    with open(path, "wb") as f:
        f.truncate(size)
    return path


def _many_lines(path, count):
    path.write_text("".join(f"Line {i}.\n" for i in range(count)), encoding="utf-8")
    return path


def _fifo(path):
    os.mkfifo(path)
    return path


def _dev_zero(path):
    path.symlink_to("/dev/zero")
    return path


def _folder(path):
    path.mkdir()
    return path


@pytest.mark.parametrize("make, name, words", [
    (lambda p: _sparse(p, 1_500_000_000), "big.txt", "more than the 16 MB"),
    (lambda p: _sparse(p, 1_500_000_000), "big.csv", "more than the 16 MB"),
    (lambda p: _many_lines(p, MAX_LINES + 5), "many.txt", f"more than {MAX_LINES:,} lines"),
    (_fifo, "pipe.txt", "not a regular file"),
    (_dev_zero, "zero.csv", "not a regular file"),
    (_folder, "folder.csv", "is a folder"),
], ids=["1.5GB_txt", "1.5GB_csv", "too_many_lines", "fifo", "dev_zero", "folder"])
def test_an_import_that_is_huge_endless_or_not_a_file_is_refused_quickly(qtbot, make_window, dialogs, tmp_path,
                                                                         make, name, words):
    window = make_window(model=False)
    panel = window.batch
    path = make(tmp_path / name)
    out: dict = {}
    tracemalloc.start()
    t = threading.Thread(target=lambda: out.setdefault("ok", panel.import_path(path)), daemon=True)
    t.start()
    t.join(30)
    if t.is_alive():
        tracemalloc.stop()
        if name == "pipe.txt":
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail("the import is still reading after 30 s")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert out["ok"] is False and panel.model.rowCount() == 0
    title, text = dialogs.errors[-1]
    assert words in text and "\n" not in text, text
    assert peak < 20 * 2**20, f"{peak / 2**20:.0f} MB to refuse it"


def test_a_batch_reads_each_voice_file_once_off_the_gui_thread(qtbot, make_window, settings, tmp_path, monkeypatch):
    from engine import Voice

    window = make_window()
    panel = window.batch
    settings.batch_dir = str(tmp_path / "out")
    panel._show_folder()
    reads = []
    real = Voice.load.__func__
    monkeypatch.setattr(Voice, "load", classmethod(lambda cls, path, model_id=None: reads.append(
        (Path(path).name, threading.current_thread())) or real(cls, path, model_id=model_id)))
    panel.add_rows([(f"Line {i}.", "Test voice", "auto") for i in range(5)])
    assert _run(qtbot, panel, panel.run_all)
    assert [ln.state for ln in panel.model.lines] == ["done"] * 5
    assert len(reads) == 1 and reads[0][1] is not threading.main_thread(), reads


@pytest.mark.parametrize("float_wav", [False, True], ids=["pcm16", "float"])
def test_the_merged_file_is_streamed_from_the_line_files_and_equals_them(qtbot, make_window, settings, tmp_path,
                                                                         monkeypatch, float_wav):
    import numpy as np
    import soundfile as sf

    from qwen3tts_gui import workers

    window = make_window()
    panel = window.batch
    settings.batch_dir = str(tmp_path / "out")
    settings.wav_float = float_wav
    panel._show_folder()
    panel.merge.setChecked(True)
    panel.gap.setValue(100)
    reads, real = [], workers.read_audio_file
    monkeypatch.setattr(workers, "read_audio_file", lambda path: reads.append(path.name) or real(path))
    panel.add_rows([(f"Line number {i}.", "", "auto") for i in range(4)])
    assert _run(qtbot, panel, panel.run_all)
    lines = [sf.read(tmp_path / "out" / name, dtype="float32")[0] for name in reads]
    assert reads == [f"00{i + 1} - Line number {i}.wav" for i in range(4)]  # table order, each once
    gap = np.zeros(2400, np.float32)
    merged, _ = sf.read(tmp_path / "out" / MERGED_NAME, dtype="float32")
    np.testing.assert_array_equal(merged, np.concatenate([lines[0], gap, lines[1], gap, lines[2], gap, lines[3]]))


def test_files_that_appear_during_a_run_are_left_alone(qtbot, make_window, settings, dialogs, tmp_path, monkeypatch):
    from qwen3tts_gui import workers

    window = make_window()
    panel = window.batch
    out = tmp_path / "out"
    out.mkdir()
    (out / "001 - Old line.wav").write_bytes(b"replace me")  # asked about, and agreed to
    settings.batch_dir = str(out)
    panel._show_folder()
    panel.merge.setChecked(True)
    panel.add_rows([("Old line.", "", "auto"), ("New line.", "", "auto")])
    real = workers.BatchWorker._speak

    def meanwhile(self, jobs):  # another program writes into the folder while the lines are generated
        (out / "002 - New line.wav").write_bytes(b"theirs")
        (out / MERGED_NAME).write_bytes(b"theirs too")
        return real(self, jobs)

    monkeypatch.setattr(workers.BatchWorker, "_speak", meanwhile)
    dialogs.answer = True
    assert _run(qtbot, panel, panel.run_all)
    assert len(dialogs.questions) == 1 and "001 - Old line.wav" in dialogs.questions[0][1]
    assert (out / "001 - Old line.wav").read_bytes()[:4] == b"RIFF"
    assert (out / "002 - New line.wav").read_bytes() == b"theirs"
    assert (out / MERGED_NAME).read_bytes() == b"theirs too"
    assert (out / "002 - New line (2).wav").read_bytes()[:4] == b"RIFF"
    assert (out / "all lines (merged) (2).wav").read_bytes()[:4] == b"RIFF"
    assert panel.model.lines[1].output.endswith("002 - New line (2).wav")
