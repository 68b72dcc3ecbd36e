"""Typed settings over QSettings, declared once as class attributes (in the style of Picard's options).

    settings = Settings()               # the user's settings (organisation/application names from app.py)
    settings.model_path = "/x/bundle"   # written through to QSettings immediately
    Settings(QSettings(path, QSettings.Format.IniFormat))   # tests: a private ini file
"""

from __future__ import annotations

import json
import os
import stat
import sys
import tempfile
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Generic, TypeVar, cast, overload

from PySide6.QtCore import QByteArray, QCoreApplication, QSettings

from ..engine_adapter import DEFAULT_DECODER_PRECISION, MAX_BATCH_SIZE, SETTING

T = TypeVar("T")
MAX_SEED = int(SETTING["seed"].high)  # what the seed box (a 32-bit QSpinBox) holds
MAX_GAP_MS = 10000
MIN_TAKES_MB, MAX_TAKES_MB = 10, 100_000
# Qt reads the whole file before the window opens; older versions kept batch lines there (up to 64 MB seen)
MAX_SETTINGS_BYTES = 100 * 2**20
# a path, an address, a name: far longer than any file system allows (Linux: 4096 bytes a path); a 1 MB string
# stored in a folder setting delayed the takes by 7 s and filled a dialog
MAX_SETTING_CHARS = 32768


class Option(Generic[T]):
    """One setting: key, default and type. Reads convert whatever the backend stored back to that type."""

    def __init__(self, key: str, default: T, minimum: int | None = None, maximum: int | None = None,
                 items: type | None = None, choices: tuple | None = None, max_chars: int | None = MAX_SETTING_CHARS):
        self.key = key
        self.default = default
        self.kind = type(default)
        self.minimum, self.maximum = minimum, maximum  # for int options: what the widget showing it accepts
        self.items = items  # for list options: the type every element must have
        self.choices = choices  # the only values it may hold, if given
        self.max_chars = max_chars  # the longest text it (or each text in its list) may hold

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type) -> Option[T]: ...

    @overload
    def __get__(self, obj: Settings, owner: type) -> T: ...

    def __get__(self, obj: Settings | None, owner: type) -> T | Option[T]:
        if obj is None:
            return self
        raw = obj.qsettings.value(self.key)
        if raw is None:
            return self._copy_default()
        try:
            value = self._convert(raw)
        except (TypeError, ValueError, OverflowError, json.JSONDecodeError):
            value = None
        if value is None or not self._in_range(value):
            # hand-edited or foreign value: fall back (never crash at start), tell the user once, forget it
            obj.report(f"The setting {self.key} had an unusable value ({str(raw)[:40]}); it was reset to "
                       f"{self.default!r}.")
            obj.qsettings.remove(self.key)
            return self._copy_default()
        return value

    def _in_range(self, value: T) -> bool:
        if self.choices is not None and value not in self.choices:
            return False
        if self.max_chars is not None and _longest_text(value) > self.max_chars:
            return False
        if self.kind is not int:
            return True
        return ((self.minimum is None or value >= self.minimum)  # type: ignore[operator]
                and (self.maximum is None or value <= self.maximum))  # type: ignore[operator]

    def __set__(self, obj: Settings, value: T) -> None:
        if self.kind in (list, dict):
            obj.qsettings.setValue(self.key, json.dumps(value))
        else:
            obj.qsettings.setValue(self.key, value)

    def _copy_default(self) -> T:
        return json.loads(json.dumps(self.default)) if self.kind in (list, dict) else self.default

    def _convert(self, raw: Any) -> T:
        kind = self.kind
        if kind is bool:
            if isinstance(raw, str):
                return raw.strip().lower() in ("true", "1", "yes")  # type: ignore[return-value]
            return bool(raw)  # type: ignore[return-value]
        if kind in (list, dict):
            value = json.loads(raw) if isinstance(raw, str) else raw
            if not isinstance(value, kind):
                raise TypeError
            if self.items is not None and not all(isinstance(x, self.items) for x in cast(Iterable[Any], value)):  # a list or dict
                raise TypeError
            return value
        if kind is QByteArray:
            return raw if isinstance(raw, QByteArray) else QByteArray(raw)  # type: ignore[return-value]
        value = kind(raw)  # type: ignore[call-arg]
        if _has_nul(value):
            raise ValueError  # no path or name holds a NUL; Path() would raise on it later
        return value


def _longest_text(value: object) -> int:
    if isinstance(value, str):
        return len(value)
    if isinstance(value, list):
        return max((len(x) for x in value if isinstance(x, str)), default=0)
    return 0


def _has_nul(value: object) -> bool:
    return isinstance(value, str) and "\0" in value


class Settings:
    # model
    model_path = Option("model/path", "")
    recent_models: Option[list[str]] = Option("model/recent", [], items=str)
    last_checkpoint_dir = Option("model/last_checkpoint_dir", "")
    hub_endpoint = Option("model/hub_endpoint", "")  # a mirror; empty: HF_ENDPOINT, else huggingface.co
    download_precision = Option("model/download_precision", "")  # empty: the store's default
    # folders the user may change
    models_dir = Option("folders/models", "")
    output_dir = Option("folders/output", "")
    voices_dir = Option("folders/voices", "")
    last_reference_dir = Option("folders/last_reference", "")
    # a new voice's transcript written down from its reference by the installed Whisper model
    auto_transcript = Option("voices/auto_transcript", True)
    # generation
    language = Option("generate/language", "auto")
    last_voice = Option("generate/last_voice", "")
    seed_random = Option("generate/seed_random", True)
    seed = Option("generate/seed", 1234, minimum=0, maximum=MAX_SEED)
    settings_open = Option("generate/settings_open", False)
    stream_audio = Option("generate/stream_audio", True)
    sentence_pause_ms = Option("generate/sentence_pause_ms", 350, minimum=0, maximum=MAX_GAP_MS)  # long texts
    paragraph_pause_ms = Option("generate/paragraph_pause_ms", 900, minimum=0, maximum=MAX_GAP_MS)
    threads = Option("engine/threads", 0, minimum=0, maximum=256)  # CPU threads per network; 0: the tuned counts
    # the speech decoder: "fp32" exact, "auto" bf16 convolutions where the CPU has AVX512-BF16 (docs/performance.md, "Decoder")
    decoder_precision = Option("engine/decoder_precision", DEFAULT_DECODER_PRECISION, choices=("fp32", "auto"))
    # where the networks run: "auto" (a GPU only where measured faster), "cpu", "gpu:N"; on a GPU fp32 (exact) or fp16
    device = Option("engine/device", "auto")
    gpu_precision = Option("engine/gpu_precision", "fp32", choices=("fp32", "fp16"))
    text = Option("generate/text", "", max_chars=None)  # where older versions kept the text box's text (now saved_text.py)
    generation_values: Option[dict[str, Any]] = Option("generate/values", {})  # the settings box's values the user set (not defaults)
    # the take history kept in <data>/takes
    takes_limit_mb = Option("takes/limit_mb", 500, minimum=MIN_TAKES_MB, maximum=MAX_TAKES_MB)
    wav_float = Option("save/wav_float", False)  # WAV files as 32-bit float instead of 16-bit PCM
    # batch
    batch_dir = Option("batch/output_dir", "")
    batch_merge = Option("batch/merge", False)
    batch_gap_ms = Option("batch/gap_ms", 500, minimum=0, maximum=MAX_GAP_MS)
    # lines generated side by side; 0: Auto, the model's suggestion (q8: 4; fp32/fp16, where lines take turns: 1)
    batch_size = Option("batch/lines_at_once", 0, minimum=0, maximum=MAX_BATCH_SIZE)
    # [[text, voice, language, instruction], ...]: where older versions kept the batch lines (now in a file of
    # their own, batch_store.py); read once to move them there
    batch_lines: Option[list[list[str]]] = Option("batch/lines", [], max_chars=None)
    # "Let other apps use these voices" (controllers/sharing.py): the server's port and key (the switch is not kept)
    sharing_port = Option("sharing/port", 8880, minimum=1024, maximum=65535)
    sharing_key = Option("sharing/key", "")
    sharing_everywhere = Option("sharing/other_computers", False)  # listen beyond 127.0.0.1 (the key still needed)
    # window
    geometry = Option("window/geometry", QByteArray())
    window_state = Option("window/state", QByteArray())
    splitter = Option("window/splitter", QByteArray())
    tab = Option("window/tab", 0, minimum=0, maximum=99)

    MAX_RECENT = 8

    def __init__(self, qsettings: QSettings | None = None):
        self.qsettings = qsettings if qsettings is not None else QSettings()
        self._problems: list[str] = []

    def report(self, message: str) -> None:
        self._problems.append(message)

    def take_problems(self) -> list[str]:
        """Values that were unusable and reset, found by reading every option (a bad value is removed when
        found, so each is reported once)."""
        for name, option in vars(type(self)).items():
            if isinstance(option, Option):
                getattr(self, name)
        problems, self._problems = self._problems, []
        return problems

    def remember_model(self, path: str) -> None:
        self.model_path = path
        recent = [p for p in self.recent_models if p != path]
        self.recent_models = [path, *recent][: self.MAX_RECENT]

    def forget_model(self, path: str) -> None:
        self.recent_models = [p for p in self.recent_models if p != path]
        if self.model_path == path:
            self.model_path = ""

    def sync(self) -> None:
        self.qsettings.sync()

    def folder(self) -> Path | None:
        """The folder of the settings file (None for the Windows registry)."""
        if sys.platform == "win32" and self.qsettings.format() != QSettings.Format.IniFormat:
            return None
        return Path(self.qsettings.fileName()).parent


def user_settings() -> Settings:
    """The user's settings (QCoreApplication's organisation and application names must be set).

    Qt reads the settings file whole as the QSettings is made, so a FIFO there would hang the start and the
    window would never open: anything but a regular file of at most MAX_SETTINGS_BYTES in its place is renamed
    to '<name>.damaged' first (or, where that is not allowed, this run keeps its settings in a temporary file),
    and the user is told once. Truncated or garbled lines are Qt's to skip; unusable values are reset one by
    one (Option)."""
    problems, temporary = [], None
    for path in _settings_files():
        try:
            mode = os.lstat(path).st_mode  # a link is not followed: Qt would write the settings through it
        except OSError:
            continue  # absent (or unreachable: Qt then starts from the defaults by itself)
        if stat.S_ISREG(mode) and os.lstat(path).st_size <= MAX_SETTINGS_BYTES:
            continue
        aside = next(p for p in (path.with_name(f"{path.name}.damaged{n or ''}") for n in range(10**6))
                     if not os.path.lexists(p))
        try:
            os.rename(path, aside)
            problems.append(f"The settings file {path} {_unusable(mode)}; it was renamed to {aside.name} and the "
                            "settings start from their defaults.")
        except OSError as e:
            temporary = Path(tempfile.mkdtemp(prefix="qwen3tts-settings-")) / "settings.ini"
            problems.append(f"The settings file {path} {_unusable(mode)} and cannot be moved aside "
                            f"({e.strerror or e}); settings are not kept after this run.")
    settings = Settings(QSettings(str(temporary), QSettings.Format.IniFormat) if temporary else QSettings())
    for problem in problems:
        settings.report(problem)
    return settings


def _unusable(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "is a symbolic link (the app never writes its own files through a link)"
    return "is not a regular file" if not stat.S_ISREG(mode) else f"is over {MAX_SETTINGS_BYTES // 2**20} MB"


def _settings_files() -> list[Path]:
    """The files QSettings() reads on Linux and other Unix systems: the application's, then the organisation's
    (Windows keeps settings in the registry, macOS in a property list: nothing to check there)."""
    if sys.platform in ("win32", "darwin"):
        return []
    # Qt's own user folder (it fixes it at first use; QStandardPaths could differ): the parent of the parent
    # of a file no one has, which Qt opens and finds absent
    probe = QSettings(QSettings.Format.IniFormat, QSettings.Scope.UserScope, f"probe-{uuid.uuid4().hex}", "probe")
    config = Path(probe.fileName()).parent.parent
    org, app = QCoreApplication.organizationName(), QCoreApplication.applicationName()
    return [config / org / f"{app}.conf", config / f"{org}.conf"]
