"""The app's window speaking a chapter on a real model, in a process of its own, for tests that kill it mid-way:

    python -m tests.gui.chapter_process BUNDLE CHAPTER_FILE

Its folders are the platformdirs ones of the environment (a test's private HOME). It opens BUNDLE as the app
does, makes a voice from the test reference, and generates the chapter (seed 11, at most 4 frames a chunk, one
thread) through the window's own generate(); it never ends by itself.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QApplication

from qwen3tts_gui.context import AppContext
from qwen3tts_gui.data.settings import Settings
from qwen3tts_gui.data.voices import VoiceLibrary
from qwen3tts_gui.engine_adapter import GenerationSettings
from qwen3tts_gui.main_window import MainWindow

from .fakes import FakeAudioBackend, FakeDialogs

ROOT = Path(__file__).resolve().parents[2]
REF = ROOT / "tests" / "fixtures" / "audio" / "en_24k_mono_2s.wav"
SETTINGS = GenerationSettings(seed=11, max_frames=4)


def main(bundle: Path, chapter: Path) -> None:
    app = QApplication([sys.argv[0]])
    home = Path(os.environ["HOME"])
    settings = Settings(QSettings(str(home / "settings.ini"), QSettings.Format.IniFormat))
    settings.threads = 1
    ctx = AppContext(settings, FakeAudioBackend(), FakeDialogs(), library=VoiceLibrary(home / "voices"))
    window = MainWindow(ctx)
    window.show()
    window.open_model(bundle)
    while ctx.synth is None or ctx.job is not None:
        app.processEvents()
        time.sleep(0.005)
    synth = ctx.synth
    voice = synth.create_voice(str(REF), name="Reference")
    assert window.generate(chapter.read_text(encoding="utf-8"), voice, "Reference", "english", SETTINGS)
    print("generating", flush=True)
    while True:
        app.processEvents()
        time.sleep(0.005)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
