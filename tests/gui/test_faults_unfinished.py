"""Hours of work are not lost in the app: a chapter's chunks are kept on disk as they are made, so closing the
window or a kill -9 in the middle (a real process on the demo model) loses at most the chunk being made, and the
next start offers to continue where it stopped (the take is then the one an unbroken run makes) or to keep what
was made as a take.

Part of the fault suite (tests/faults); here because it needs the GUI fixtures.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from qwen3tts_gui.data.paths import data_dir
from qwen3tts_gui.engine_adapter import ChunkJournal, open_synthesizer

from .chapter_process import SETTINGS

ROOT = Path(__file__).resolve().parents[2]
CHAPTER = "\n\n".join(" ".join(f"Sentence {p * 12 + s + 1} of the chapter, spoken in one voice." for s in range(12))
                      for p in range(4))


def _journals() -> list[Path]:
    folder = data_dir() / "unfinished"
    return sorted(p for p in folder.iterdir() if (p / "journal.json").exists()) if folder.is_dir() else []


def _made(journal: Path) -> int:
    return len(list(journal.glob("[0-9][0-9][0-9][0-9].json")))


@pytest.fixture
def killed_mid_chapter(demo_bundle, tmp_path) -> Path:
    """The app killed (kill -9) while speaking CHAPTER, with a few chunks made: the journal's folder."""
    chapter = tmp_path / "chapter.txt"
    chapter.write_text(CHAPTER, encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    app = subprocess.Popen([sys.executable, "-m", "tests.gui.chapter_process", str(demo_bundle), str(chapter)],
                           cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        end = time.monotonic() + 180
        while app.poll() is None and time.monotonic() < end and not (_journals() and _made(_journals()[0]) >= 3):
            time.sleep(0.02)
        assert app.poll() is None, app.communicate()[1][-2000:]
        app.send_signal(signal.SIGKILL)
        app.wait()
    finally:
        if app.poll() is None:
            app.kill()
            app.wait()
    journals = _journals()
    assert len(journals) == 1
    chunks = len(ChunkJournal.open(journals[0]).plan.chunks)
    assert 3 <= _made(journals[0]) < chunks, "the chapter was not stopped mid-way"
    return journals[0]


def _real_window(make_window, demo_bundle):
    synth = open_synthesizer(demo_bundle, threads=1)
    return make_window(synth=synth, voice=False)


def _wait_for_take(qtbot, window, number: int) -> None:
    qtbot.waitUntil(lambda: window.output.current is not None and window.output.current.number == number
                    and window.ctx.job is None and window.history.writing == 0, timeout=300000)


def test_a_chapter_killed_mid_way_is_continued_at_the_next_start(qtbot, make_window, dialogs, demo_bundle,
                                                                  killed_mid_chapter):
    made = _made(killed_mid_chapter)
    journal = ChunkJournal.open(killed_mid_chapter)
    chunks, voice = len(journal.plan.chunks), journal.voice()
    dialogs.choice = 0  # Continue
    window = _real_window(make_window, demo_bundle)
    qtbot.waitUntil(lambda: bool(dialogs.questions), timeout=10000)
    title, text, choices = dialogs.questions[0]
    assert title == "A long text was not finished" and choices[:2] == ["Continue", "Keep as a take"]
    assert f"stopped after {made} of {chunks} chunks" in text
    _wait_for_take(qtbot, window, 1)
    continued = window.output.current
    assert not dialogs.errors and continued.text == CHAPTER
    assert not killed_mid_chapter.exists()  # the take is kept: its journal has gone
    # the same text, voice and seed in one go: the same take, sample for sample
    assert window.generate(CHAPTER, voice, "Reference", "english", SETTINGS)
    _wait_for_take(qtbot, window, 2)
    unbroken = window.output.current
    assert len(continued.audio) == len(unbroken.audio) and np.array_equal(continued.audio, unbroken.audio)
    assert np.array_equal(continued.result.codes, unbroken.result.codes)
    assert _journals() == []


def test_what_a_killed_chapter_made_can_be_kept_as_a_take(qtbot, make_window, dialogs, demo_bundle,
                                                          killed_mid_chapter):
    journal = ChunkJournal.open(killed_mid_chapter)
    made = [m.load() for m in journal.made().values()]
    seconds = sum(len(r.audio) for r in made) / 24000
    dialogs.choice = 1  # Keep as a take
    window = _real_window(make_window, demo_bundle)
    _wait_for_take(qtbot, window, 1)
    take = window.output.current
    assert take.text == CHAPTER and np.array_equal(take.result.codes, np.concatenate([r.codes for r in made]))
    assert seconds < take.result.seconds < seconds + len(journal.plan.chunks)  # the chunks made and their pauses
    assert not killed_mid_chapter.exists() and (data_dir() / "takes" / "000001").is_dir()


def test_closing_the_window_mid_chapter_keeps_the_chunks_and_asks_next_time(qtbot, make_window, dialogs,
                                                                             fake_synth, settings):
    window = make_window()
    fake_synth.frame_delay = 0.01
    window.text_edit.setPlainText(CHAPTER)
    assert window.generate()
    qtbot.waitUntil(lambda: bool(_journals()) and _made(_journals()[0]) >= 2, timeout=30000)
    dialogs.answer = True
    window.close()  # as the user closes the app: the generation is cancelled
    assert len(_journals()) == 1 and _made(_journals()[0]) >= 2
    dialogs.choice = None  # Cancel: asked again at the next start
    make_window()
    qtbot.waitUntil(lambda: len(dialogs.questions) == 1, timeout=10000)
    assert "was not finished" in dialogs.questions[0][0] and len(_journals()) == 1
    dialogs.choice = 2  # Discard
    make_window()
    qtbot.waitUntil(lambda: len(dialogs.questions) == 2, timeout=10000)
    assert _journals() == []


def test_a_finished_chapter_leaves_no_journal(qtbot, make_window, dialogs):
    window = make_window()
    window.text_edit.setPlainText(CHAPTER)
    assert window.generate()
    _wait_for_take(qtbot, window, 1)
    assert _journals() == [] and not dialogs.questions and not dialogs.errors


def test_a_text_begun_with_another_model_names_that_model(qtbot, make_window, dialogs, fake_synth, tmp_path):
    window = make_window()
    fake_synth.frame_delay = 0.01
    window.text_edit.setPlainText(CHAPTER)
    assert window.generate()
    qtbot.waitUntil(lambda: bool(_journals()) and _made(_journals()[0]) >= 1, timeout=30000)
    window.close()
    other = type(fake_synth)(model_id="another-model")
    dialogs.choice = 0  # Continue
    make_window(synth=other)
    qtbot.waitUntil(lambda: bool(dialogs.errors), timeout=10000)
    assert dialogs.errors[0][0] == "Cannot continue"
    assert f"begun with another model ({tmp_path / 'fake-bundle'})" in dialogs.errors[0][1]
    assert len(_journals()) == 1 and not other.calls  # nothing generated, nothing lost


def test_a_chapter_cancelled_by_mistake_is_continued_from_the_take_menu(qtbot, make_window, dialogs, fake_synth):
    window = make_window()
    fake_synth.frame_delay = 0.01
    window.text_edit.setPlainText(CHAPTER)
    assert window.generate()
    qtbot.waitUntil(lambda: bool(_journals()) and _made(_journals()[0]) >= 2, timeout=30000)
    window.cancel_generation()
    qtbot.waitUntil(lambda: window.ctx.job is None, timeout=10000)
    assert "next start offers to continue" in window.statusBar().currentMessage()
    assert not dialogs.questions  # not asked again at once
    take_menu = next(m.menu() for m in window.menuBar().actions() if m.text() == "&Take")
    action = next(a for a in take_menu.actions() if a.text() == "&Unfinished texts…")
    dialogs.choice = 0  # Continue
    action.trigger()
    assert len(dialogs.questions) == 1
    _wait_for_take(qtbot, window, 1)
    assert window.output.current.text == CHAPTER and _journals() == []
    action.trigger()
    assert dialogs.infos[-1] == ("Unfinished texts", "There is no unfinished text.")
