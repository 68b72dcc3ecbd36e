"""Switching models does not make voices again and again: every bundle converted from one checkpoint takes the
same voices (its encoders' fingerprint, model_id, is the checkpoint's), and a voice made again for another
model keeps its earlier making, so switching back and forth asks once per model, never again."""

from __future__ import annotations

from pathlib import Path

from qwen3tts_gui.engine_adapter import open_synthesizer
from tests.bundles import bundle_for

from .fakes import FakeSynthesizer, speech_like


def _open(qtbot, window, path) -> None:
    with qtbot.waitSignal(window.ctx.model_changed, timeout=60000):
        assert window.open_model(Path(path))
    qtbot.waitUntil(lambda: window.ctx.job is None, timeout=60000)


def _speak(qtbot, window) -> bool:
    if not window.generate():
        return False
    qtbot.waitUntil(lambda: window.synth_worker is None, timeout=20000)
    return True


def test_switching_back_and_forth_makes_a_voice_once_per_model(qtbot, make_window, dialogs):
    models = {"a": FakeSynthesizer(model_id="model-a"), "b": FakeSynthesizer(model_id="model-b")}
    window = make_window(model=False, voice=False, open_synth=lambda path: models[Path(path).name])
    _open(qtbot, window, "a")
    voice = models["a"].create_voice((speech_like(4.0, 24000), 24000), ref_text="Hello there.", name="Anna")
    window.ctx.library.add(voice)
    window.voice_panel.refresh()
    window.text_edit.setPlainText("Hello.")
    dialogs.answer = True

    _open(qtbot, window, "b")
    assert not window.generate()  # made again for model b once (and it then speaks by itself)
    qtbot.waitUntil(lambda: window.output.current is not None and window.ctx.job is None, timeout=20000)
    asked = len(dialogs.questions)
    assert asked == 1
    for name in ("a", "b", "a", "b"):
        _open(qtbot, window, name)
        item = window.voice_panel.library.list.currentItem()
        assert "different model" not in item.toolTip()
        assert _speak(qtbot, window), dialogs.errors
        assert models[name].calls[-1]["voice"] == "Anna"
    assert len(dialogs.questions) == asked and not dialogs.errors


def test_bundles_of_one_checkpoint_take_each_others_voices(qtbot, make_window, dialogs):
    exact, fast = bundle_for("tiny06b", "fp32"), bundle_for("tiny06b", "q8")
    window = make_window(model=False, voice=False, open_synth=open_synthesizer)
    _open(qtbot, window, exact)
    voice = window.ctx.synth.create_voice((speech_like(3.0, 24000), 24000), name="Ben")
    window.ctx.library.add(voice)
    window.voice_panel.refresh()
    _open(qtbot, window, fast)
    window.settings_box.max_frames.setValue(4)
    window.text_edit.setPlainText("Hello.")
    assert _speak(qtbot, window) and not dialogs.questions and not dialogs.errors
