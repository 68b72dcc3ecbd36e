"""Whole-app behaviour: the welcome view, opening models (good and bad), no audio device, window state."""

from __future__ import annotations

import json

import numpy as np
import soundfile as sf
from PySide6.QtCore import QSettings, Qt

from qwen3tts_gui.app import parse_args
from qwen3tts_gui.controllers import model_controller as model_controller_module
from qwen3tts_gui.data.paths import models_dir
from qwen3tts_gui.data.settings import Settings
from qwen3tts_gui.engine_adapter import open_synthesizer

from .fakes import FakeAudioBackend


def test_welcome_when_no_model(qtbot, make_window, settings):
    window = make_window(model=False)
    assert window.stack.currentWidget() is window.welcome
    assert not window.generate_btn.isEnabled()
    assert "demo model" in window.welcome.findChild(type(window.model_label), "WelcomeBody").text()
    assert window.model_label.text() == "No model"
    assert settings.model_path == ""


def test_demo_model_from_the_welcome_view(qtbot, make_window, settings, monkeypatch, fake_synth):
    made = []

    def fake_make_demo(dest, progress=None, replace=False):
        for i in range(5):
            progress(i / 4, f"step {i}")
        dest.mkdir(parents=True)
        # what make_demo_bundle writes that matters here: the manifest marking the app's own demo
        (dest / "manifest.json").write_text(json.dumps({"format": "qwen3tts-bundle",
                                                        "config": {"qwen3tts_studio_demo": True}}))
        made.append(dest)
        return dest

    monkeypatch.setattr(model_controller_module, "make_demo_bundle", fake_make_demo)
    window = make_window(model=False)
    window.welcome.demo_btn.click()
    qtbot.waitUntil(lambda: window.ctx.synth is not None, timeout=5000)
    assert made == [models_dir() / "demo"]
    assert window.stack.currentWidget() is window.tabs
    assert settings.model_path == str(models_dir() / "demo")
    assert settings.recent_models == [str(models_dir() / "demo")]
    assert window.lang_combo.count() == len(fake_synth.languages)
    # a second time the existing demo bundle is opened, not made again
    window.use_demo_model()
    qtbot.waitUntil(lambda: window.ctx.job is None, timeout=5000)
    assert len(made) == 1


def test_non_bundle_folder_shows_a_message(qtbot, make_window, dialogs, tmp_path):
    window = make_window(model=False, open_synth=open_synthesizer)
    folder = tmp_path / "just a folder"
    folder.mkdir()
    (folder / "readme.txt").write_text("hello")
    dialogs.dirs.append(str(folder))
    window.choose_model()
    qtbot.waitUntil(lambda: window.ctx.job is None, timeout=5000)
    title, text = dialogs.errors[-1]
    assert title == "Cannot open the model"
    assert "not a model bundle" in text and "Traceback" not in text
    assert window.stack.currentWidget() is window.welcome
    # a damaged manifest and a missing folder too
    bad = tmp_path / "damaged"
    bad.mkdir()
    (bad / "manifest.json").write_text("{ not json")
    for path in (bad, tmp_path / "missing"):
        window.open_model(path)
        qtbot.waitUntil(lambda: window.ctx.job is None, timeout=5000)
        assert dialogs.errors[-1][0] == "Cannot open the model" and "Traceback" not in dialogs.errors[-1][1]
    assert len(dialogs.errors) == 3


def test_conversion_progress_and_cancel(qtbot, make_window, monkeypatch, dialogs, tmp_path):
    import threading

    gate = threading.Event()

    def fake_convert(src, dest, progress=None, cancel=None, precision="fp32"):
        from engine import Cancelled

        for i in range(1000):
            progress(i / 1000, f"converting part {i}")
            gate.wait(0.005)
            if cancel():
                raise Cancelled("conversion cancelled")
        raise AssertionError("not cancelled")

    monkeypatch.setattr(model_controller_module, "convert_checkpoint", fake_convert)
    window = make_window(model=False)
    src = tmp_path / "Qwen3-TTS-12Hz-0.6B-Base"
    src.mkdir()
    dialogs.dirs.append(str(src))
    window.import_checkpoint()
    # first a quick look whether the checkpoint is installed already (it is not readable: no), then the conversion
    qtbot.waitUntil(lambda: window.models.progress_dialog is not None
                    and "converting part" in window.models.progress_dialog.labelText(), timeout=5000)
    dialog = window.models.progress_dialog
    assert dialog.isVisible()
    qtbot.waitUntil(lambda: dialog.value() > 20, timeout=5000)
    assert "converting part" in dialog.labelText()
    worker = window.ctx.job
    with qtbot.waitSignal(worker.finished, timeout=5000):
        dialog.canceled.emit()  # what its Cancel button (or Esc) does
    qtbot.waitUntil(lambda: window.ctx.job is None, timeout=5000)
    assert not dialogs.errors
    assert window.stack.currentWidget() is window.welcome
    assert window.welcome.open_btn.isEnabled()


def test_no_audio_device(qtbot, make_window, dialogs, tmp_path):
    backend = FakeAudioBackend(has_output=False, has_input=False)
    window = make_window(backend=backend)
    panel = window.voice_panel
    assert "no microphone" in panel.editor.record_btn.text().lower()
    assert "No microphone" in panel.editor.record_btn.toolTip()
    assert panel.editor.record_btn.property("unavailable") is True  # grey, not the red "ready" look
    panel.toggle_record()
    assert dialogs.errors[-1][0] == "Cannot record" and "No microphone" in dialogs.errors[-1][1]
    # generating and saving still work; Play is disabled, its tooltip says why, and the status line says it once
    notices = []
    window.ctx.player.notice.connect(notices.append)
    window.text_edit.setPlainText("Still works without sound.")
    assert window.generate()
    qtbot.waitUntil(lambda: window.synth_worker is None and len(notices) > 0, timeout=10000)
    assert len(notices) == 1 and "No audio output device" in notices[0] and "saving still work" in notices[0]
    assert window.statusBar().currentMessage() == notices[0]  # after "Generated 1.0 s", not hidden by it
    assert window.generate()  # the next take: not said again
    qtbot.waitUntil(lambda: window.synth_worker is None, timeout=10000)
    take = window.output.current
    assert take is not None and take.number == 2
    play = window.output.play_btn
    assert not play.isEnabled() and "No audio output device" in play.toolTip() and "saving still work" in play.toolTip()
    qtbot.mouseClick(play, Qt.MouseButton.LeftButton)
    qtbot.wait(50)
    assert len(notices) == 1
    library_play = panel.library.play_voice_btn
    assert not library_play.isEnabled() and "No audio output device" in library_play.toolTip()
    assert not [e for e in dialogs.errors if e[0] == "Cannot play"]  # no modal box at any press
    out = tmp_path / "saved.wav"
    dialogs.files.append(str(out))
    window.output.save_take(take)
    assert sf.info(str(out)).frames == len(take.audio)
    for _t, text in dialogs.errors:
        assert "Traceback" not in text


def test_save_error_is_a_message(qtbot, make_window, dialogs, tmp_path):
    window = make_window()
    window.text_edit.setPlainText("Hello")
    assert window.generate()
    qtbot.waitUntil(lambda: window.synth_worker is None, timeout=10000)
    dialogs.files.append(str(tmp_path / "no such folder" / "x.wav"))
    window.output.save_take(window.output.current)
    title, text = dialogs.errors[-1]
    assert title == "Could not save" and "does not exist" in text


def test_window_geometry_and_settings_restored(qtbot, make_window, tmp_path, settings):
    window = make_window()
    window.resize(1111, 777)
    window.tabs.setCurrentIndex(1)
    window.settings_box.toggle.setChecked(True)
    window.close()
    again = Settings(QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat))
    second = make_window(window_settings=again)
    assert (second.width(), second.height()) == (1111, 777)
    assert second.tabs.currentIndex() == 1
    assert not second.settings_box.body.isHidden()


def test_generation_settings_box(qtbot, make_window, fake_synth):
    window = make_window()
    box = window.settings_box
    s = box.generation_settings()
    assert s.seed is None and s.temperature == fake_synth.default_settings.temperature
    assert s.max_frames is None and s.subtalker_top_k == 50
    box.seed_random.setChecked(False)
    box.seed.setValue(42)
    box.max_frames.setValue(100)
    box.greedy.setChecked(True)
    s = box.generation_settings()
    assert (s.seed, s.max_frames, s.greedy) == (42, 100, True)
    assert not box.temperature.isEnabled()


def test_settings_types_round_trip(tmp_path):
    path = str(tmp_path / "s.ini")
    s = Settings(QSettings(path, QSettings.Format.IniFormat))
    assert s.seed_random is True and s.recent_models == [] and s.batch_gap_ms == 500
    s.seed_random = False
    s.batch_gap_ms = 250
    s.remember_model("/a")
    s.remember_model("/b")
    s.remember_model("/a")
    s.sync()
    t = Settings(QSettings(path, QSettings.Format.IniFormat))
    assert t.seed_random is False and t.batch_gap_ms == 250
    assert t.recent_models == ["/a", "/b"] and t.model_path == "/a"
    t.qsettings.setValue("batch/gap_ms", "lots")  # a hand-edited value falls back to the default
    assert t.batch_gap_ms == 500


def test_command_line():
    assert parse_args(["--model", "/x/bundle"]).model.as_posix() == "/x/bundle"
    assert parse_args([]).model is None
    assert parse_args(["-platform", "offscreen"]).model is None


def test_token_view_scrolls_with_new_frames(qtbot):
    from qwen3tts_gui.widgets.token_view import TokenView

    view = TokenView()
    qtbot.addWidget(view)
    view.resize(300, 120)
    view.show()
    codes = np.random.default_rng(0).integers(0, 2048, (400, 16))
    for row in codes:
        view.add_frame(row)
    assert view.frames == 400
    visible = view._visible_frames()
    assert view.first_visible() == 400 - visible  # following the newest frame
    np.testing.assert_array_equal(view.codes(), codes)
    view.grab()  # paints without error
    view._bar.setValue(10)  # the user scrolls back: new frames must not pull the view away
    for row in codes[:5]:
        view.add_frame(row, update=False)
    view.refresh()
    assert view.first_visible() == 10
    view._bar.setValue(view._bar.maximum())  # back at the end: follows again
    view.add_frame(codes[0])
    assert view.first_visible() == view.frames - visible


def test_threads_setting_reaches_the_engine_when_a_model_opens(qtbot, make_window, settings, monkeypatch):
    import qwen3tts_gui.context as context

    window = make_window(model=False)
    box = window.settings_box
    assert box.threads.value() == 0 and "auto" in box.threads.text().lower()
    box.threads.setValue(1)
    assert settings.threads == 1
    opened = []
    monkeypatch.setattr(context, "open_synthesizer", lambda path, threads=None, **_: opened.append(threads))
    default_ctx = context.AppContext(settings, window.ctx.audio, window.ctx.dialogs, library=window.ctx.library)
    default_ctx.open_synth("some-bundle")
    settings.threads = 0
    default_ctx.open_synth("some-bundle")
    assert opened == [1, None]  # 0 (auto) leaves the choice to the engine: the physical core count


def test_decoder_setting_reaches_the_engine_and_round_trips(qtbot, make_window, settings, monkeypatch):
    """The speech decoder combo: Exact (fp32) or Fast (auto: bf16 convolutions where the CPU has AVX512-BF16),
    stored, shown again by a new settings box, passed to the engine when a model opens; a hand-edited value is
    reset with a notice."""
    import qwen3tts_gui.context as context
    from qwen3tts_gui.engine_adapter import DEFAULT_DECODER_PRECISION
    from qwen3tts_gui.widgets.settings_box import GenerationSettingsBox

    window = make_window(model=False)
    box = window.settings_box
    assert box.decoder.currentData() == settings.decoder_precision == DEFAULT_DECODER_PRECISION
    other = "auto" if DEFAULT_DECODER_PRECISION == "fp32" else "fp32"
    box.decoder.setCurrentIndex(box.decoder.findData(other))
    assert settings.decoder_precision == other
    again = GenerationSettingsBox(settings)
    qtbot.addWidget(again)
    assert again.decoder.currentData() == other
    opened = []
    monkeypatch.setattr(context, "open_synthesizer",
                        lambda path, threads=None, decoder_precision=None, **_: opened.append(decoder_precision))
    default_ctx = context.AppContext(settings, window.ctx.audio, window.ctx.dialogs, library=window.ctx.library)
    default_ctx.open_synth("some-bundle")
    box.decoder.setCurrentIndex(box.decoder.findData("fp32"))
    default_ctx.open_synth("some-bundle")
    assert opened == [other, "fp32"]
    settings.qsettings.setValue("engine/decoder_precision", "turbo")
    assert settings.decoder_precision == DEFAULT_DECODER_PRECISION
    assert any("engine/decoder_precision" in p for p in settings.take_problems())


def test_real_synthesizer_opens_with_the_decoder_setting(demo_bundle):
    """open_synthesizer hands the setting to the real engine: "fp32" decodes exactly; "auto" gives bf16 where this
    computer's tuning measured it faster, and without a tuning on a CPU with AVX512-BF16; fp32 elsewhere."""
    from engine.runtime.cpu import has_bf16_dot_product
    from qwen3tts_gui.engine_adapter import open_synthesizer

    assert open_synthesizer(demo_bundle, threads=1, decoder_precision="fp32").decoder_precision == "fp32"
    synth = open_synthesizer(demo_bundle, threads=1, decoder_precision="auto")
    measured = synth.tuning.settings.decoder_bf16_faster if synth.tuning is not None else None
    assert synth.decoder_precision == ("bf16" if (has_bf16_dot_product() if measured is None else measured)
                                       else "fp32")
