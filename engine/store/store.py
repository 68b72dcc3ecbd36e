"""Installed models: bundles in one folder (the model store), listed, resolved by name, removed
(moving them all to another folder builds on this: move.py).

The folder is QWEN3TTS_MODELS_DIR when set, else the folder the app last moved the store to (a one-line
pointer file in the user config folder), else `<user data folder>/models` (platformdirs). Each installed model
is a bundle folder named after the model; `source.json` beside its manifest records where it came from.
Folders whose name starts with a dot are work in progress (downloads, conversions) and never listed.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from ..errors import EngineError
from ..io.json_file import json_object_or_none
from ..runtime.bundle import DEMO_MARK
from ..runtime.q8 import FORMAT_VERSION as Q8_FORMAT_VERSION
from ..runtime.q8_check_record import CheckRecordError, read_check_record
from ..runtime.whisper_part import WhisperPart

APP_NAME = "Qwen3-TTS Studio"  # the platformdirs name the app uses for all its folders
ENV_DIR = "QWEN3TTS_MODELS_DIR"
SOURCE = "source.json"
DOWNLOADS = ".downloads"
OLD_Q8_NOTE = ("8-bit bundle from before outlier smoothing: it runs, but converting it again "
               "(download it again, or 'qwen3tts convert --precision q8') keeps it accurate on real weights")
UNCHECKED_NOTE = ("8-bit bundle from before the 8-bit check: its error on these weights was never measured; "
                  "'qwen3tts models check {name} --checkpoint DIR' (the checkpoint it came from) measures it")
DAMAGED_CHECK_NOTE = "its 8-bit check record is damaged ({reason}); 'qwen3tts models check {name}' measures it again"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._ -]{0,99}$")


class StoreError(EngineError):
    """A model-store problem: unknown name, bad name, a folder that cannot be used."""


def _pointer_file() -> Path:
    return Path(platformdirs.user_config_dir(APP_NAME, appauthor=False)) / "models-folder.txt"


def default_models_dir(chosen: str | os.PathLike | None = None) -> Path:
    """Where installed models live: QWEN3TTS_MODELS_DIR, else `chosen` (the app's setting), else the module
    docstring's order."""
    env = os.environ.get(ENV_DIR)
    if env:
        return Path(env).expanduser()
    if chosen:
        return Path(chosen).expanduser()
    from ..io.fileio import read_own_file

    try:  # a regular file of a path's size only (a FIFO there would block the app's start), never through a link
        moved = read_own_file(_pointer_file(), 65536).decode("utf-8").strip()
    except (OSError, ValueError):
        moved = ""
    if "\0" in moved or "\n" in moved:
        moved = ""
    if moved:
        return Path(moved)
    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False)) / "models"


def check_name(name: str) -> str:
    """An installed model's name doubles as its folder name: keep it plain."""
    if not _NAME.match(name) or name.endswith((".", " ")):
        raise StoreError(f"{name!r} cannot be a model name; use letters, digits, '.', '-', '_' or spaces "
                         "(at most 100, not starting with a dot).")
    return name


@dataclass(frozen=True)
class InstalledModel:
    name: str
    path: Path
    precision: str
    repo_id: str  # "" when imported from a local checkpoint
    disk_bytes: int
    note: str = ""  # one line for the listing, e.g. that an 8-bit bundle predates outlier smoothing
    demo: bool = False  # the app's demo model (random weights, made on this computer): neither downloaded nor imported
    accuracy: str = ""  # what the 8-bit check measured, e.g. "8-bit, checked: KL 8.1e-04 / 1.2e-03 (...)"
    check_offered: bool = False  # an 8-bit bundle without a (readable) check record: offer the check
    checkpoint: tuple[str, str] = ("", "")  # (fingerprint, precision asked) of the checkpoint it was converted from
    recognises_speech: bool = False  # a Whisper bundle (speech recognition), not a voice model

    @property
    def source(self) -> str:
        """Where the model came from, for listings: its repository, "demo" or "imported" (a local checkpoint)."""
        return "demo" if self.demo else self.repo_id or "imported"


def folder_bytes(path: Path) -> int:
    total = 0
    for f in path.rglob("*"):
        try:
            if f.is_file() and not f.is_symlink():
                total += f.stat().st_size
        except OSError:  # removed meanwhile, unreadable: not counted
            pass
    return total


def _reason(e: BaseException) -> str:
    return (e.strerror if isinstance(e, OSError) and e.strerror else str(e).splitlines()[0] if str(e)
            else type(e).__name__)


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except (OSError, ValueError):
        return False


def shown_path(path: Path | str, limit: int = 90) -> str:
    """A path as it may appear in a one-line message: shortened in the middle when very long."""
    text = str(path)
    return text if len(text) <= limit else text[:30] + "…" + text[-(limit - 31):]


class ModelStore:
    """The models folder. Its constructor and readers raise StoreError only (one line), whatever the folder is:
    missing, a file, unreadable, or a path the system refuses (too long, a NUL): the app shows it and starts."""

    def __init__(self, root: str | os.PathLike | None = None):
        try:
            self.root = Path(root) if root is not None else default_models_dir()
        except (OSError, ValueError, RuntimeError, TypeError) as e:  # "~nosuchuser", a NUL, not a path
            raise StoreError(f"The models folder setting cannot be used ({_reason(e)}); choose another folder "
                             f"(the app's Folders dialog, or {ENV_DIR}).") from None

    @contextmanager
    def reading(self) -> Iterator[None]:
        """Turns what the system says about an unusable folder into one StoreError line."""
        try:
            yield
        except (OSError, ValueError, RuntimeError) as e:
            raise StoreError(f"The models folder {shown_path(self.root)} cannot be read ({_reason(e)}); choose "
                             f"another folder (the app's Folders dialog, or {ENV_DIR}).") from None

    def path_of(self, name: str) -> Path:
        return self.root / check_name(name)

    def downloads_dir(self) -> Path:
        return self.root / DOWNLOADS

    def installed(self) -> list[InstalledModel]:
        with self.reading():
            if not self.root.is_dir():
                return []
            out = []
            for d in sorted(self.root.iterdir(), key=lambda p: p.name.lower()):
                if d.name.startswith(".") or not (d / "manifest.json").is_file():
                    continue
                out.append(self._describe(d))
            return out

    def _describe(self, d: Path) -> InstalledModel:
        # read as JSON, not opened: listing never reads the weights (a damaged bundle is listed, and refused at use)
        manifest = json_object_or_none(d / "manifest.json") or {}
        source = json_object_or_none(d / SOURCE) or {}
        precision = manifest.get("precision", "?")
        repo = source.get("repo_id", "")
        note, accuracy, offered = "", "", False
        try:
            record = read_check_record(manifest)
        except CheckRecordError as e:
            record, accuracy, offered = None, "8-bit check record damaged", True
            note = DAMAGED_CHECK_NOTE.format(reason=str(e).split(": ", 1)[-1], name=d.name)
        if record is not None:
            accuracy = record.summary()
        elif precision == "q8" and not offered:
            accuracy, offered = "8-bit, not checked", True
            note = UNCHECKED_NOTE.format(name=d.name)
        if precision == "q8" and manifest.get("q8_format", 1) != Q8_FORMAT_VERSION:
            note = OLD_Q8_NOTE
        config = manifest.get("config")
        demo = isinstance(config, dict) and config.get(DEMO_MARK) is True
        whisper = manifest.get("model") == WhisperPart.PART
        made = manifest.get("source_checkpoint")
        checkpoint = ((str(made.get("id", "")), str(made.get("precision", ""))) if isinstance(made, dict)
                      else ("", ""))
        return InstalledModel(d.name, d, str(precision), str(repo), folder_bytes(d), note, demo=demo,
                              accuracy=accuracy, check_offered=offered, checkpoint=checkpoint,
                              recognises_speech=whisper)

    def converted_from(self, fingerprint: str, precision: str) -> InstalledModel | None:
        """An installed model converted from the checkpoint of that fingerprint (convert.checkpoint_fingerprint)
        at that precision, if there is one."""
        return next((m for m in self.installed() if fingerprint and m.checkpoint == (fingerprint, precision)), None)

    def speech_recogniser(self) -> InstalledModel | None:
        """The installed Whisper model that writes down a reference's words by default: whisper-base if installed
        (quick and good on clear speech), else the others in the catalogue's order, else any; None without one."""
        from .catalogue import WHISPER_CATALOGUE

        models = {m.name: m for m in self.installed() if m.recognises_speech}
        order = ["whisper-base", *(e.name for e in WHISPER_CATALOGUE), *sorted(models)]
        return next((models[name] for name in order if name in models), None)

    def get(self, name: str) -> InstalledModel | None:
        d = self.root / name
        with self.reading():
            if not _NAME.match(name) or not (d / "manifest.json").is_file():
                return None
            return self._describe(d)

    def remove(self, name: str) -> Path:
        model = self.get(name)
        if model is None:
            raise StoreError(f"No installed model is called {name!r} (see 'qwen3tts models list').")
        # rename first, so a half-deleted folder is never taken for a model
        doomed = self.root / f".removing-{name}"
        shutil.rmtree(doomed, ignore_errors=True)
        try:
            os.replace(model.path, doomed)
        except OSError as e:
            from ..io.fileio import os_reason

            raise StoreError(f"Cannot remove {name} from {shown_path(self.root)}: {os_reason(e)}.") from None
        shutil.rmtree(doomed, ignore_errors=True)
        return model.path

    def resolve(self, value: str | os.PathLike) -> Path:
        """A --model value: an existing folder as given, else the installed model of that name."""
        path = Path(value)
        try:
            if path.is_dir():
                return path
        except (OSError, ValueError):
            pass  # a path the system refuses: not a folder; the name lookup below decides
        text = str(value)
        with self.reading():
            if _NAME.match(text) and (self.root / text / "manifest.json").is_file():
                return self.root / text
        if os.sep in text or (os.altsep and os.altsep in text) or _exists(path):
            return path  # a path: Bundle.open says what is wrong with it
        names = ", ".join(m.name for m in self.installed()) or "none yet"
        raise StoreError(f"No model bundle at {text!r} and no installed model of that name "
                         f"(installed: {names}).")


def remember_models_dir(folder: Path) -> None:
    from ..io.fileio import write_own_file

    pointer = _pointer_file()
    pointer.parent.mkdir(parents=True, exist_ok=True)
    write_own_file(pointer, (str(folder) + "\n").encode("utf-8"))
