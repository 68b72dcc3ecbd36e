"""Screenshots for the README from the real app with a demo bundle: main.png, small.png (1000x700, generation
settings open: the layout at the smallest usual window size), progress.png, batch.png.

Run under Xvfb (a real X11 window; qwen3tts_gui/qt_system_libs.py lists the xcb libraries it needs):
    Xvfb :99 -screen 0 1600x1000x24 &
    DISPLAY=:99 QT_QPA_PLATFORM=xcb python docs/screenshots/make_screenshots.py [--model BUNDLE] [--out DIR]
Without an X server, Qt's offscreen platform with a desktop-sized screen gives the same pictures (fonts as
fontconfig finds them; the Chinese batch line needs a CJK font such as fonts-wqy-microhei):
    QT_QPA_PLATFORM=offscreen:configfile=tests/gui/offscreen-screen.json python docs/screenshots/make_screenshots.py
Settings, voices, text, batch lines and the demo bundle live in a temporary folder; the user's own are never
touched.
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from PySide6.QtCore import QEventLoop, QObject, QSettings, Qt, Slot  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from qwen3tts_gui.app import apply_look  # noqa: E402
from qwen3tts_gui.context import AppContext, Dialogs  # noqa: E402
from qwen3tts_gui.data.settings import Settings  # noqa: E402
from qwen3tts_gui.data.voices import VoiceLibrary  # noqa: E402
from qwen3tts_gui.engine_adapter import make_demo_bundle, open_synthesizer  # noqa: E402
from qwen3tts_gui.main_window import MainWindow  # noqa: E402


class QuietDevice:
    """Reports a microphone and speakers so the window looks as it does on a desktop; plays nothing."""

    def output_problem(self):
        return None

    def input_problem(self):
        return None

    def input_samplerate(self):
        return 48000

    def open_output(self, samplerate, fill):
        raise RuntimeError("not used for screenshots")

    open_input = open_output


def voice_like(seconds: float, sr: int, pitch: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * sr)) / sr
    syll = 0.3 + 0.7 * np.clip(np.sin(2 * np.pi * 3.1 * t + rng.uniform(0, 6)), 0, None) ** 0.7
    gate = (t > 0.45) & (t < seconds - 0.5)
    f0 = pitch * (1 + 0.08 * np.sin(2 * np.pi * 0.7 * t))
    phase = 2 * np.pi * np.cumsum(f0) / sr
    tone = sum(np.sin(k * phase) / k for k in range(1, 6))
    return (0.25 * tone * syll * gate + 0.002 * rng.standard_normal(len(t))).astype(np.float32)


def wait_until(app: QApplication, cond, timeout: float = 300.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise TimeoutError("the app did not get there in time")
        app.processEvents(QEventLoop.ProcessEventsFlag.AllEvents, 50)
        time.sleep(0.01)


def settle(app: QApplication, seconds: float = 0.4) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        app.processEvents(QEventLoop.ProcessEventsFlag.AllEvents, 50)
        time.sleep(0.01)


class MidTakeShot(QObject):
    """Saves the window at a given frame of a take, from a slot the worker blocks on (a blocking queued
    connection), so the picture shows the take mid-way however fast the model is."""

    def __init__(self, app: QApplication, window: MainWindow, index: int, path: Path):
        super().__init__()
        self.app, self.window, self.index, self.path = app, window, index, path
        self.taken = False

    @Slot(object)
    def frame(self, event) -> None:
        if self.taken or event.index < self.index:
            return
        settle(self.app, 0.3)  # the progress panel's throttled updates land
        self.window.grab().save(str(self.path))
        self.taken = True


def make_app() -> QApplication:
    """The application as the app itself sets it up (style, style sheet, icon: qwen3tts_gui.app.apply_look)."""
    app = QApplication.instance() or QApplication([sys.argv[0]])
    app.setApplicationDisplayName("Qwen3-TTS Studio")
    missing = apply_look(app)
    if missing:
        raise SystemExit(f"the app's look is incomplete; missing {', '.join(missing)}")
    return app


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", type=Path, help="bundle to use (default: a fresh demo bundle)")
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="qwen3tts-shots-"))
    atexit.register(shutil.rmtree, tmp, True)
    # the app keeps its text and batch lines in the data folder: a private one, or every run would add its
    # eight batch lines to the user's (and to the next screenshot's table)
    os.environ["XDG_DATA_HOME"] = str(tmp / "data")
    model = args.model or make_demo_bundle(tmp / "models" / "demo")

    app = make_app()
    settings = Settings(QSettings(str(tmp / "settings.ini"), QSettings.Format.IniFormat))
    settings.output_dir = str(tmp / "out")
    settings.batch_dir = str(tmp / "out" / "Chapter 1")
    ctx = AppContext(settings, QuietDevice(), Dialogs(), open_synth=open_synthesizer,
                     library=VoiceLibrary(tmp / "voices"))
    window = MainWindow(ctx, takes_folder=tmp / "takes")
    window.resize(1280, 860)
    window.move(40, 30)
    window.show()
    window.open_model(model)
    wait_until(app, lambda: ctx.synth is not None and ctx.job is None)
    synth = ctx.synth

    for name, pitch, text, lang in [
        ("Anna, calm", 210.0, "It was a bright cold day in April.", "english"),
        ("Ben, narrator", 120.0, None, "english"),
        ("Chen", 180.0, "今天天气很好。", "chinese"),
    ]:
        voice = synth.create_voice((voice_like(5.5, 24000, pitch, int(pitch)), 24000), ref_text=text, name=name,
                                   language=lang)
        ctx.library.add(voice)
    window.voice_panel.refresh()
    window.voice_panel.library.list.setCurrentRow(0)

    # A reference being prepared in the new-voice editor (waveform with a trim, coach notes).
    ref = voice_like(7.2, 48000, 150.0, 3)
    window.voice_panel.editor.set_reference(ref.reshape(-1, 1), 48000, None)
    window.voice_panel.editor.trim_silence()
    window.voice_panel.editor.name_edit.setText("Dana, warm")
    window.voice_panel.editor.transcript.setPlainText("The quick brown fox jumps over the lazy dog.")

    text = ("Welcome to Qwen3-TTS Studio. Type any text, pick a voice, and press Generate: "
            "the speech is made right here on your computer.")
    window.text_edit.setPlainText(text)
    box = window.settings_box
    box.seed_random.setChecked(False)
    box.stream_audio.setChecked(True)
    for seed in (1234, 2025):
        box.seed.setValue(seed)
        box.max_frames.setValue(90)
        assert window.generate()
        wait_until(app, lambda: window.synth_worker is None)
    settle(app)
    args.out.mkdir(parents=True, exist_ok=True)
    window.grab().save(str(args.out / "main.png"))

    # A small screen (1000x700, near the 960x640 minimum) with the settings open: nothing may be cut off.
    window.resize(1000, 700)
    box.toggle.setChecked(True)
    settle(app, 0.6)
    window.grab().save(str(args.out / "small.png"))
    box.toggle.setChecked(False)
    window.resize(1280, 860)
    settle(app)

    # Mid-generation: progress, live tokens, settings open.
    window.voice_panel.editor.discard_reference()
    box.toggle.setChecked(True)
    box.max_frames.setValue(400)
    box.seed.setValue(99)
    window.text_edit.setPlainText(text + " The codec tokens appear frame by frame while it works.")
    # The demo model makes a frame in a few ms: the worker waits at frame 79 while the picture is taken.
    shot = MidTakeShot(app, window, 79, args.out / "progress.png")
    for seed in range(99, 120):  # random weights may stop early: find a take that runs long enough
        box.seed.setValue(seed)
        assert window.generate()
        window.synth_worker.frame.connect(shot.frame, Qt.ConnectionType.BlockingQueuedConnection)
        wait_until(app, lambda: shot.taken or window.synth_worker is None)
        if shot.taken:
            break
    if not shot.taken:
        raise SystemExit("no take ran long enough for the mid-generation picture")
    window.cancel_generation()
    wait_until(app, lambda: window.synth_worker is None)
    box.toggle.setChecked(False)

    # Batch: a few lines done, one failed (unknown language), one running, the rest waiting.
    window.tabs.setCurrentIndex(1)
    box.max_frames.setValue(40)
    lines = [
        ("Chapter one. The lighthouse.", "Ben, narrator", "english"),
        ("The keeper climbed the stairs every evening at dusk.", "Ben, narrator", "english"),
        ("\u201cIs anyone there?\u201d she called into the fog.", "Anna, calm", "english"),
        ("Nobody answered.", "Ben, narrator", "klingon"),
        ("远处传来了钟声。", "Chen", "chinese"),
        ("She lit the lamp and waited.", "Anna, calm", "english"),
        ("Morning came slowly over the water.", "Ben, narrator", "english"),
        ("End of chapter one.", "Ben, narrator", "english"),
    ]
    window.batch.add_rows(lines)
    window.batch.merge.setChecked(True)
    window.batch.at_once.setValue(2)  # two lines side by side: some done, two running, the rest waiting
    assert window.batch.run_all()
    wait_until(app, lambda: any(ln.state == "running" and ln.frames > 12 for ln in window.batch.model.lines[4:]))
    window.grab().save(str(args.out / "batch.png"))  # at once: the demo model finishes a line in a blink
    window.batch.cancel()
    wait_until(app, lambda: not window.batch.running)
    window.close()
    print(f"wrote {', '.join(str(args.out / n) for n in ('main.png', 'small.png', 'progress.png', 'batch.png'))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
