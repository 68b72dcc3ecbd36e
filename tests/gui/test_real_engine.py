"""End to end with the real engine on a demo bundle: voice from a file, generate, tokens, save, batch, cancel.

Frame counts are kept small (the demo model speaks noise and never needs to be long).
"""

from __future__ import annotations

import threading

import numpy as np
import soundfile as sf
from PySide6.QtCore import Qt

from qwen3tts_gui.data.paths import models_dir
from qwen3tts_gui.engine_adapter import Voice, open_synthesizer

from .fakes import speech_like


def _real_window(make_window, demo_bundle):
    return make_window(model=False, voice=False, open_synth=open_synthesizer)


def _open(qtbot, window, path):
    with qtbot.waitSignal(window.ctx.model_changed, timeout=60000):
        assert window.open_model(path)
    qtbot.waitUntil(lambda: window.ctx.job is None, timeout=60000)


def test_real_voice_generate_save(qtbot, make_window, demo_bundle, dialogs, tmp_path):
    window = _real_window(make_window, demo_bundle)
    # from the welcome view: "Try the demo model" makes a real demo bundle and opens it
    assert window.stack.currentWidget() is window.welcome
    window.welcome.demo_btn.click()
    qtbot.waitUntil(lambda: window.ctx.synth is not None, timeout=120000)
    qtbot.waitUntil(lambda: window.ctx.job is None, timeout=60000)
    assert window.ctx.model_path == models_dir() / "demo"
    assert window.stack.currentWidget() is window.tabs
    synth = window.ctx.synth
    assert window.lang_combo.count() == len(synth.languages) and window.lang_combo.itemData(0) == "auto"

    # a voice from a FLAC file, trimmed, with a transcript (ICL)
    ref = tmp_path / "speaker.flac"
    sf.write(ref, speech_like(4.0, 44100), 44100)
    panel = window.voice_panel
    assert panel.load_reference_file(ref)
    panel.editor.trim_silence()
    panel.editor.transcript.setPlainText("Hello there.")
    panel.editor.create_voice()
    qtbot.waitUntil(lambda: window.ctx.busy is None, timeout=60000)
    assert not dialogs.errors, dialogs.errors
    entry = panel.selected_entry()
    assert entry is not None and entry.icl and entry.model_id == synth.model_id
    assert Voice.load(entry.path, model_id=synth.model_id).ref_codes.shape[1] == 16

    # generate with streaming audio and a small frame cap
    box = window.settings_box
    box.seed_random.setChecked(False)
    box.seed.setValue(7)
    box.max_frames.setValue(6)
    box.stream_audio.setChecked(True)
    window.text_edit.setPlainText("Hello world.")
    frames, chunks = [], []
    start_job = window.ctx.start_job

    def connected_first(worker, *a, **kw):  # before the thread starts: under load frame 0 could come first
        worker.frame.connect(lambda ev: frames.append(ev.index))
        worker.chunk.connect(lambda ch: chunks.append((ch.start_sample, len(ch.samples))))
        return start_job(worker, *a, **kw)

    window.ctx.start_job = connected_first
    assert window.generate()
    window.ctx.start_job = start_job
    qtbot.waitUntil(lambda: window.synth_worker is None, timeout=120000)
    assert not dialogs.errors, dialogs.errors
    take = window.output.current
    assert take is not None and take.seed == 7
    n = len(take.result.codes)
    assert 1 <= n <= 6
    assert frames == list(range(n))
    np.testing.assert_array_equal(window.progress.tokens.codes(), take.result.codes)
    starts = [s for s, _ in chunks]
    assert starts == sorted(starts) and sum(k for _, k in chunks) == len(take.audio)

    out = tmp_path / "real.wav"
    dialogs.files.append(str(out))
    window.output.save_take(take)
    data, sr = sf.read(out, dtype="float32")
    assert sr == 24000 and len(data) == len(take.audio) > 0


def test_real_batch_and_cancel(qtbot, make_window, demo_bundle, dialogs, settings, tmp_path):
    window = _real_window(make_window, demo_bundle)
    _open(qtbot, window, demo_bundle)
    synth = window.ctx.synth
    window.ctx.library.add(synth.create_voice((speech_like(3.0, 24000), 24000), name="Noise"))
    window.voice_panel.refresh()
    window.settings_box.max_frames.setValue(6)
    settings.batch_dir = str(tmp_path / "batch")
    panel = window.batch
    panel.add_rows([("First.", "", "auto"), ("Bad language.", "", "klingon"), ("Third.", "Noise", "english")])
    assert panel.run_all()
    qtbot.waitUntil(lambda: not panel.running, timeout=120000)
    assert [ln.state for ln in panel.model.lines] == ["done", "failed", "done"]
    assert "klingon" in panel.model.lines[1].error
    for name in ("001 - First.wav", "003 - Third.wav"):
        assert sf.info(str(tmp_path / "batch" / name)).samplerate == 24000

    # cancel a long generation after two frames
    window.settings_box.max_frames.setValue(200)
    window.text_edit.setPlainText("A long text. " * 20)
    seen = []
    cancel_asked = threading.Event()

    def hold_second_frame(ev):  # on the worker thread: the demo model cannot reach EOS before the cancel
        seen.append(ev.index)
        if len(seen) == 2:
            cancel_asked.wait(30)

    start_job = window.ctx.start_job

    def connected_first(worker, *a, **kw):  # before the thread starts, so no frame is missed
        worker.frame.connect(hold_second_frame, Qt.ConnectionType.DirectConnection)
        return start_job(worker, *a, **kw)

    window.ctx.start_job = connected_first
    assert window.generate(), dialogs.errors
    worker = window.synth_worker
    qtbot.waitUntil(lambda: len(seen) >= 2, timeout=60000)
    with qtbot.waitSignal(worker.finished, timeout=30000):
        window.cancel_generation()
        cancel_asked.set()
    assert len(seen) == 2 and window.output.current is None
    assert "Cancelled" in window.progress.bar.format()


def test_entry_point_opens_a_model(demo_bundle, tmp_path):
    """`python -m qwen3tts_gui --model BUNDLE` starts, opens the bundle and keeps running (then we stop it)."""
    import os
    import subprocess
    import sys
    import time
    from pathlib import Path

    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", HOME=str(tmp_path))
    for var in ("XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        env[var] = str(tmp_path / var.lower())
    log = tmp_path / "xdg_state_home" / "Qwen3-TTS Studio" / "log" / "qwen3tts-gui.log"
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen([sys.executable, "-m", "qwen3tts_gui", "--model", str(demo_bundle)], cwd=root, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and proc.poll() is None:
            if log.is_file() and "opened model" in log.read_text():
                break
            time.sleep(0.2)
        assert proc.poll() is None, proc.communicate()[1].decode()[-2000:]
        assert "opened model" in log.read_text()
    finally:
        proc.terminate()  # the app closes its window normally on SIGTERM
        code = proc.wait(20)
    assert code == 0
    settings = tmp_path / "xdg_config_home" / "Qwen3-TTS Studio" / "qwen3tts-studio.conf"
    assert str(demo_bundle) in settings.read_text()  # remembered for next time


def test_real_chapter_is_one_take(qtbot, make_window, demo_bundle, dialogs):
    """Two paragraphs on the real demo engine: two chunks, one take of both chunks and the paragraph pause."""
    from engine import GenerationSettings, JoinSettings

    window = _real_window(make_window, demo_bundle)
    _open(qtbot, window, demo_bundle)
    voice = window.ctx.synth.create_voice((speech_like(3.0, 24000), 24000), name="Noise")
    parts, pieces = [], []
    start_job = window.ctx.start_job

    def connected_first(worker, *a, **kw):  # before the thread starts, so no signal is missed
        worker.part.connect(lambda i, n: parts.append((i, n)))
        worker.chunk.connect(lambda ch: pieces.append(ch))
        return start_job(worker, *a, **kw)

    window.ctx.start_job = connected_first
    assert window.generate("A first paragraph.\n\nA second one.", voice, "Noise", "english",
                           GenerationSettings(seed=7, max_frames=3))
    qtbot.waitUntil(lambda: window.synth_worker is None, timeout=120000)
    assert not dialogs.errors and not dialogs.infos
    take = window.output.current
    assert parts == [(0, 2), (1, 2)] and take.seed == 7
    frames = len(take.result.codes)
    assert 2 <= frames <= 6  # each chunk 1..3 frames (a cap the caller set is kept)
    pause = round(JoinSettings().paragraph_pause * 24000)
    assert len(take.audio) == frames * 1920 + pause  # x-vector voice: 1920 samples per frame
    np.testing.assert_array_equal(take.audio, np.concatenate([p.samples for p in pieces]))
    assert np.all(take.audio[len(pieces[0].samples):len(pieces[0].samples) + pause] == 0)
