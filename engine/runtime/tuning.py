"""Self-tuning: the settings that make a model fastest on this computer, measured once and kept.

Which thread counts suit a network is a property of the CPU, not of the code: the same commit and checkpoint ran
q8 generation at 88 ms/frame with the int8 matrix products on one thread on an AMD EPYC (two threads: 161), and
at 191-224 ms/frame on one thread against 145-148 on two on an Intel Xeon (Sapphire Rapids class), both 2 cores.
So no speed choice is a constant: the first time a model is opened on a machine, the candidates are timed on a few
real frames (engine/synthesis/self_tuning.py says what is timed) and the fastest are kept.

This module holds what is independent of the model:
- alternate(): times candidates in turn, one measurement each per round, the order reversed every other round,
  so a machine that gets busier or quieter during the run moves every candidate alike; it stops at a deadline
  (after a minimum number of rounds) and between any two measurements when cancelled;
- pick(): the candidate with the lowest median; candidates within TIE_MARGIN of it count as tied and the first
  of them in the caller's order wins (callers list fewer threads first: a spare core serves the decoder and other
  programs, and one thread suffers least when the machine gets busy);
- TuningKey / TuningRecord and their file in the cache folder: one small JSON file per key (CPU model, cores,
  ncnn version, the model's shape, the bundle's precision and format, the devices ncnn sees, this tuner's
  version). A later open with the same key reads it back (a few hundred bytes: no measurable start-up cost); a
  new key tunes again. A file that is damaged, foreign (another key), too large, not a regular file or of a wrong
  shape is ignored with a note, never an error, and replaced by the next tuning.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import statistics
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar

from ..errors import Cancelled
from ..io.fileio import write_atomic
from ..io.safefile import regular_file_problem

TUNER_VERSION = 3  # part of the key: a tuner that measures differently tunes again (3: OpenMP spin, int8 teams)
RECORD_FORMAT = "qwen3tts-tuning"
MAX_RECORD_BYTES = 64 * 1024  # a record is well under 4 KB; anything larger is not ours
TIE_MARGIN = 0.03  # medians within 3 % of the best are tied: frame times on a quiet 2-core machine vary by 2-5 %
APP_NAME = "Qwen3-TTS Studio"  # the platformdirs name of the app's folders (engine/store/store.py)

C = TypeVar("C", bound=Hashable)
Samples = dict[Any, dict[str, list[float]]]  # candidate -> part ("talker", "decoder", ...) -> seconds per sample


def cache_dir() -> Path:
    """The folder for tuning records: QWEN3TTS_CACHE_DIR if set, else the user cache folder (platformdirs)."""
    if os.environ.get("QWEN3TTS_CACHE_DIR"):
        return Path(os.environ["QWEN3TTS_CACHE_DIR"])
    import platformdirs

    return Path(platformdirs.user_cache_dir(APP_NAME, appauthor=False))


def thread_candidates(cores: int) -> list[int]:
    """Thread counts worth timing on `cores` cores, fewest first: 1, 2, half and all of them (at most four)."""
    cores = max(1, int(cores))
    return sorted({n for n in (1, 2, cores // 2, cores) if 1 <= n <= cores})


# -------------------------------------------------------------------------------------------------- measuring


def alternate(candidates: Sequence[C], measure: Callable[[C], Mapping[str, float]], *, min_rounds: int = 2,
              max_rounds: int = 8, deadline: float | None = None, cancel: Callable[[], bool] | None = None,
              clock: Callable[[], float] = time.monotonic,
              on_sample: Callable[[C, Mapping[str, float]], None] | None = None) -> Samples:
    """Time every candidate once per round: measure(candidate) runs it and returns seconds per part. Rounds go
    forward, then backward, and so on. After min_rounds, stops when clock() has passed `deadline` or another
    round would end after it (judged by the last round's length). cancel() is checked before every measurement:
    True raises Cancelled."""
    if not candidates:
        raise ValueError("nothing to tune")
    samples: Samples = {c: {} for c in candidates}
    for r in range(max(1, max_rounds)):
        started = clock()
        for c in (candidates if r % 2 == 0 else list(reversed(candidates))):
            if cancel is not None and cancel():
                raise Cancelled("Tuning was cancelled.")
            figures = measure(c)
            for part, seconds in figures.items():
                samples[c].setdefault(part, []).append(float(seconds))
            if on_sample is not None:
                on_sample(c, figures)
        now = clock()
        if r + 1 >= min_rounds and deadline is not None and (now >= deadline or now + (now - started) > deadline):
            break
    return samples


def median(values: Sequence[float]) -> float:
    """The median of finite values; inf when there are none (a candidate never measured never wins)."""
    finite = [v for v in values if math.isfinite(v)]
    return statistics.median(finite) if finite else math.inf


def pick(samples: Samples, part: str, margin: float = TIE_MARGIN) -> Any:
    """The candidate whose `part` has the lowest median; the first (in the samples' order) of those within
    `margin` of it wins a tie."""
    medians = {c: median(parts.get(part, ())) for c, parts in samples.items()}
    if not medians:
        raise ValueError("no candidates")
    best = min(medians.values())
    if not math.isfinite(best):
        return next(iter(medians))
    return next(c for c, m in medians.items() if m <= best * (1.0 + margin))


# -------------------------------------------------------------------------------------------------- the record


@dataclass(frozen=True)
class TuningKey:
    """What the tuned settings depend on; a record is used only under the key it was measured with."""

    cpu: str  # the processor's name
    cores: int  # physical cores this process may use
    logical: int  # logical CPUs
    ncnn: str  # ncnn version
    model: str  # the networks' shapes (two bundles of one model and precision share a tuning)
    precision: str  # the bundle's weight precision
    format: str  # the bundle's format version and 8-bit layer format
    device: str = "cpu"  # the devices ncnn sees ("cpu", or "cpu+gpu0:<name>+...")
    tuner: int = TUNER_VERSION

    def digest(self) -> str:
        """A file-name-safe name for this key."""
        text = json.dumps(asdict(self), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:24]


@dataclass(frozen=True)
class TunedSettings:
    """The settings a tuning chose. Thread counts apply unless the user gave a count; the decoder precision only
    where "auto" was asked for; the device only where "auto" was asked for."""

    talker_threads: int
    code_predictor_threads: int
    decoder_threads: int
    overlap_decode: bool
    decoder_bf16_faster: bool | None = None  # None: not measured (a bundle without bf16 decoder marks)
    gpu_faster: bool | None = None  # None: not measured (no GPU, or the device choice does not exist yet)
    # the most threads generation uses while its audio is decoded as it goes (the decoder's thread competes)
    streaming_threads: int | None = None  # None: not measured; no limit


@dataclass(frozen=True)
class CandidateFigure:
    """One candidate's timing, for `qwen3tts bench --tune` and the record."""

    setting: str  # "talker threads", "decoder", ...
    value: str  # "1", "2", "overlap, 1 thread", "bf16", "gpu0"
    part: str  # what was timed ("talker step", "code predictor", "streamed frame", "decode")
    median_ms: float
    samples: int
    chosen: bool


@dataclass(frozen=True)
class TuningRecord:
    key: TuningKey
    settings: TunedSettings
    figures: tuple[CandidateFigure, ...] = ()
    seconds: float = 0.0  # how long the tuning took
    measured: str = ""  # UTC time, ISO 8601
    load_average: str = ""  # the machine's load when measured
    # generation ms per frame by device ("cpu", "gpu:N") at the chosen settings: what the device choice's "auto"
    # reads (a GPU is used only where it measured faster than the CPU); GPUs are timed once the tuner knows them
    device_ms: dict[str, float] = field(default_factory=dict)

    def summary(self) -> str:
        """One line for a status bar or a terminal."""
        s = self.settings
        dec = f"decoder {s.decoder_threads} thread{'s' if s.decoder_threads != 1 else ''}"
        dec += " beside generation" if s.overlap_decode else " after each frame"
        if s.streaming_threads is not None and s.streaming_threads < max(s.talker_threads, s.code_predictor_threads):
            dec += f" (generation on {s.streaming_threads} while it decodes)"
        if s.decoder_bf16_faster is not None:
            dec += ", bf16 faster" if s.decoder_bf16_faster else ", fp32 as fast"
        line = (f"tuned for this computer in {self.seconds:.1f} s: talker {s.talker_threads}, code predictor "
                f"{s.code_predictor_threads} thread{'s' if s.code_predictor_threads != 1 else ''}; {dec}")
        if s.gpu_faster:
            gpu = min((k for k in self.device_ms if k != "cpu"), key=self.device_ms.__getitem__)
            line += f"; {gpu} faster than the CPU ({self.device_ms[gpu]:.0f} against {self.device_ms['cpu']:.0f} ms per frame)"
        if self.busy:
            line += f" (measured while the machine was busy, load {self.load_average.split()[0]})"
        return line

    @property
    def busy(self) -> bool:
        """Whether other programs kept the cores busy while this was measured: such a tuning favours fewer threads,
        so it is used only until the model is opened on a quiet machine, which measures again (worth_retuning)."""
        return is_busy(self.load_average, self.key.logical)

    def worth_retuning(self, load_now: str) -> bool:
        """True when this was measured on a busy machine and the machine is quiet now."""
        try:
            quiet = float(load_now.split()[0]) <= self.key.logical
        except (ValueError, IndexError):
            quiet = False  # no load figure (Windows): keep what there is
        return self.busy and quiet



    def to_json(self) -> dict[str, Any]:
        return {"format": RECORD_FORMAT, "version": TUNER_VERSION, **asdict(self)}

    @classmethod
    def from_json(cls, data: Any) -> TuningRecord:
        """Raises ValueError naming what is wrong with `data`."""
        if not isinstance(data, dict) or data.get("format") != RECORD_FORMAT:
            raise ValueError("it is not a tuning record of this app")
        if data.get("version") != TUNER_VERSION:
            raise ValueError(f"it was written by another version of the tuner ({data.get('version')!r})")
        key = _typed(TuningKey, data.get("key"), "key")
        settings = _typed(TunedSettings, data.get("settings"), "settings")
        if min(settings.talker_threads, settings.code_predictor_threads, settings.decoder_threads,
               1 if settings.streaming_threads is None else settings.streaming_threads) < 1:
            raise ValueError("a thread count in it is below one")
        raw_figures = data.get("figures", [])
        if not isinstance(raw_figures, list):
            raise ValueError("its figures are not a list")
        figures = tuple(_typed(CandidateFigure, f, "figure") for f in raw_figures)
        device_ms = data.get("device_ms", {})
        if not isinstance(device_ms, dict) or not all(
                isinstance(k, str) and isinstance(v, (int, float)) and not isinstance(v, bool)
                for k, v in device_ms.items()):
            raise ValueError("its per-device figures are not a table of milliseconds")
        seconds, measured, load = data.get("seconds", 0.0), data.get("measured", ""), data.get("load_average", "")
        if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or not isinstance(measured, str) \
                or not isinstance(load, str):
            raise ValueError("its time stamp is not readable")
        return cls(key, settings, figures, float(seconds), measured, load,
                   {k: float(v) for k, v in device_ms.items()})


def is_busy(load_average: str, cpus: int) -> bool:
    """A 1-minute load average above the CPU count: other programs wait for the cores."""
    try:
        return float(load_average.split()[0]) > cpus
    except (ValueError, IndexError):
        return False


def _typed(cls, data: Any, what: str):
    """cls(**data) with every field present and of its declared type (bool is not an int here, an int is a
    float)."""
    if not isinstance(data, dict):
        raise ValueError(f"its {what} is not a table")
    values = {}
    for f in fields(cls):
        if f.name not in data:
            if f.default is not MISSING or f.default_factory is not MISSING:
                continue
            raise ValueError(f"its {what} has no {f.name!r}")
        v = data[f.name]
        allowed = _TYPES[str(f.type)]
        if isinstance(v, bool) and bool not in allowed or not isinstance(v, allowed):
            raise ValueError(f"its {what} has a {type(v).__name__} for {f.name!r}")
        values[f.name] = v
    return cls(**values)


_TYPES: dict[str, tuple[type, ...]] = {
    "str": (str,), "int": (int,), "float": (int, float), "bool": (bool,), "bool | None": (bool, type(None)),
    "int | None": (int, type(None)),
}


# -------------------------------------------------------------------------------------------------- the file


@dataclass(frozen=True)
class Lookup:
    """A stored record for a key, or None; `note` says why a file that was there was not used."""

    record: TuningRecord | None
    note: str | None = None


def record_path(key: TuningKey, folder: Path | None = None) -> Path:
    return (folder or cache_dir()) / "tuning" / f"{key.digest()}.json"


def load_record(key: TuningKey, folder: Path | None = None) -> Lookup:
    """The record stored for `key`. A missing file is no record (no note); anything else unusable is no record
    with a note saying what was wrong."""
    path = record_path(key, folder)
    if not os.path.lexists(path):
        return Lookup(None)
    problem = regular_file_problem(path, "tuning record")
    if problem:
        return Lookup(None, f"{problem} It is ignored; this computer is tuned again.")
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_RECORD_BYTES + 1)
        if len(data) > MAX_RECORD_BYTES:
            raise ValueError(f"it is larger than the {MAX_RECORD_BYTES} bytes a record may have")
        record = TuningRecord.from_json(json.loads(data.decode("utf-8")))
        if record.key != key:
            raise ValueError("it belongs to another computer, model or version")
    except (OSError, UnicodeDecodeError, ValueError, TypeError, RecursionError) as e:
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        return Lookup(None, f"The tuning record {path} is not usable ({reason}); it is ignored and this computer "
                            "is tuned again.")
    return Lookup(record)


def save_record(record: TuningRecord, folder: Path | None = None) -> str | None:
    """Store `record` under its key (atomically). Returns None, or a note when it could not be stored (the
    settings still apply to this session)."""
    path = record_path(record.key, folder)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, (json.dumps(record.to_json(), indent=1) + "\n").encode("utf-8"))
    except OSError as e:
        return f"The tuning could not be stored in {path.parent} ({e.strerror or e}); it applies until the model " \
               "is closed."
    return None


def utc_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
