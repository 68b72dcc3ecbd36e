"""A whole app window with the fake engine in a process of its own, for tests that need two real processes on
one takes folder:

    python -m tests.gui.window_process TAKES_FOLDER NAME TAKES

It opens the window on TAKES_FOLDER (its history read as at a start), writes NAME.ready there, waits for a file
named "go" (so that two of them have both read the history before either makes a take), generates TAKES takes
one after another, waits until each has been written, and prints one JSON line: the numbers of its takes and
every notice and error the window showed.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QApplication

from qwen3tts_gui.context import AppContext
from qwen3tts_gui.data.settings import Settings
from qwen3tts_gui.data.voices import VoiceLibrary
from qwen3tts_gui.main_window import MainWindow

from .fakes import FakeAudioBackend, FakeDialogs, FakeSynthesizer, speech_like


def _wait(app: QApplication, done, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while not done():
        if time.monotonic() > end:
            raise TimeoutError("the window did not get there in time")
        app.processEvents()
        time.sleep(0.005)


def main(folder: Path, name: str, takes: int) -> None:
    app = QApplication([sys.argv[0]])
    private = folder.parent / f"{name}-private"
    private.mkdir(exist_ok=True)
    synth = FakeSynthesizer(frame_delay=0.001)
    dialogs = FakeDialogs()
    ctx = AppContext(Settings(QSettings(str(private / "settings.ini"), QSettings.Format.IniFormat)),
                     FakeAudioBackend(), dialogs, open_synth=lambda path: synth,
                     library=VoiceLibrary(private / "voices"))
    ctx.library.add(synth.create_voice((speech_like(2.0, 24000), 24000), ref_text=None, name="Voice"))
    window = MainWindow(ctx, takes_folder=folder)
    window.show()
    _wait(app, lambda: not window.history.loading)
    window.open_model(private / "bundle")
    _wait(app, lambda: ctx.synth is not None and ctx.job is None)
    (folder / f"{name}.ready").touch()
    _wait(app, lambda: (folder / "go").exists())
    numbers = []
    for i in range(takes):
        assert window.generate(f"Take {i + 1} of the window called {name}."), dialogs.errors
        _wait(app, lambda: ctx.job is None)
        numbers.append(window.output.current.number)
    _wait(app, lambda: window.history.writing == 0)
    window.close()
    print(json.dumps({"numbers": numbers, "notices": dialogs.notices, "errors": dialogs.errors}))


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]))
