"""The app with CustomVoice and VoiceDesign models (the real engine on the tiny fixture bundles): the speaker
list and instruction field, the design panel (describe, preview, regenerate, save as voice), designed voices
reused with a Base model, and speakers in the batch."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from engine import Synthesizer, VoiceError, VoiceInput, voice_for
from qwen3tts_gui.engine_adapter import is_designed
from qwen3tts_gui.widgets.speaker_panel import INSTRUCT_IGNORED
from tests.bundles import OUTPUTS, bundle_for

PARTS = ["text", "talker", "codec_decoder"]


@functools.cache
def real(model: str, parts: tuple[str, ...] = tuple(PARTS)) -> Synthesizer:
    return Synthesizer(bundle_for(model, "fp32", parts=list(parts)))


def window_for(make_window, model: str, **kw):
    return make_window(voice=False, synth=real(model), **kw)


def wait_done(qtbot, window, timeout=20000):
    qtbot.waitUntil(lambda: window.synth_worker is None, timeout=timeout)


def short(window, frames=4):
    """Cap every take at `frames` through the settings box (what the studio and the batch read)."""
    window.settings_box.max_frames.setValue(frames)
    s = window.settings_box.generation_settings()
    assert s.max_frames == frames
    return s


@pytest.mark.parametrize("model,honours", [("tinycv17b", True), ("tinycv06b", False)])
def test_custom_voice_lists_speakers_and_the_instruction_field(make_window, model, honours):
    window = window_for(make_window, model)
    assert window.voice_stack.currentWidget() is window.speaker_panel
    assert len(window._clone_actions) == 3 and not any(a.isEnabled() for a in window._clone_actions)
    panel = window.speaker_panel
    names = [s.name for s in real(model).kind.speakers]
    assert panel.speaker_names() == names
    labels = [panel.list.item(i).text() for i in range(panel.list.count())]
    assert "eric (Sichuan dialect)" in labels and "dylan (Beijing dialect)" in labels
    assert panel.instruct_edit.isEnabled() == honours
    assert (panel.instruct_edit.toolTip() == INSTRUCT_IGNORED) == (not honours)
    panel.instruct_edit.setPlainText("Speak slowly.")
    assert panel.instruct() == ("Speak slowly." if honours else None)


def test_generate_with_a_speaker_and_instruction_equals_the_engine(qtbot, make_window, dialogs):
    window = window_for(make_window, "tinycv17b")
    panel = window.speaker_panel
    panel.list.setCurrentRow(panel.speaker_names().index("serena"))
    panel.instruct_edit.setPlainText("Speak slowly.")
    window.text_edit.setPlainText("Hello world.")
    settings = short(window)
    settings.greedy = True
    assert window.generate(settings=settings, language="english")
    wait_done(qtbot, window)
    take = window.output.current
    assert take is not None and not dialogs.errors
    # the speaker is the one the engine's voice_for makes of the panel's choice, as for the CLI and the server
    assert take.voice == real("tinycv17b").kind.speaker("serena")
    assert take.instruct == "Speak slowly." and take.voice_name == "serena"
    want = list(real("tinycv17b").synthesize("Hello world.", "serena", "english", settings,
                                             instruct="Speak slowly."))[-1]
    np.testing.assert_array_equal(take.result.codes, want.codes)
    # kept on disk with its speaker: the history read again regenerates with it
    from qwen3tts_gui.data.take_store import TakeStore

    folder = window.history.store.folder
    qtbot.waitUntil(lambda: bool(TakeStore(folder).load_all()), timeout=10000)  # kept on the keeper's thread
    (kept,) = TakeStore(folder).load_all()
    assert kept.voice == "serena" and kept.instruct == "Speak slowly."
    # regenerate keeps the speaker and the instruction
    window.regenerate(take)
    wait_done(qtbot, window)
    assert window.output.current.number == 2 and window.output.current.instruct == "Speak slowly."


def test_design_preview_regenerate_and_save_as_voice(qtbot, make_window, dialogs, tmp_path):
    window = window_for(make_window, "tinyvd17b")
    panel = window.design_panel
    assert window.voice_stack.currentWidget() is panel
    assert not panel.save_btn.isEnabled() and not panel.regenerate_btn.isEnabled()
    panel.preview_btn.click()  # no description yet
    assert dialogs.errors and dialogs.errors[-1][0] == "No description"
    with np.load(OUTPUTS / "tinyvd17b" / "kind_vd_en.npz") as z:  # a greedy case known to run 15 frames
        text, description = str(z["text"]), str(z["instruct"])
    panel.description.setPlainText(description)
    panel.preview_text.setText(text)
    short(window, 10)
    window.settings_box.greedy.setChecked(True)
    window.lang_combo.setCurrentIndex(window.lang_combo.findData("english"))
    panel.preview_btn.click()
    wait_done(qtbot, window)
    first = window.output.current
    assert first.instruct == description and first.voice is None and len(first.result.codes) == 10
    want = list(real("tinyvd17b").synthesize(text, None, "english", window.settings_box.generation_settings(),
                                             instruct=description))[-1]
    np.testing.assert_array_equal(first.result.codes, want.codes)
    assert panel.save_btn.isEnabled() and panel.regenerate_btn.isEnabled()
    dialogs.texts = ["Anna"]
    panel.save_as_voice()
    entries = window.ctx.library.entries()
    assert [e.name for e in entries] == ["Anna"], dialogs.errors
    voice = window.ctx.library.load(entries[0].path)
    assert is_designed(voice) and voice.ref_text == text
    np.testing.assert_array_equal(voice.ref_audio, first.audio)
    panel.regenerate_btn.click()
    wait_done(qtbot, window)
    second = window.output.current
    assert second.number == first.number + 1 and second.instruct == description
    assert not second.settings.greedy and second.seed != first.seed


def test_designed_voice_is_cloned_by_a_base_model_in_the_batch(qtbot, make_window, settings, tmp_path):
    from engine import designed_voice

    vd = real("tinyvd17b")
    with np.load(OUTPUTS / "tinyvd17b" / "kind_vd_en.npz") as z:  # a greedy case known to run 15 frames
        text, description = str(z["text"]), str(z["instruct"])
    made = list(vd.synthesize(text, None, "english", short_settings(), instruct=description))[-1]
    assert made.codes.shape[0] == 12
    base = real("tiny06b", tuple(PARTS + ["speaker", "codec_encoder"]))
    window = make_window(voice=False, synth=base)
    window.ctx.library.add(designed_voice(made.audio, text, description, vd.model_id, name="Deep"))
    window.ctx.voices_changed.emit()
    assert "Deep" in window.batch_voices.names()
    settings.batch_dir = str(tmp_path / "out")
    panel = window.batch
    panel._show_folder()
    short(window, 4)
    panel.add_rows([("First line.", "Deep", "english")])
    assert panel.run_all()
    qtbot.waitUntil(lambda: not panel.running, timeout=30000)
    assert [ln.state for ln in panel.model.lines] == ["done"], panel.model.lines[0].error


def short_settings():
    from engine import GenerationSettings

    return GenerationSettings(greedy=True, max_frames=12)


def test_batch_takes_speakers_on_custom_voice(qtbot, make_window, settings, tmp_path):
    window = window_for(make_window, "tinycv06b")
    assert window.batch_voices.names() == ["dylan", "eric", "serena", "uncle_fu"]
    settings.batch_dir = str(tmp_path / "out")
    panel = window.batch
    panel._show_folder()
    short(window, 4)
    panel.add_rows([("First line.", "Eric", "chinese"), ("Second line.", "bob", "english"),
                    ("Third line.", "", "english")])
    assert panel.run_all()
    qtbot.waitUntil(lambda: not panel.running, timeout=30000)
    states = [ln.state for ln in panel.model.lines]
    assert states == ["done", "failed", "done"]
    with pytest.raises(VoiceError) as engine_says:  # the app says what the engine says, as the CLI's batch does
        voice_for(real("tinycv06b"), VoiceInput(speaker="bob"))
    assert panel.model.lines[1].error == str(engine_says.value)


def test_designed_voice_in_the_studio_is_cloned_once_then_used(qtbot, make_window, dialogs):
    from engine import designed_voice

    vd = real("tinyvd17b")
    with np.load(OUTPUTS / "tinyvd17b" / "kind_vd_en.npz") as z:
        text, description = str(z["text"]), str(z["instruct"])
    made = list(vd.synthesize(text, None, "english", short_settings(), instruct=description))[-1]
    base = real("tiny06b", tuple(PARTS + ["speaker", "codec_encoder"]))
    window = make_window(voice=False, synth=base)
    path = window.ctx.library.add(designed_voice(made.audio, text, description, vd.model_id, name="Deep"))
    window.ctx.voices_changed.emit()
    window.voice_panel.refresh(select=path)
    item = window.voice_panel.library.list.currentItem()
    assert item.toolTip().startswith("A designed voice (made with a VoiceDesign model")
    window.text_edit.setPlainText("Hello.")
    dialogs.answer = True
    assert not window.generate()  # first the voice is cloned for this model (asked), then Generate again
    assert dialogs.questions[-1][0] == "Designed voice"
    qtbot.waitUntil(lambda: not window.ctx.busy, timeout=20000)
    voice = window.ctx.library.load(path)
    assert voice.model_id == base.model_id and voice.icl and voice.ref_text == text
    short(window, 3)
    assert window.generate()
    wait_done(qtbot, window)
    assert window.output.current is not None and window.output.current.voice_name == "Deep"


def test_batch_lines_carry_style_instructions_on_custom_voice_17b(qtbot, make_window, settings, tmp_path):
    import soundfile

    from engine import save_audio
    from qwen3tts_gui.widgets.batch_table import INSTRUCT

    window = window_for(make_window, "tinycv17b")
    panel = window.batch
    assert not panel.table.isColumnHidden(INSTRUCT)
    window.speaker_panel.instruct_edit.setPlainText("Speak slowly.")  # what a line without its own gets
    settings.batch_dir = str(tmp_path / "out")
    panel._show_folder()
    s = short(window, 4)
    s.greedy = True
    window.settings_box.greedy.setChecked(True)
    panel.add_rows([("Hello world.", "serena", "english", "Whisper, very quietly."),
                    ("Hello world.", "serena", "english")])
    assert panel.run_all()
    qtbot.waitUntil(lambda: not panel.running, timeout=30000)
    assert [ln.state for ln in panel.model.lines] == ["done", "done"], [ln.error for ln in panel.model.lines]
    engine = real("tinycv17b")
    settings_now = window.settings_box.generation_settings()
    for line, instruct in zip(panel.model.lines, ("Whisper, very quietly.", "Speak slowly."), strict=True):
        want = list(engine.synthesize("Hello world.", "serena", "english", settings_now, instruct=instruct))[-1]
        ref = tmp_path / f"want-{len(instruct)}.wav"
        save_audio(ref, want.audio)  # through the same 16-bit writer as the batch's files
        got, _ = soundfile.read(line.output, dtype="int16")
        expected, _ = soundfile.read(ref, dtype="int16")
        assert len(got) == len(expected)
        # one step at most: the batch decodes whole, synthesize() here streams (equal up to float rounding)
        assert np.abs(got.astype(np.int32) - expected).max() <= 1
    assert panel.resolve_instruct("") == "Speak slowly." and panel.resolve_instruct(" Loudly. ") == "Loudly."


def test_batch_sends_no_instruction_to_a_custom_voice_model_that_ignores_it(make_window):
    from qwen3tts_gui.widgets.batch_table import INSTRUCT

    window = window_for(make_window, "tinycv06b")
    assert window.batch.table.isColumnHidden(INSTRUCT)
    assert window.batch.resolve_instruct("Whisper.") is None
