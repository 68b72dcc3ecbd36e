"""One take's file, take.npz, read without trusting it (a power cut, a full disk or a hand edit may have left
anything there) and written with fsync before it is renamed into place.

The file is what numpy's savez writes: an uncompressed zip of meta.npy (JSON text), audio.npy (float32 samples)
and codes.npy (frames x 16 integers). Reading opens it without blocking and refuses anything but a regular file
(a FIFO would wait forever; user_files.py), checks every member's header against the bytes really there before reading them
(a header may claim 373 GiB; a compressed member may unpack to gigabytes from a few MB, so only stored members
are read: memory is bounded by the file's size on disk) and checks every metadata value's type.
"""

from __future__ import annotations

import io
import json
import math
import os
import threading
import zipfile
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from ..engine_adapter import (
    SAMPLE_RATE,
    GenerationSettings,
    TextError,
    Timings,
    load_npy_bytes,
    npy_bytes_needed,
    write_own_file,
)
from .user_files import UnusableFile, open_regular

TAKE_FILE = "take.npz"
FORMAT = 1
MAX_AUDIO_SECONDS = 4 * 3600  # longer than any chapter the app speaks in one take
MAX_AUDIO_BYTES = MAX_AUDIO_SECONDS * SAMPLE_RATE * 4
MAX_CODES_BYTES = MAX_AUDIO_SECONDS * 13 * 16 * 8  # 12.5 frames a second, 16 int64 codes a frame
MAX_META_BYTES = 80 * 2**20  # the text of a long take (16 MB of text, 4 bytes a character) and the rest
_LIMITS = {"meta": MAX_META_BYTES, "audio": MAX_AUDIO_BYTES, "codes": MAX_CODES_BYTES}
_TIMING_NAMES = {f.name for f in fields(Timings)}
_MAX_WHOLE = 2**63 - 1  # what a Qt item and numpy's int64 hold


class TakeFileError(ValueError):
    """take.npz cannot be used; the message says why, in a few words (it follows "could not be read: ")."""


@dataclass
class TakeHeader:
    """A take's checked metadata and the lengths of its arrays, read without reading the arrays."""

    meta: dict
    samples: int
    frames: int


def take_bytes(audio: np.ndarray, codes: np.ndarray, meta: dict) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, audio=np.asarray(audio, np.float32), codes=np.asarray(codes, np.int64),
             meta=np.array(json.dumps(meta)))
    return buf.getvalue()


def write_take_file(folder: Path, audio: np.ndarray, codes: np.ndarray, meta: dict) -> Path:
    """folder/take.npz, synced to the disk before it gets its name (a power cut leaves the old file or none)."""
    return write_own_file(folder / TAKE_FILE, take_bytes(audio, codes, meta))


def read_header(path: Path) -> TakeHeader:
    """The metadata and array lengths of a take file. Raises TakeFileError."""
    with _TakeZip(path) as z:
        meta = _checked_meta(z.array("meta"))
        audio = z.shape("audio")
        codes = z.shape("codes")
    return TakeHeader(meta, audio[0], codes[0])


def read_arrays(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(audio, codes) of a take file, each checked against its header before it is read. Raises TakeFileError."""
    with _TakeZip(path) as z:
        return z.array("audio").astype(np.float32, copy=False), z.array("codes").astype(np.int64, copy=False)


class StoredResult:
    """A kept take's result: its metadata at once, its audio and codes read from the file when first used (the
    waveform, playing, saving). Only the last few takes used keep their arrays in memory: 473 MB of takes made
    590 MB of memory when the whole history was loaded at start."""

    KEEP_LOADED = 4
    _loaded: list[StoredResult] = []  # most recently used last
    _lock = threading.Lock()

    def __init__(self, path: Path, header: TakeHeader):
        self.path = path
        self.ended_by: str = header.meta["ended_by"]
        self.seed: int | None = header.meta["seed"]
        self.timings: Timings = header.meta["timings"]
        self.sample_rate = SAMPLE_RATE
        self.samples, self.frames = header.samples, header.frames
        self.problem: str | None = None  # set when the file could not be read any more
        self._arrays: tuple[np.ndarray, np.ndarray] | None = None

    @property
    def seconds(self) -> float:
        return self.samples / self.sample_rate

    @property
    def audio(self) -> np.ndarray:
        return self._load()[0]

    @property
    def codes(self) -> np.ndarray:
        return self._load()[1]

    @property
    def loaded(self) -> bool:
        return self._arrays is not None

    def _load(self) -> tuple[np.ndarray, np.ndarray]:
        with StoredResult._lock:  # the window reads on a worker thread; playing or saving may ask meanwhile
            return self._load_locked()

    def _load_locked(self) -> tuple[np.ndarray, np.ndarray]:
        loaded = StoredResult._loaded
        if self._arrays is None:
            try:
                self._arrays = read_arrays(self.path)
            except TakeFileError as e:  # removed or damaged since the start: silence, and the reason kept
                self.problem = str(e)
                self._arrays = (np.zeros(0, np.float32), np.zeros((0, 16), np.int64))
        if self in loaded:
            loaded.remove(self)
        loaded.append(self)
        while len(loaded) > self.KEEP_LOADED:
            loaded.pop(0)._arrays = None
        return self._arrays


class _TakeZip:
    def __init__(self, path: Path):
        self.path = path

    def __enter__(self) -> _TakeZip:
        try:
            self.file = open_regular(self.path, 2**63)  # the members' sizes are checked one by one below
        except FileNotFoundError:
            raise TakeFileError(f"{TAKE_FILE} is missing") from None
        except UnusableFile as e:
            raise TakeFileError(f"{TAKE_FILE}: {e}") from None
        self.size = os.fstat(self.file.fileno()).st_size
        try:
            if self.size == 0:
                raise TakeFileError(f"{TAKE_FILE} is empty")
            self.zip = zipfile.ZipFile(self.file)
            self.members = {i.filename: i for i in self.zip.infolist()}
        except TakeFileError:
            self.file.close()
            raise
        except (OSError, ValueError, EOFError, zipfile.BadZipFile, NotImplementedError) as e:
            self.file.close()
            raise TakeFileError(f"{TAKE_FILE} is damaged ({_first_line(e)})") from None
        return self

    def __exit__(self, *exc) -> None:
        self.zip.close()
        self.file.close()

    def _member(self, name: str) -> zipfile.ZipInfo:
        info = self.members.get(f"{name}.npy")
        if info is None:
            raise TakeFileError(f"it has no {name}")
        # np.savez stores its members: anything else is not ours, and a compressed member could unpack to far
        # more than the file holds (a 1.9 MB file made 2 GB)
        if info.compress_type != zipfile.ZIP_STORED or info.file_size > self.size:
            raise TakeFileError(f"its {name} is packed in a way this app never writes")
        if info.file_size > _LIMITS[name]:
            raise TakeFileError(f"its {name} is {info.file_size} bytes, more than a take can have "
                                f"({_LIMITS[name]})")
        return info

    def shape(self, name: str) -> tuple[int, ...]:
        info = self._member(name)
        try:
            with self.zip.open(info) as f:
                shape, dtype, needed, offset = npy_bytes_needed(io.BytesIO(f.read(4096)))
        except (OSError, ValueError, EOFError, zipfile.BadZipFile, RuntimeError) as e:
            raise TakeFileError(f"its {name} is damaged ({_first_line(e)})") from None
        if needed + offset != info.file_size:
            raise TakeFileError(f"its {name} header promises {needed} bytes but the file holds "
                                f"{info.file_size - offset}")
        _check_kind(name, shape, dtype)
        return shape

    def array(self, name: str) -> np.ndarray:
        info = self._member(name)  # bounded: a stored member of at most its limit and of the file's size
        try:
            array = load_npy_bytes(self.zip.read(info))  # refuses a header that disagrees with the bytes
        except (OSError, ValueError, EOFError, zipfile.BadZipFile, RuntimeError) as e:
            raise TakeFileError(f"its {name} is damaged ({_first_line(e)})") from None
        _check_kind(name, array.shape, array.dtype)
        return array


def _check_kind(name: str, shape: tuple, dtype: np.dtype) -> None:
    ndim, kinds = {"audio": (1, "f"), "codes": (2, "iu"), "meta": (0, "U")}[name]
    if len(shape) != ndim or dtype.kind not in kinds:
        raise TakeFileError(f"its {name} has the wrong shape or type")


def _checked_meta(array: np.ndarray) -> dict:
    """The metadata dict with every value of the type the app uses (a hand edit may have put anything there)."""
    try:
        meta = json.loads(str(array[()]))
    except ValueError:
        raise TakeFileError("its metadata is not JSON") from None
    if not isinstance(meta, dict):
        raise TakeFileError("its metadata is not a table of values")
    if meta.get("format") != FORMAT:
        raise TakeFileError(f"it has the unknown take format {str(meta.get('format'))[:20]!r}")
    out: dict[str, Any] = {}
    for key, optional in (("text", False), ("voice_name", False), ("language", False), ("ended_by", False),
                          ("created", True), ("instruct", True), ("speaker", True), ("device", True)):
        value = meta.get(key)
        if not (isinstance(value, str) or (optional and value is None)):
            raise TakeFileError(f"its {key} is not text")
        out[key] = value
    out["created"] = out["created"] or ""
    seed = meta.get("seed")
    if seed is not None and not _whole(seed):
        raise TakeFileError("its seed is not a whole number")
    out["seed"] = seed
    try:
        out["settings"] = GenerationSettings.from_table(meta.get("settings"))
    except TextError as e:
        raise TakeFileError(str(e)) from None
    timings = meta.get("timings")
    if not isinstance(timings, dict):
        timings = {}
    out["timings"] = Timings(**{k: v for k, v in timings.items() if k in _TIMING_NAMES and _number(v)})
    return out


def _whole(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and abs(v) <= _MAX_WHOLE


def _number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and (isinstance(v, int) and abs(v) <= _MAX_WHOLE
                                                                         or isinstance(v, float) and math.isfinite(v))


def _first_line(e: BaseException) -> str:
    return (str(e).splitlines() or [type(e).__name__])[0]
