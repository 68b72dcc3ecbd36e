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
  new key tunes again. A file that is damaged, foreign (another key), too large, not a regular file, of a wrong
  shape or holding anything this tuner could not have written (a count beyond the key's cores, a device that is
  not one of this computer's GPUs, a verdict its figures contradict, a number out of range) is ignored with a
  note, never an error, and replaced by the next tuning.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import statistics
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar

from ..errors import Cancelled
from ..io.fileio import OwnFileError, check_own_file, write_own_file
from ..io.safefile import regular_file_problem
from .cache_folder import cache_dir
from .cpu import spin_setting
from .device import faster_gpu, scan_gpus

TUNER_VERSION = 4  # part of the key: a tuner that measures differently tunes again (3: OpenMP spin, int8 teams;
# 4: the spin count measured per CPU)
RECORD_FORMAT = "qwen3tts-tuning"
MAX_RECORD_BYTES = 64 * 1024  # a record is well under 4 KB; anything larger is not ours
MAX_SPIN_COUNT = 10**9  # GOMP_SPINCOUNT candidates go up to 100000; a stored value beyond this is not ours
MAX_RECORDS_READ = 64  # records read at start-up for the spin count (one per model, precision and ncnn version)
TIE_MARGIN = 0.03  # medians within 3 % of the best are tied: frame times on a quiet 2-core machine vary by 2-5 %

C = TypeVar("C", bound=Hashable)
Samples = dict[Any, dict[str, list[float]]]  # candidate -> part ("talker", "decoder", ...) -> seconds per sample


def thread_candidates(cores: int) -> list[int]:
    """Thread counts worth timing on `cores` cores, fewest first: 1, 2, half and all of them (at most four)."""
    cores = max(1, int(cores))
    return sorted({n for n in (1, 2, cores // 2, cores) if 1 <= n <= cores})


# -------------------------------------------------------------------------------------------------- measuring


def alternate(candidates: Sequence[C], measure: Callable[[C], Mapping[str, float]], *, min_rounds: int = 2,
              max_rounds: int = 8, deadline: float | None = None, cancel: Callable[[], bool] | None = None,
              clock: Callable[[], float] = time.monotonic,
              on_sample: Callable[[C, Mapping[str, float]], None] | None = None,
              hard_deadline: float | None = None) -> Samples:
    """Time every candidate once per round: measure(candidate) runs it and returns seconds per part. Rounds go
    forward, then backward, and so on. After min_rounds, stops when clock() has passed `deadline` or another
    round would end after it (judged by the last round's length). Before `hard_deadline` it stops whatever the
    rounds (once one measurement is made) when the next measurement, taking as long as the last, would end after
    it: candidates not measured then are never picked.
    cancel() is checked before every measurement: True raises Cancelled."""
    if not candidates:
        raise ValueError("nothing to tune")
    samples: Samples = {c: {} for c in candidates}
    last = 0.0  # how long the last measurement took
    for r in range(max(1, max_rounds)):
        started = clock()
        for c in (candidates if r % 2 == 0 else list(reversed(candidates))):
            if cancel is not None and cancel():
                raise Cancelled("Tuning was cancelled.")
            if hard_deadline is not None and any(samples.values()) and clock() + last > hard_deadline:
                return samples  # the next measurement, as long as the last one, would end past the hard stop
            began = clock()
            figures = measure(c)
            last = clock() - began
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
    # GOMP_SPINCOUNT for this CPU (engine/synthesis/spin_tuning.py), applied before ncnn loads at the next start;
    # None: not measured (the user chose OpenMP's waiting, or the budget ran out first)
    spin_count: int | None = None


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
        if s.spin_count is not None:
            dec += f"; OpenMP spin count {s.spin_count}"
            if spin_setting().count != s.spin_count:  # libgomp read its count when ncnn loaded
                dec += " from the next start"
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
    def from_json(cls, data: Any, check_gpus: bool = True) -> TuningRecord:
        """Raises ValueError naming what is wrong with `data`: anything this tuner could not have written (a field
        of the wrong type, a count outside this key's cores, a device that is not one of this computer's GPUs, a
        verdict its figures contradict, a number that is not finite or not in range) is a damaged record.
        check_gpus=False leaves out the one check that asks ncnn (which GPUs this computer has): for a reader that
        runs before ncnn may be imported."""
        if not isinstance(data, dict) or data.get("format") != RECORD_FORMAT:
            raise ValueError("it is not a tuning record of this app")
        if data.get("version") != TUNER_VERSION:
            raise ValueError(f"it was written by another version of the tuner ({_shown(data.get('version'))})")
        key = _typed(TuningKey, data.get("key"), "key")
        _check_key(key)
        settings = _typed(TunedSettings, data.get("settings"), "settings")
        _check_settings(settings, key)
        raw_figures = data.get("figures", [])
        if not isinstance(raw_figures, list) or len(raw_figures) > MAX_FIGURES:
            raise ValueError(f"its figures are not a list of at most {MAX_FIGURES}")
        figures = tuple(_typed(CandidateFigure, f, "figure") for f in raw_figures)
        for figure in figures:
            _check_figure(figure)
        device_ms = data.get("device_ms", {})
        if not isinstance(device_ms, dict) or not all(isinstance(k, str) and _number(v) for k, v in device_ms.items()):
            raise ValueError("its per-device figures are not a table of milliseconds")
        _check_devices(device_ms, settings.gpu_faster, check_gpus)
        seconds, measured, load = data.get("seconds", 0.0), data.get("measured", ""), data.get("load_average", "")
        if not _number(seconds) or not 0 <= seconds <= MAX_TUNING_SECONDS:
            raise ValueError(f"its tuning time ({_shown(seconds)} s) is not a time a tuning takes")
        if not isinstance(measured, str) or measured and not _MEASURED.fullmatch(measured):
            raise ValueError(f"its time stamp ({_shown(measured)}) is not readable")
        _check_load(load, key.logical)
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


# What a record of this tuner can hold; anything outside is a damaged or forged file (a thread count of 10^9, a
# load average of 999, a figure for a GPU that is not there all came from hand-edited records).
MAX_CPUS = 4096  # logical CPUs: more than any machine this runs on
MAX_TEXT = 512  # characters of a name in the key or a figure (a CPU's name, the model's shapes: under 200)
MAX_FIGURES = 256  # candidate figures (4 thread counts: 8 generation, 17 streaming, 2 decoder, one per GPU)
MAX_SAMPLES = 10_000  # measurements of one candidate (the tuner takes at most 8)
MAX_FRAME_MS = 3_600_000.0  # an hour for a frame or a step: no tuning with such a candidate would ever finish
MAX_TUNING_SECONDS = 86_400.0  # a tuning has a 15 s budget; a day is far past any slow machine's minimum rounds
# the 1-minute load average per logical CPU: 10-12 was measured on 2 cores with five busy programs beside the
# tuner; a machine loaded 16 times over does not finish a tuning
MAX_LOAD_PER_CPU = 16.0
_GPU_NAME = re.compile(r"gpu:(0|[1-9][0-9]{0,2})")  # what gpu_timing names a GPU it timed
_MEASURED = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z")  # utc_now()
_LOAD = re.compile(r"[0-9]{1,6}\.[0-9]{2}")  # one of load_average()'s three figures


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _shown(v: Any) -> str:
    """A value as a note shows it: short (a forged record may hold a 400-digit count or a megabyte of text)."""
    text = repr(v) if not isinstance(v, int) or abs(v) < 10**12 else f"a {len(str(abs(v)))}-digit number"
    return text if len(text) <= 40 else text[:37] + "..."


def _check_text(value: str, what: str) -> None:
    if len(value) > MAX_TEXT:
        raise ValueError(f"its {what} is longer than the {MAX_TEXT} characters this app writes")


def _check_key(key: TuningKey) -> None:
    for name in ("cpu", "ncnn", "model", "precision", "format", "device"):
        _check_text(getattr(key, name), f"key's {name}")
    if not 1 <= key.cores <= key.logical <= MAX_CPUS:
        raise ValueError(f"its key's core counts ({_shown(key.cores)} cores, {_shown(key.logical)} CPUs) are not "
                         "a computer's")
    if key.tuner != TUNER_VERSION:
        raise ValueError(f"its key names another version of the tuner ({_shown(key.tuner)})")


def _check_settings(settings: TunedSettings, key: TuningKey) -> None:
    """Every thread count is one the tuner tries on the key's cores (thread_candidates)."""
    counts = thread_candidates(key.cores)
    for f in fields(TunedSettings):
        value = getattr(settings, f.name)
        if f.name.endswith("_threads") and value is not None and value not in counts:
            raise ValueError(f"its {f.name.replace('_', ' ')} ({_shown(value)}) is not a count the tuner tries on "
                             f"{key.cores} core{'s' if key.cores != 1 else ''} ({', '.join(map(str, counts))})")
    if settings.spin_count is not None and not 0 <= settings.spin_count <= MAX_SPIN_COUNT:
        raise ValueError(f"its spin count ({_shown(settings.spin_count)}) is outside 0..{MAX_SPIN_COUNT}")


def _check_figure(figure: CandidateFigure) -> None:
    for name in ("setting", "value", "part"):
        _check_text(getattr(figure, name), f"figure's {name}")
    if not (0 <= figure.median_ms <= MAX_FRAME_MS or figure.median_ms == math.inf):  # inf: never measured
        raise ValueError(f"its figure for {_shown(figure.value)} ({_shown(figure.median_ms)} ms) is not a time")
    if not 0 <= figure.samples <= MAX_SAMPLES:
        raise ValueError(f"its figure for {_shown(figure.value)} counts {_shown(figure.samples)} samples")


def _check_devices(device_ms: dict[str, Any], gpu_faster: bool | None, scan: bool = True) -> None:
    """Names the tuner writes ("cpu", "gpu:N" for a GPU of this computer it times: never a software GPU), times
    in range, and a GPU verdict that follows from them."""
    for name, ms in device_ms.items():
        if name != "cpu" and not _GPU_NAME.fullmatch(name):
            raise ValueError(f"its per-device figures name {_shown(name)}, which is not a device")
        if not 0 <= ms <= MAX_FRAME_MS:
            raise ValueError(f"its figure for {name} ({_shown(ms)} ms per frame) is not a time")
    gpus = [name for name in device_ms if name != "cpu"]
    if device_ms and "cpu" not in device_ms:
        raise ValueError("its per-device figures have no CPU figure to compare with")
    if gpus and gpu_faster is None:
        raise ValueError("it has GPU figures but no GPU verdict")
    if not gpus and gpu_faster is not None:
        raise ValueError("its GPU verdict has no GPU figure")
    if gpu_faster is not None and gpu_faster != (faster_gpu(device_ms) is not None):
        raise ValueError("its GPU verdict contradicts its figures")
    if gpus and scan:
        seen = scan_gpus().gpus  # the tuner scanned them too when it timed these
        for name in gpus:
            index = int(name.split(":", 1)[1])
            if index >= len(seen):
                raise ValueError(f"it has a figure for {name}, a GPU this computer does not have")
            if seen[index].software:
                raise ValueError(f"it has a figure for {name} ({seen[index].name}), a software GPU the tuner never "
                                 "times")


def _check_load(load: Any, cpus: int) -> None:
    """"" (none kept), "n/a" (no load figure on this OS) or load_average()'s three figures, each one a machine
    that finished a tuning could have had."""
    if not isinstance(load, str):
        raise ValueError("its load average is not text")
    if load in ("", "n/a"):
        return
    figures = load.split(" ")
    if len(figures) != 3 or not all(_LOAD.fullmatch(f) for f in figures):
        raise ValueError(f"its load average ({_shown(load)}) is not one this app writes")
    if max(float(f) for f in figures) > MAX_LOAD_PER_CPU * cpus:
        raise ValueError(f"its load average ({_shown(load)}) is more than {cpus} CPU{'s' if cpus != 1 else ''} "
                         "could have had while tuning")


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
    try:
        check_own_file(path)
    except OwnFileError as e:
        return Lookup(None, f"The tuning record {path} is not usable ({e.strerror}); it is ignored and this computer "
                            "is tuned again.")
    problem = regular_file_problem(path, "tuning record")
    if problem:
        return Lookup(None, f"{problem} It is ignored; this computer is tuned again.")
    try:
        record = _read_record(path)
        if record.key != key:
            raise ValueError("it belongs to another computer, model or version")
    except (OSError, UnicodeDecodeError, ValueError, TypeError, RecursionError) as e:
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        return Lookup(None, f"The tuning record {path} is not usable ({reason}); it is ignored and this computer "
                            "is tuned again.")
    return Lookup(record)


def _read_record(path: Path, check_gpus: bool = True) -> TuningRecord:
    """The record in a regular file (the caller checked it is one); raises what load_record catches."""
    with open(path, "rb") as f:
        data = f.read(MAX_RECORD_BYTES + 1)
    if len(data) > MAX_RECORD_BYTES:
        raise ValueError(f"it is larger than the {MAX_RECORD_BYTES} bytes a record may have")
    return TuningRecord.from_json(json.loads(data.decode("utf-8")), check_gpus)


def save_record(record: TuningRecord, folder: Path | None = None) -> str | None:
    """Store `record` under its key (atomically). Returns None, or a note when it could not be stored (the
    settings still apply to this session)."""
    path = record_path(record.key, folder)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_own_file(path, (json.dumps(record.to_json(), indent=1) + "\n").encode("utf-8"))
    except OSError as e:
        where = path if isinstance(e, OwnFileError) else path.parent
        return f"The tuning could not be stored in {where} ({e.strerror or e}); it applies until the model " \
               "is closed."
    return None


def stored_spin_count(cpu: str, cores: int, logical: int, ncnn: str, folder: Path | None = None) -> int | None:
    """The spin count the newest valid record measured on this CPU (any model), or None. Read at start-up, before
    ncnn is imported (engine/runtime/openmp_setup.py configure_openmp): the CPU facts and ncnn's version come from the
    caller, and records that do not load (load_record's checks) are passed over silently, and so are records
    measured on a busy machine (the spin count is measured again when the model is next tuned on a quiet one)."""
    found: list[tuple[str, int]] = []
    try:
        paths = sorted((folder or cache_dir()).joinpath("tuning").glob("*.json"))[:MAX_RECORDS_READ]
    except OSError:
        return None
    for path in paths:
        try:
            check_own_file(path)  # never through a link
            if regular_file_problem(path, "tuning record"):
                continue
            record = _read_record(path, check_gpus=False)  # ncnn is not imported yet: its GPUs are not asked
        except (OSError, UnicodeDecodeError, ValueError, TypeError, RecursionError):
            continue
        k = record.key
        if (k.cpu, k.cores, k.logical, k.ncnn) == (cpu, cores, logical, ncnn) and record.settings.spin_count is not None \
                and path.name == f"{k.digest()}.json" and not record.busy:
            found.append((record.measured, record.settings.spin_count))
    return max(found)[1] if found else None


def utc_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
