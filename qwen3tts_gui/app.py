"""Entry point: `qwen3tts-gui [--model BUNDLE]` (also `python -m qwen3tts_gui`)."""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
import tempfile
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, cast

from . import APP_ID, APP_NAME, __version__

if TYPE_CHECKING:
    from PySide6.QtWidgets import QApplication


def parse_args(argv: list[str]) -> argparse.Namespace:
    """Our options; everything else (Qt's own: -platform offscreen, -style fusion...) is kept, with its values
    and in order, in args.qt_args for QApplication."""
    parser = argparse.ArgumentParser(prog="qwen3tts-gui", description=f"{APP_NAME}: local Qwen3-TTS voice cloning",
                                     allow_abbrev=False)
    parser.add_argument("--model", type=Path, help="model bundle folder to open (remembered for next time)")
    parser.add_argument("--version", action="version", version=f"{APP_NAME} {__version__}")
    args, qt_args = parser.parse_known_args(argv)
    args.qt_args = qt_args
    return args


def ensure_home() -> str | None:
    """With HOME unset or empty, Qt writes settings to /.config and platformdirs guesses: use the account's home
    from the password database (or the temp folder). Returns a note for the log when it had to step in."""
    if os.environ.get("HOME"):
        return None
    os.environ.pop("HOME", None)
    home = os.path.expanduser("~")  # without HOME: the password database entry
    if home == "~" or not home or not os.path.isdir(home) or not os.access(home, os.W_OK):
        home = tempfile.gettempdir()
    os.environ["HOME"] = home
    return f"HOME was not set; using {home}"


def binding_problem() -> str | None:
    """PySide6 6.12.0's abi3 wheels drop a reference to None on every void call under Python < 3.12, which
    kills the process after a few thousand calls ("deallocating None"). Detect it before it bites."""
    from PySide6.QtCore import QObject

    probe = QObject()
    before = sys.getrefcount(None)
    for _ in range(50):
        probe.setObjectName("probe")
    if sys.getrefcount(None) < before - 25:
        import PySide6

        return (f"PySide6 {PySide6.__version__} is broken on Python {sys.version_info.major}."
                f"{sys.version_info.minor} (it loses references to None and crashes); "
                "install another version, e.g. pip install 'PySide6-Essentials<6.12'")
    return None


def display_problem(environ: dict[str, str] | os._Environ[str], qt_args: list[str],
                    platform: str = sys.platform) -> str | None:
    """One line when a Linux desktop app has no display to open its window on (the usual case over SSH), where
    Qt would abort naming a library that is installed. None when a display is set, or a platform is chosen."""
    if not platform.startswith("linux") or "-platform" in qt_args:
        return None
    chosen = environ.get("QT_QPA_PLATFORM", "")
    if chosen and not chosen.startswith(("xcb", "wayland")):
        return None  # offscreen, vnc, eglfs...: no display needed
    if environ.get("DISPLAY") or environ.get("WAYLAND_DISPLAY"):
        return None
    return ("no display: start the app from a desktop session (over SSH: ssh -X); the qwen3tts command works "
            "without one (QT_QPA_PLATFORM=offscreen draws the window nowhere, for testing only)")


def configure_runtime() -> None:
    """Hand the GIL to the GUI thread sooner: the engine worker is Python + numpy between ncnn calls, and with
    the default 5 ms switch interval every GUI event could wait up to 5 ms (or longer) for the interpreter."""
    sys.setswitchinterval(0.002)


STYLE_SHEET = "style.qss"
WINDOW_ICON = "icon.svg"


def load_style_sheet() -> str:
    from .data.paths import resource

    path = resource(STYLE_SHEET)
    if path is None:
        return ""
    # Style sheet urls are relative to the working directory; point them at the resources folder instead.
    return path.read_text(encoding="utf-8").replace("@RESOURCES@", path.parent.as_posix())


def missing_resources() -> list[str]:
    """The files of the app's look that cannot be found: the style sheet, the window icon and every image the
    style sheet names. Empty when the app looks as in its screenshots."""
    from .data.paths import resource, resources_dir

    missing = [name for name in (STYLE_SHEET, WINDOW_ICON) if resource(name) is None]
    sheet = resource(STYLE_SHEET)
    if sheet is not None:
        for name in re.findall(r"url\(@RESOURCES@/([^)]+)\)", sheet.read_text(encoding="utf-8")):
            if resource(name) is None and name not in missing:
                missing.append(name)
    return [str(resources_dir() / name) for name in missing]


def apply_look(app: QApplication) -> list[str]:
    """The Fusion style, the style sheet and the window icon, for the app and its README screenshots alike.
    Returns what missing_resources() says is missing."""
    from PySide6.QtGui import QIcon

    from .data.paths import resource

    app.setStyle("Fusion")
    app.setStyleSheet(load_style_sheet())
    icon = resource(WINDOW_ICON)
    if icon:
        app.setWindowIcon(QIcon(str(icon)))
    return missing_resources()


def _exists(path: Path) -> bool:
    """Path.exists that cannot raise (a folder without permission raises PermissionError): opening the model
    then says what is wrong, in a message."""
    try:
        return path.exists()
    except OSError:
        return True


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    no_display = display_problem(os.environ, args.qt_args)
    if no_display:
        print(f"qwen3tts-gui: {no_display}", file=sys.stderr)
        return 1
    home_note = ensure_home()

    from PySide6.QtCore import QCoreApplication, QTimer
    from PySide6.QtWidgets import QApplication

    from .audio_io import SoundDeviceBackend
    from .context import AppContext
    from .data.paths import data_dir
    from .data.settings import user_settings
    from .diagnostics import log, setup_logging, user_message
    from .main_window import MainWindow
    from .single_instance import SingleInstance, Start, bring_forward

    log_path = setup_logging()
    if home_note:
        log.warning(home_note)
    configure_runtime()
    problem = binding_problem()
    if problem:
        log.error(problem)
        print(f"qwen3tts-gui: {problem}", file=sys.stderr)
        return 1
    QCoreApplication.setOrganizationName(APP_NAME)
    QCoreApplication.setApplicationName(APP_ID)
    # the app only ever makes a QApplication; instance() is typed as the QCoreApplication base
    app = cast(QApplication, QApplication.instance() or QApplication([sys.argv[0] if sys.argv else "qwen3tts-gui",
                                                                      *args.qt_args]))
    app.setApplicationDisplayName(APP_NAME)
    instance = SingleInstance(data_dir())  # held (lock and socket) until the process ends
    named = "" if args.model is None else str(args.model.absolute() if _exists(args.model) else args.model)
    start = instance.start(named)
    if start is Start.HANDED_OVER:
        also = f" and asked to open {named}" if named else ""
        log.info("already open: its window was brought to the front%s", also)
        print(f"qwen3tts-gui: {APP_NAME} is already open; its window was brought to the front{also}.",
              file=sys.stderr)
        return 0
    missing = apply_look(app)
    if missing:
        log.warning("the app's look is incomplete; missing %s", ", ".join(missing))

    settings = user_settings()
    ctx = AppContext(settings, SoundDeviceBackend())
    if start is Start.UNANSWERED:
        ctx.notices.append((f"{APP_NAME} is already open", (
            f"Another window of {APP_NAME} uses the same data folder ({data_dir()}) but did not answer. This "
            "window works beside it: every take of both is kept, and the window closed last keeps its settings.")))
    window = MainWindow(ctx)

    def shown_for_launch(named: str) -> None:  # a later launch: this window, and the model it named
        bring_forward(window)
        if named:
            model = launch_model(Path(named))
            if model is None:
                ctx.dialogs.error(window, "Cannot open the model", f"{named} does not exist")
            elif ctx.can_start(window, needs_model=False):
                window.open_model(model)

    instance.show_requested.connect(shown_for_launch)

    def excepthook(kind, value, tb):  # a bug in a GUI slot: log it, show one line, keep running
        log.error("unhandled exception\n%s", "".join(traceback.format_exception(kind, value, tb)))
        if isinstance(value, KeyboardInterrupt):
            app.quit()
            return
        ctx.dialogs.error(window, APP_NAME, user_message(value, "handling that"))

    sys.excepthook = excepthook
    # SIGTERM/SIGINT (logout, Ctrl+C in a terminal) close the window normally: settings saved, workers stopped.
    # Python only sees signals when it runs, so a slow timer gives it the chance.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: QTimer.singleShot(0, window.close))
    ticker = QTimer()
    ticker.start(250)
    ticker.timeout.connect(lambda: None)
    window.show()
    log.info("started; log file %s", log_path)
    if args.model is not None:
        model = launch_model(args.model)
        if model is not None:
            window.open_model(model)
        else:
            ctx.dialogs.error(window, "Cannot open the model", f"{args.model} does not exist")
    elif settings.model_path and _exists(Path(settings.model_path)):
        window.open_model(Path(settings.model_path))
    return app.exec()


def launch_model(named: Path) -> Path | None:
    """The model --model names: a bundle folder, or an installed model's name; None when neither exists."""
    from .engine_adapter import installed_model

    if _exists(named):
        return named
    model = installed_model(named)
    return model if model is not None and _exists(model) else None
