"""The generate flow with the fake engine: signals in order, live tokens, result shown, saved and readable."""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf
from PySide6.QtCore import Qt

from .fakes import FakeSynthesizer


def _record_signals(window):
    events = []
    orig = window.generate

    def wrapped(*a, **kw):
        ok = orig(*a, **kw)
        w = window.synth_worker
        if w is not None:
            w.frame.connect(lambda ev: events.append(("frame", ev.index)))
            w.chunk.connect(lambda ch: events.append(("chunk", ch.start_sample)))
            w.done.connect(lambda r: events.append(("result", len(r.codes))))
        return ok

    window.generate = wrapped
    return events


def test_generate_end_to_end(qtbot, make_window, fake_synth, dialogs, tmp_path):
    window = make_window()
    assert window.stack.currentWidget() is window.tabs
    events = _record_signals(window)
    window.text_edit.setPlainText("Hello there, this is a test of the studio.")
    qtbot.keyClick(window.text_edit, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    assert window.synth_worker is not None, dialogs.errors
    qtbot.waitUntil(lambda: window.synth_worker is None, timeout=10000)
    assert not dialogs.errors

    frames = [i for kind, i in events if kind == "frame"]
    n = len(frames)
    assert n == round(len("Hello there, this is a test of the studio.") * 0.5)
    assert frames == list(range(n))  # every frame, in order
    assert events[-1] == ("result", n)  # the result comes last
    starts = [s for kind, s in events if kind == "chunk"]
    assert starts == sorted(starts) and starts[0] == 0  # streamed audio in order from the start

    # the token view holds exactly the generated codes
    take = window.output.current
    assert take is not None and take.number == 1
    assert window.progress.tokens.frames == n
    np.testing.assert_array_equal(window.progress.tokens.codes(), take.result.codes)
    assert "Done" in window.progress.bar.format()
    assert len(window.output.wave.samples) == len(take.audio)

    # save: default name from the text, default folder from platformdirs; file readable
    out = tmp_path / "take.wav"
    dialogs.files.append(str(out))
    window.output.save_take(take)
    assert "Hello there" in dialogs.last_save_suggestion
    data, sr = sf.read(out, dtype="float32")
    assert sr == 24000 and len(data) == len(take.audio)
    np.testing.assert_allclose(data, take.audio, atol=1 / 32000)

    # overwrite: asked first; "no" leaves the file alone
    before = out.stat().st_mtime_ns
    dialogs.answer = False
    dialogs.files.append(str(out))
    window.output.save_take(take)
    assert dialogs.questions and "already exists" in dialogs.questions[-1][1]
    assert out.stat().st_mtime_ns == before
    # FLAC and Ogg too
    for suffix in (".flac", ".ogg"):
        dialogs.files.append(str(tmp_path / f"take{suffix}"))
        window.output.save_take(take)
        info = sf.info(str(tmp_path / f"take{suffix}"))
        assert info.samplerate == 24000 and abs(info.frames - len(take.audio)) < 2000


def test_a_kept_voice_the_open_model_cannot_use_is_refused_before_regenerating(qtbot, make_window, dialogs):
    """A kept take's voice goes through the engine's voice_for like the voice column's: a speaker's take with a
    Base model open, or a voice made by another model only, is refused in the kind's words, and nothing runs."""
    from dataclasses import replace

    from engine import Voice, VoiceError, VoiceInput, as_sentence, voice_for

    window = make_window()
    window.text_edit.setPlainText("Short line.")
    assert window.generate()
    qtbot.waitUntil(lambda: window.synth_worker is None, timeout=10000)
    take = window.output.current
    synth = window.ctx.synth
    foreign = Voice(xvector=take.voice.xvector, model_id="another model", name="Anna")
    for voice, given in (("serena", VoiceInput(speaker="serena")), (foreign, VoiceInput(voice=foreign))):
        with pytest.raises(VoiceError) as engine_says:
            voice_for(synth, given)
        window.regenerate(replace(take, voice=voice))
        assert dialogs.errors[-1] == ("Cannot regenerate", as_sentence(str(engine_says.value)))
        assert window.synth_worker is None and window.output.current is take


def test_take_history_replay_and_regenerate(qtbot, make_window, fake_synth, audio, dialogs):
    window = make_window()
    window.settings_box.seed_random.setChecked(False)
    window.settings_box.seed.setValue(77)
    window.text_edit.setPlainText("Short line.")
    assert window.generate()
    qtbot.waitUntil(lambda: window.synth_worker is None, timeout=10000)
    first = window.output.current
    assert first.seed == 77
    window.output.regenerate.emit(first)
    qtbot.waitUntil(lambda: window.output.current is not None and window.output.current.number == 2,
                    timeout=10000)
    qtbot.waitUntil(lambda: window.synth_worker is None, timeout=10000)
    second = window.output.current
    assert second.text == first.text and second.seed != 77  # a new random seed
    assert window.output.history.count() == 2
    # replay the first take through the (fake) device
    window.output.history.setCurrentRow(1)
    assert window.output.current is first
    window.output.toggle_play()
    qtbot.waitUntil(lambda: audio.output_finished >= 1, timeout=10000)
    played = audio.played_samples()
    np.testing.assert_array_equal(played[: len(first.audio)], first.audio)
    assert not dialogs.errors


def test_play_while_generating(qtbot, make_window, audio):
    synth = FakeSynthesizer(hold_at_frame=10)  # generation waits there until released: no race with the clock
    window = make_window(synth=synth)
    window.text_edit.setPlainText("A longer sentence so that playback can start before the end of generation.")
    assert window.generate()
    qtbot.waitUntil(lambda: len(window.output.wave.samples) > 0, timeout=5000)
    assert window.synth_worker is not None  # still generating
    assert window.output.play_btn.isEnabled()
    window.output.toggle_play()
    assert window.ctx.player.playing
    synth.release.set()
    qtbot.waitUntil(lambda: window.synth_worker is None, timeout=20000)
    take = window.output.current
    qtbot.waitUntil(lambda: audio.output_finished >= 1, timeout=20000)
    played = audio.played_samples()
    nz = np.flatnonzero(played)
    # what was heard is the whole take (underruns may insert silence, never drop samples)
    assert len(played) >= len(take.audio)
    assert np.isclose(np.abs(played[nz]).sum(), np.abs(take.audio[np.flatnonzero(take.audio)]).sum(), rtol=1e-5)


def test_cancel_takes_effect_within_one_frame(qtbot, make_window):
    delay = 0.05
    synth = FakeSynthesizer(frame_delay=delay, frames_per_char=10)
    window = make_window(synth=synth)
    window.text_edit.setPlainText("x" * 50)  # 500 frames, 25 s if not cancelled
    seen = []
    assert window.generate()
    worker = window.synth_worker
    worker.frame.connect(lambda ev: seen.append(ev.index))
    qtbot.waitUntil(lambda: len(seen) >= 5, timeout=5000)
    produced_at_cancel = synth.produced
    with qtbot.waitSignal(worker.finished, timeout=5000):
        window.cancel_generation()
    # counted in frames, not seconds: at most the frame in flight is made after the cancel
    assert synth.closed_at and synth.closed_at[-1] - produced_at_cancel <= 1
    qtbot.waitUntil(lambda: window.synth_worker is None)
    assert "Cancelled" in window.progress.bar.format()
    assert window.output.current is None and window.output.history.count() == 0
    assert window.generate_btn.isEnabled()


def test_empty_text_and_no_voice(qtbot, make_window, dialogs):
    window = make_window(voice=False)
    window.text_edit.setPlainText("   ")
    assert not window.generate()
    assert dialogs.errors[-1][0] == "No text"
    window.text_edit.setPlainText("Hello")
    assert not window.generate()
    assert dialogs.errors[-1][0] == "No voice"


def test_engine_error_shows_its_line(qtbot, make_window, dialogs):
    window = make_window()
    window.text_edit.setPlainText("Hello")
    window.lang_combo.addItem("Klingon", "klingon")
    window.lang_combo.setCurrentIndex(window.lang_combo.count() - 1)
    assert window.generate()
    qtbot.waitUntil(lambda: window.synth_worker is None, timeout=5000)
    title, text = dialogs.errors[-1]
    assert title == "Cannot generate" and text.startswith("Unknown language 'klingon'") and text.endswith(".")
    assert "Traceback" not in text and "\n" not in text


def test_unexpected_exception_is_caught_and_logged(qtbot, make_window, dialogs, tmp_path):
    from qwen3tts_gui.diagnostics import setup_logging

    log_path = setup_logging(tmp_path / "logs" / "gui.log")
    synth = FakeSynthesizer(fail_at_frame=3)
    window = make_window(synth=synth)
    window.text_edit.setPlainText("Hello world again")
    assert window.generate()
    qtbot.waitUntil(lambda: window.synth_worker is None, timeout=5000)
    title, text = dialogs.errors[-1]
    assert "Unexpected error" in text and "simulated engine bug" in text and "Traceback" not in text
    assert "Traceback" in log_path.read_text()
    assert synth.closed_at  # the generator was closed


def test_playback_on_a_device_that_needs_another_rate(qtbot, make_window):
    from .fakes import FakeAudioBackend

    backend = FakeAudioBackend(device_output_rate=48000, speed=8.0)
    window = make_window(backend=backend)
    window.text_edit.setPlainText("Resample me.")
    assert window.generate()
    qtbot.waitUntil(lambda: window.synth_worker is None, timeout=10000)
    take = window.output.current
    window.output.toggle_play()
    qtbot.waitUntil(lambda: backend.output_finished >= 1, timeout=20000)
    assert backend.opened_rates == [48000]
    played = backend.played_samples()
    nz = np.flatnonzero(np.abs(played) > 1e-4)
    assert abs((nz[-1] - nz[0]) - 2 * len(take.audio)) < 0.01 * len(take.audio)  # same sound at twice the rate
