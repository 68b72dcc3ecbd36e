"""What survives a restart (takes, text, generation settings, batch lines), the take history's size limit and
clearing, selecting a take after a cancelled or failed generation, and statistics that agree with each other."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QSettings

from qwen3tts_gui.data.paths import takes_dir
from qwen3tts_gui.data.settings import Settings

from .fakes import FakeSynthesizer


def _generate(qtbot, window, text: str) -> None:
    window.text_edit.setPlainText(text)
    assert window.generate()
    qtbot.waitUntil(lambda: window.synth_worker is None and window.history.writing == 0, timeout=10000)


def _restart(window, make_window, tmp_path, **kw):
    """Close the window as a user would and open a new one on the same settings file and data folder."""
    window.close()
    again = Settings(QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat))
    return make_window(window_settings=again, **kw)


def test_takes_text_settings_and_batch_lines_survive_a_restart(qtbot, make_window, tmp_path, dialogs):
    window = make_window()
    window.settings_box.seed_random.setChecked(False)
    window.settings_box.seed.setValue(77)
    window.settings_box.temperature.setValue(0.55)
    window.settings_box.top_k.setValue(12)
    window.settings_box.max_frames.setValue(640)
    _generate(qtbot, window, "The first take.")
    _generate(qtbot, window, "The second take, a little longer.")
    first, second = sorted(window.output.takes, key=lambda t: t.number)
    window.text_edit.setPlainText("Unfinished text\nover two lines.")
    window.batch.add_rows([("Line one.", "", "auto"), ("Line two.", "Test voice", "english")])

    again = _restart(window, make_window, tmp_path)
    assert again.text_edit.toPlainText() == "Unfinished text\nover two lines."
    box = again.settings_box
    assert (box.temperature.value(), box.top_k.value(), box.max_frames.value()) == (0.55, 12, 640)
    assert not box.seed_random.isChecked() and box.seed.value() == 77
    assert [(ln.text, ln.voice, ln.language) for ln in again.batch.model.lines] == [
        ("Line one.", "", "auto"), ("Line two.", "Test voice", "english")]
    restored = sorted(again.output.takes, key=lambda t: t.number)
    assert [t.number for t in restored] == [1, 2] and again.output.history.count() == 2
    for old, new in zip((first, second), restored, strict=True):
        assert new.text == old.text and new.seed == old.seed and new.voice_name == old.voice_name
        assert new.settings == old.settings
        np.testing.assert_array_equal(new.audio, old.audio)
        np.testing.assert_array_equal(new.result.codes, old.result.codes)
        np.testing.assert_array_equal(new.ready_voice().xvector, old.voice.xvector)  # read when it is needed
    # a restored take can be selected, played and regenerated; numbering goes on
    again.output.history.setCurrentRow(1)
    assert again.output.current.number == 1 and again.output.regen_btn.isEnabled()
    again.regenerate(again.output.current)
    qtbot.waitUntil(lambda: again.synth_worker is None, timeout=10000)
    assert again.output.current.number == 3 and again.output.current.text == "The first take."
    assert not dialogs.errors

    # "Model defaults" forgets the user's values
    box.reset_to_defaults()
    assert again.ctx.settings.generation_values == {} and box.temperature.value() != 0.55


def test_history_size_limit_and_clear(qtbot, make_window, dialogs):
    big = FakeSynthesizer(frame_delay=0.0, frames_per_char=30)  # 17 characters: about 3.7 MB of audio a take
    window = make_window(synth=big)
    for i in range(3):
        _generate(qtbot, window, f"Take {i + 1} of three.")
    folders = sorted(p.name for p in takes_dir().iterdir())
    assert folders == ["000001", "000002", "000003"]
    one_take = sum(f.stat().st_size for f in (takes_dir() / "000003").iterdir())
    newest = window.output.current
    assert newest.audio.nbytes < one_take < 4 * 2**20  # float32 audio plus codes and a few kB of the rest
    # 10 MB (the smallest limit) holds two of them: the oldest goes
    window.history.set_limit(10)
    assert sorted(t.number for t in window.output.takes) == [2, 3]
    assert sorted(int(p.name) for p in takes_dir().iterdir()) == [2, 3]
    assert window.ctx.settings.takes_limit_mb == 10
    # and a new take pushes out the next oldest
    _generate(qtbot, window, "Take 4, the newest.")
    assert sorted(t.number for t in window.output.takes) == [3, 4]

    dialogs.answer = False
    window.clear_takes()
    assert window.output.takes and dialogs.questions[-1][0] == "Clear all takes"
    dialogs.answer = True
    window.clear_takes()
    assert not window.output.takes and window.output.history.count() == 0
    assert list(takes_dir().iterdir()) == []
    assert not window.output.play_btn.isEnabled() and not window.output.save_btn.isEnabled()


def test_take_selectable_after_cancel_and_after_failure(qtbot, make_window, dialogs):
    slow = FakeSynthesizer(frame_delay=0.03, frames_per_char=10)
    window = make_window(synth=slow)
    slow.frames_per_char = 0.5
    _generate(qtbot, window, "First take.")
    _generate(qtbot, window, "Second take.")
    second = window.output.current
    assert second.number == 2
    slow.frames_per_char = 10
    window.text_edit.setPlainText("x" * 40)
    assert window.generate()
    seen = []
    window.synth_worker.frame.connect(lambda ev: seen.append(ev.index))
    qtbot.waitUntil(lambda: len(seen) >= 3, timeout=5000)
    window.cancel_generation()
    qtbot.waitUntil(lambda: window.synth_worker is None, timeout=5000)
    # the take shown before is shown again, and every take can be picked (the bug: row 0 stayed current,
    # so picking take #2 again fired nothing and the buttons stayed disabled)
    assert window.output.current is second and window.output.play_btn.isEnabled()
    window.output.history.setCurrentRow(1)
    assert window.output.current.number == 1
    for button in (window.output.play_btn, window.output.save_btn, window.output.regen_btn,
                   window.output.remove_btn):
        assert button.isEnabled()

    # a failed generation takes the same path
    slow.fail_at_frame = 2
    window.text_edit.setPlainText("y" * 40)
    assert window.generate()
    qtbot.waitUntil(lambda: window.synth_worker is None, timeout=5000)
    assert dialogs.errors and dialogs.errors[-1][0] == "Cannot generate"
    assert window.output.current.number == 1
    window.output.history.setCurrentRow(0)
    assert window.output.current is second and window.output.remove_btn.isEnabled()


def test_stats_agree_after_cancel(qtbot, make_window):
    slow = FakeSynthesizer(frame_delay=0.03, frames_per_char=10)
    window = make_window(synth=slow)
    window.text_edit.setPlainText("x" * 40)
    assert window.generate()
    seen = []
    window.synth_worker.frame.connect(lambda ev: seen.append(ev.index))
    qtbot.waitUntil(lambda: len(seen) >= 6, timeout=5000)
    window.cancel_generation()
    qtbot.waitUntil(lambda: window.synth_worker is None, timeout=5000)
    p = window.progress
    elapsed = float(p.elapsed.text().removesuffix(" s"))
    per_frame = float(p.ms_per_frame.text().removesuffix(" ms")) / 1000
    rtf = float(p.rtf.text())
    audio = float(p.audio_len.text().removesuffix(" s"))
    frames = round(audio / 0.08)
    assert frames >= 6
    # the shown numbers are rounded (0.1 s, 1 ms, 0.01): they agree within that rounding
    assert abs(per_frame * frames - elapsed) <= 0.05 + 0.0005 * frames
    assert abs(rtf - per_frame / 0.08) <= 0.005 + 0.0005 / 0.08


def test_a_damaged_take_is_skipped_and_reported(qtbot, make_window, tmp_path, dialogs):
    window = make_window()
    _generate(qtbot, window, "A good take.")
    _generate(qtbot, window, "A take that gets damaged.")
    (takes_dir() / "000002" / "take.npz").write_bytes(b"not a zip")
    again = _restart(window, make_window, tmp_path)
    assert [t.number for t in again.output.takes] == [1]
    assert any("000002" in text and text.endswith(".") for _, text in dialogs.notices)
    _generate(qtbot, again, "Numbering goes on past the damaged take.")
    assert again.output.current.number == 3  # the damaged take's folder is left alone
    assert (takes_dir() / "000002" / "take.npz").read_bytes() == b"not a zip"


def test_wav_is_16_bit_pcm_unless_float_is_chosen(qtbot, make_window, dialogs, tmp_path):
    import soundfile as sf

    from qwen3tts_gui.widgets.folders_dialog import FoldersDialog

    window = make_window()
    _generate(qtbot, window, "Saved twice.")
    take = window.output.current
    dialogs.files.append(str(tmp_path / "default.wav"))
    window.output.save_take(take)
    assert sf.info(str(tmp_path / "default.wav")).subtype == "PCM_16"
    dialog = FoldersDialog(window.ctx, window, history_bytes=window.history.store.size_bytes)
    dialog.wav_float.setChecked(True)
    dialog.takes_limit.setValue(200)
    dialog.accept()
    assert window.ctx.settings.wav_float and window.ctx.settings.takes_limit_mb == 200
    dialogs.files.append(str(tmp_path / "float.wav"))
    window.output.save_take(take)
    data, _ = sf.read(str(tmp_path / "float.wav"), dtype="float32")
    assert sf.info(str(tmp_path / "float.wav")).subtype == "FLOAT"
    np.testing.assert_array_equal(data, take.audio)  # float keeps the samples exactly
