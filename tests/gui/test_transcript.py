"""A new voice's transcript written down from its reference by the speech recogniser (FakeTranscriber, held to
engine.Transcriber by test_contract.py), never over typed text; the coach's transcript notes and their fixes."""

from __future__ import annotations

import json

import numpy as np
import pytest

from qwen3tts_gui.coach import transcript_notes
from qwen3tts_gui.widgets.models_dialog import ModelsDialog

from .fakes import FakeTranscriber, speech_like

SR = 24000
HEARD = "Hello there, this is my voice."


@pytest.fixture
def recogniser(tmp_path):
    """make(window, transcriber): the window finds a Whisper model and loads `transcriber` for it."""

    def make(window, transcriber: FakeTranscriber):
        loaded = []

        def open_transcriber(path):
            loaded.append(path)
            return transcriber

        window.ctx.find_recogniser = lambda: tmp_path / "whisper-base"
        window.ctx.open_transcriber = open_transcriber
        return loaded

    return make


def load(window, seconds: float = 4.0, samples=None):
    editor = window.voice_panel.editor
    clip = speech_like(seconds, SR) if samples is None else samples
    editor.set_reference(clip.reshape(-1, 1), SR, None)
    return editor


def test_an_empty_transcript_is_written_in(qtbot, make_window, recogniser, tmp_path):
    window = make_window()
    fake = FakeTranscriber(HEARD)
    loaded = recogniser(window, fake)
    editor = load(window)
    qtbot.waitUntil(lambda: editor.transcript.toPlainText() == HEARD, timeout=5000)
    assert loaded == [tmp_path / "whisper-base"]
    assert "Written down from the audio" in editor.heard.label.text()
    qtbot.waitUntil(lambda: not editor.heard.cancel_btn.isVisible(), timeout=5000)
    load(window)  # a second reference: the loaded model is used again, its words replace the ones it wrote
    qtbot.waitUntil(lambda: fake.calls == 2, timeout=5000)
    assert loaded == [tmp_path / "whisper-base"]
    assert editor.transcript.toPlainText() == HEARD


def test_typed_text_is_kept_and_what_was_heard_is_offered(qtbot, make_window, recogniser):
    window = make_window()
    fake = FakeTranscriber(HEARD)
    recogniser(window, fake)
    editor = window.voice_panel.editor
    editor.transcript.setPlainText("Words I typed myself")
    load(window)
    qtbot.waitUntil(lambda: "Use what was heard" in editor.heard.label.text(), timeout=5000)
    assert editor.transcript.toPlainText() == "Words I typed myself"
    assert HEARD in editor.heard.label.text()
    editor.heard.label.linkActivated.emit("use")
    assert editor.transcript.toPlainText() == HEARD


def test_cancel_stops_the_recogniser_and_writes_nothing(qtbot, make_window, recogniser):
    window = make_window()
    fake = FakeTranscriber(HEARD, steps=200, delay=0.01)
    recogniser(window, fake)
    editor = load(window)
    assert fake.started.wait(5)
    qtbot.waitUntil(editor.heard.cancel_btn.isVisible, timeout=2000)
    editor.heard.cancel_btn.click()
    assert "Stopped" in editor.heard.label.text() and not editor.heard.progress.isVisible()
    qtbot.waitUntil(lambda: not editor.heard.writer.running, timeout=5000)
    qtbot.wait(50)
    assert editor.transcript.toPlainText() == ""
    editor.heard.label.linkActivated.emit("again")  # the link in the line writes them down after all
    qtbot.waitUntil(lambda: editor.transcript.toPlainText() == HEARD, timeout=10000)


def test_without_a_model_the_box_stays_and_a_link_opens_the_whisper_models(qtbot, make_window, dialogs):
    window = make_window()  # the private models folder has no Whisper model
    editor = load(window)
    assert not editor.heard.writer.running and editor.transcript.toPlainText() == ""
    assert "Get a speech recognition model" in editor.heard.label.text()
    editor.heard.label.linkActivated.emit("models")
    dialog = window.findChild(ModelsDialog)
    assert dialog is not None and dialog.isVisible()
    names = [dialog.available.topLevelItem(i).text(0) for i in range(dialog.available.topLevelItemCount())]
    assert {"whisper-tiny", "whisper-base", "whisper-small", "whisper-large-v3-turbo"} <= set(names)
    assert dialog.available.currentItem().text(0) == "whisper-base"
    assert "Whisper base" in dialog.panel.model_combo.currentText()  # ready to download
    assert "about" in dialog.panel.sizes.text()  # its size on disk, though 8-bit is not made of a Whisper model
    dialog.reject()
    assert not dialogs.errors


def test_the_setting_turns_it_off(qtbot, make_window, recogniser, settings):
    settings.auto_transcript = False
    window = make_window()
    fake = FakeTranscriber(HEARD)
    recogniser(window, fake)
    editor = load(window)
    qtbot.wait(100)
    assert fake.calls == 0 and editor.transcript.toPlainText() == ""
    assert not editor.heard.auto.isChecked()
    editor.heard.auto.setChecked(True)  # turned on with a reference open: its words are written down
    assert settings.auto_transcript
    qtbot.waitUntil(lambda: editor.transcript.toPlainText() == HEARD, timeout=5000)


def test_damaged_whisper_bundle_is_one_line_in_the_window(qtbot, make_window, dialogs, tmp_path):
    window = make_window()
    bundle = tmp_path / "whisper-base"
    bundle.mkdir()
    (bundle / "manifest.json").write_text(json.dumps({"model": "whisper"}), encoding="utf-8")
    window.ctx.find_recogniser = lambda: bundle  # the real loader: engine.Transcriber
    editor = load(window)
    qtbot.waitUntil(lambda: "could not be written down" in editor.heard.label.text(), timeout=10000)
    line = editor.heard.label.text()
    assert "Traceback" not in line and "\n" not in line
    assert editor.transcript.toPlainText() == "" and not dialogs.errors


def test_nan_audio_is_one_line_in_the_window(qtbot, make_window, recogniser, dialogs):
    window = make_window()
    recogniser(window, FakeTranscriber(HEARD))
    clip = speech_like(3.0, SR)
    clip[SR:SR + 10] = np.nan
    editor = load(window, samples=clip)
    qtbot.waitUntil(lambda: "invalid samples" in editor.heard.label.text(), timeout=5000)
    assert editor.transcript.toPlainText() == "" and not dialogs.errors


def test_no_words_heard_in_a_clip_with_speech_offers_to_type(qtbot, make_window, recogniser):
    window = make_window()
    recogniser(window, FakeTranscriber(""))
    editor = load(window)
    qtbot.waitUntil(lambda: "use_heard" in editor.coach.fix_buttons or "edit_transcript" in editor.coach.fix_buttons,
                    timeout=5000)
    assert any("No words were heard" in n.text for n in editor.coach.notes)
    editor.name_edit.setFocus()
    editor.coach.fix_buttons["edit_transcript"].click()
    assert editor.transcript.hasFocus()


def test_a_transcript_far_from_what_was_heard_gets_a_fix(qtbot, make_window, recogniser):
    window = make_window()
    fake = FakeTranscriber(HEARD)
    recogniser(window, fake)
    editor = load(window)
    qtbot.waitUntil(lambda: editor.transcript.toPlainText() == HEARD, timeout=5000)
    assert not any("far from" in n.text for n in editor.coach.notes)
    editor.transcript.setPlainText("Completely different words about a garden")
    assert "Written down" not in editor.heard.label.text()  # no longer what the recogniser wrote
    note = next(n for n in editor.coach.notes if "far from what was heard" in n.text)
    assert HEARD in note.text
    editor.coach.fix_buttons["use_heard"].click()
    assert editor.transcript.toPlainText() == HEARD
    assert not any("far from" in n.text for n in editor.coach.notes)


def test_the_detected_language_is_offered_for_the_voice(qtbot, make_window, recogniser):
    window = make_window()
    recogniser(window, FakeTranscriber("Guten Tag, das ist meine Stimme.", language="de"))
    editor = load(window)
    qtbot.waitUntil(lambda: "language:german" in editor.coach.fix_buttons, timeout=5000)
    assert editor.lang_combo.language() == "auto"  # offered, not chosen for the user
    editor.coach.fix_buttons["language:german"].click()
    assert editor.lang_combo.language() == "german"
    assert "language:german" not in editor.coach.fix_buttons  # done: no longer offered


def test_far_too_many_words_for_the_clip_without_a_recogniser(qtbot, make_window):
    window = make_window()
    editor = load(window, seconds=3.0)
    editor.transcript.setPlainText(" ".join(["word"] * 40))
    note = next(n for n in editor.coach.notes if "far too many" in n.text)
    assert note.action == "edit_transcript"
    editor.coach.fix_buttons["edit_transcript"].click()
    assert editor.transcript.hasFocus() and editor.transcript.textCursor().hasSelection()


@pytest.mark.parametrize(("typed", "seconds", "expected"), [
    (" ".join(["w"] * 30), 3.0, "far too many"),  # 10 words a second
    ("Hello", 9.0, "Only 1 word"),  # one word in 9 s of speech
    ("这是我的声音，你好吗，今天天气很好", 3.0, None),  # 17 characters in 3 s: ordinary Mandarin
    ("Hello there, this is my voice.", 3.0, None),
])
def test_word_count_notes(typed, seconds, expected):
    notes = [n.text for n in transcript_notes(typed, seconds)]
    assert (any(expected in n for n in notes) if expected else notes == [])


def test_the_heard_words_are_no_fix_for_themselves():
    """A recogniser that repeats a word: its text, already in the box, is offered for editing, not again."""
    heard = " ".join(["replaces"] * 30)
    notes = transcript_notes(heard, 2.0, heard)
    assert [n.action for n in notes] == ["edit_transcript"] and "far too many" in notes[0].text


def test_a_close_transcript_is_not_called_far():
    assert transcript_notes("Hello there this is my voice", 3.0, "Hello there, this is my voice.") == []
    far = transcript_notes("Hello", 3.0, "The weather is fine today in Berlin.")
    assert [n.action for n in far] == ["use_heard"]


@pytest.fixture(scope="module")
def whisper_bundle(tmp_path_factory):
    from engine import convert_checkpoint

    from .test_contract import WHISPER_FIXTURE

    return convert_checkpoint(WHISPER_FIXTURE / "models" / "tinywhisper80", tmp_path_factory.mktemp("w") / "b")


def test_an_installed_whisper_model_writes_the_words_and_is_no_voice_model(qtbot, make_window, tmp_path,
                                                                          monkeypatch, whisper_bundle):
    """The real store and the real Transcriber: the installed Whisper model is found and used; in the Models
    dialog it says what it is and cannot be opened as the voice model; a download of one does not open it."""
    import shutil

    store = tmp_path / "models"
    store.mkdir()
    shutil.copytree(whisper_bundle, store / "whisper-tiny")
    monkeypatch.setenv("QWEN3TTS_MODELS_DIR", str(store))
    window = make_window()
    editor = load(window)
    qtbot.waitUntil(lambda: not editor.heard.writer.running, timeout=60000)
    assert editor.heard.transcript_heard is not None, editor.heard.label.text()
    assert editor.transcript.toPlainText() == editor.heard.transcript_heard.text.strip()
    dialog = window.show_models()
    row = dialog.table.topLevelItem(0)
    assert row.text(0) == "whisper-tiny" and "speech recognition" in row.text(1)
    dialog.table.setCurrentItem(row)
    assert not dialog.open_btn.isEnabled() and not dialog.default_btn.isEnabled() and dialog.remove_btn.isEnabled()
    dialog.reject()
    window.ctx.set_model(None, None)  # no voice model open: a downloaded voice model would open by itself
    window.models._model_downloaded(store / "whisper-tiny")
    assert window.ctx.job is None and window.ctx.synth is None  # a Whisper model does not


def test_a_reference_past_30_s_is_one_line_and_its_selected_part_is_written_down(qtbot, make_window, recogniser,
                                                                                 dialogs):
    window = make_window()
    fake = FakeTranscriber(HEARD)
    recogniser(window, fake)
    editor = load(window, seconds=40.0)
    qtbot.waitUntil(lambda: "30 s" in editor.heard.label.text(), timeout=5000)
    assert "Try again" in editor.heard.label.text() and editor.transcript.toPlainText() == ""
    editor.ref_wave.set_selection(SR, 9 * SR)  # the part to use
    editor.heard.label.linkActivated.emit("again")
    qtbot.waitUntil(lambda: editor.transcript.toPlainText() == HEARD, timeout=5000)
    assert not dialogs.errors


def test_a_newer_reference_replaces_the_one_being_written_down(qtbot, make_window, recogniser):
    window = make_window()
    fake = FakeTranscriber(HEARD, steps=100, delay=0.01)
    recogniser(window, fake)
    editor = load(window, seconds=4.0)
    assert fake.started.wait(5)
    load(window, seconds=6.0)  # mid-way through the first
    qtbot.waitUntil(lambda: editor.heard.transcript_heard is not None, timeout=10000)
    qtbot.waitUntil(lambda: not editor.heard.writer.running, timeout=10000)
    assert editor.heard.transcript_heard.seconds == pytest.approx(6.0)  # only the newest reference's words
    assert fake.calls == 2


def test_a_new_selection_with_other_speech_is_written_down_again(qtbot, make_window, recogniser):
    window = make_window()
    fake = FakeTranscriber(HEARD)
    recogniser(window, fake)
    editor = load(window, seconds=4.0)  # speech from 0.6 s to 3.4 s
    qtbot.waitUntil(lambda: editor.heard.transcript_heard is not None, timeout=5000)
    editor.ref_wave.set_selection(int(0.3 * SR), int(3.7 * SR))  # only silence trimmed: the words are the same
    qtbot.wait(1200)
    assert fake.calls == 1
    editor.ref_wave.set_selection(int(1.5 * SR), int(3.0 * SR))  # part of the speech
    qtbot.waitUntil(lambda: fake.calls == 2 and not editor.heard.writer.running, timeout=5000)
    assert editor.heard.transcript_heard.seconds == pytest.approx(1.5)


def test_a_language_chosen_for_the_voice_is_the_one_listened_for(qtbot, make_window, recogniser):
    window = make_window()
    fake = FakeTranscriber("Bonjour, c'est ma voix.")
    recogniser(window, fake)
    editor = window.voice_panel.editor
    load(window)
    qtbot.waitUntil(lambda: fake.calls == 1 and not editor.heard.writer.running, timeout=5000)
    editor.lang_combo.setCurrentIndex(editor.lang_combo.findData("french"))
    load(window)
    qtbot.waitUntil(lambda: fake.calls == 2 and not editor.heard.writer.running, timeout=5000)
    assert fake.languages_asked == [None, "french"]  # Auto-detect: Whisper detects it
    assert not editor.heard.transcript_heard.language_detected
    assert not any(n.action.startswith("language:") for n in editor.coach.notes)  # nothing to offer


def test_a_whisper_model_installed_with_a_reference_open_writes_its_words(qtbot, make_window, recogniser):
    window = make_window()
    editor = load(window)
    assert "Get a speech recognition model" in editor.heard.label.text()
    recogniser(window, FakeTranscriber(HEARD))  # the download has finished
    window.models.recogniser_installed.emit()
    qtbot.waitUntil(lambda: editor.transcript.toPlainText() == HEARD, timeout=5000)
