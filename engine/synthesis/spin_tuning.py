"""The OpenMP spin count (GOMP_SPINCOUNT) measured for this CPU: the self-tuner's spin stage.

libgomp reads the spin count once, when ncnn loads it, so a candidate other than the one this process runs at is
timed in a process of its own (multiprocessing's spawn start, which also works in the packaged app): it loads
only the code predictor (its 15 small calls per frame open the most parallel regions per millisecond, so the spin
moves it most: on a 2-vCPU Intel Xeon 73 ms per frame at 1000 against 47 at 10000, the talker 29 against 22) and
times frames at every core, quiet, then beside a competing load with the thread governor free to move to one
thread as it does in use. The count this process runs at is timed here, on the nets already loaded.

The choice (choose_spin): among candidates whose loaded time stays within LOADED_FACTOR of their quiet time, the
fastest quiet one, the shortest spin among those tied with it; if none stays within it, the one fastest under load.
A long spin wins quiet wherever a core is free and loses when another program wants it (AMD EPYC, 2 cores, busy
with one other process, two threads: 1000 151-193 ms per frame, 30000 2425-2446; engine/runtime/cpu.py), so the
loaded bound is what keeps such a count out. The choice is kept in the tuning record and applied before ncnn loads
at the next start (engine/runtime/openmp_setup.py configure_openmp); a user's own OMP_WAIT_POLICY or GOMP_SPINCOUNT wins
and then nothing here runs.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..errors import Cancelled
from ..nets.code_predictor import CodePredictor
from ..runtime.bundle import Bundle
from ..runtime.cpu import busy_processes, stop_process
from ..runtime.cpu_load import shared_cpu_load
from ..runtime.thread_governor import ThreadGovernor
from ..runtime.tuning import TIE_MARGIN, CandidateFigure, median
from .tuning_frames import greedy

# Candidates in the order they are measured while time lasts (the count this process runs at is timed first, in
# process). 1000: the first start's value, chosen on the AMD EPYC; 10000 and 100000: the Intel Xeon's best
# (59-69 ms per frame against 95-105 at 1000); 300: the bounded choice where even 1000 loses under load.
SPIN_CANDIDATES = (1000, 10000, 300, 100000)
LOADED_FACTOR = 2.0  # a spin count may be at most this much slower beside a competing load than quiet
QUIET_FRAMES = 6  # code predictor frames timed quiet (after one warm-up frame)
LOADED_SECONDS = 0.8  # code predictor frames timed beside the competing load, at least two
POLL_SECONDS = 0.1  # how often a running candidate's process is checked for a cancel
CHILD_START_SECONDS = 1.0  # a candidate's process: interpreter, engine import and the code predictor's load


@dataclass(frozen=True)
class SpinProbe:
    """One spin count's code predictor frames (seconds each): quiet at every core, and beside a competing load."""

    quiet: tuple[float, ...]
    loaded: tuple[float, ...]

    @property
    def quiet_ms(self) -> float:
        return median(self.quiet) * 1000

    @property
    def loaded_ms(self) -> float:
        """The mean under load: the slow frames before the governor moves to one thread count in full."""
        finite = [v for v in self.loaded if math.isfinite(v)]
        return sum(finite) / len(finite) * 1000 if finite else math.inf


Probe = Callable[[int, float], SpinProbe | None]  # (spin count, seconds it may take) -> its frames, or None


def choose_spin(probes: dict[int, SpinProbe]) -> int:
    """The spin count to keep (see the module docstring); probes in any order."""
    if not probes:
        raise ValueError("no spin count was measured")
    bounded = {s: p for s, p in probes.items() if p.loaded_ms <= LOADED_FACTOR * p.quiet_ms}
    if not bounded:
        return min(probes, key=lambda s: (probes[s].loaded_ms, s))
    best = min(p.quiet_ms for p in bounded.values())
    return min(s for s, p in bounded.items() if p.quiet_ms <= best * (1.0 + TIE_MARGIN))


# -------------------------------------------------------------------------------------------------- timing


def time_frames(cp: CodePredictor, governor: ThreadGovernor, frames: int = 0, seconds: float = 0.0) -> list[float]:
    """Seconds per code predictor frame (15 steps, greedy, from a random talker state: the time does not depend
    on the values): `frames` of them, or as many as `seconds` allow (at least two). The caller's governor is used
    and the code predictor's own put back."""
    hidden = (np.random.default_rng(0).standard_normal((1, cp.hidden_size)) * 0.05).astype(np.float32)
    own, cp.governor = cp.governor, governor
    out: list[float] = []
    try:
        end = time.perf_counter() + seconds
        while len(out) < frames or (seconds and (len(out) < 2 or time.perf_counter() < end)):
            t = time.perf_counter()
            cp.predict_many(hidden, [0], [greedy])
            out.append(time.perf_counter() - t)
    finally:
        cp.governor = own
    return out


def probe_here(cp: CodePredictor, cores: int, quiet: list[float]) -> SpinProbe | None:
    """This process's spin count: its quiet frames measured already (the thread stage), the loaded ones now."""
    try:
        with busy_processes(busy_count(cores)):
            loaded = time_frames(cp, ThreadGovernor(cores, adaptive=True, load=shared_cpu_load()),
                                 seconds=LOADED_SECONDS)
    except OSError:  # no process for the competing load: this count is not measured
        return None
    return SpinProbe(tuple(quiet), tuple(loaded))


def probe_in_child(bundle: Bundle, spin: int, cores: int, timeout: float,
                   cancel: Callable[[], bool] | None = None) -> SpinProbe | None:
    """The code predictor timed in a process whose libgomp spins `spin` iterations; None when it did not report
    within `timeout` seconds (then it is stopped), failed, or could not be started. cancel() is checked every
    POLL_SECONDS while it runs: True stops it and raises Cancelled."""
    ctx = multiprocessing.get_context("spawn")
    receive, send = ctx.Pipe(duplex=False)
    # not a daemon: it starts processes of its own (the competing load); stopped below whatever happens
    proc = ctx.Process(target=_child, args=(str(bundle.path), cores, send), name=f"spin count {spin}")
    with _environment_lock:  # the child inherits the environment as it is while it starts
        saved = {k: os.environ.get(k) for k in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
        os.environ["GOMP_SPINCOUNT"] = str(int(spin))
        os.environ.pop("OMP_WAIT_POLICY", None)
        try:
            proc.start()
        except OSError:  # no process to be had (limits, a packaged app without freeze_support): not measured
            receive.close()
            send.close()
            return None
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    send.close()
    result = None
    try:
        end = time.monotonic() + max(0.0, timeout)
        while not receive.poll(max(0.0, min(POLL_SECONDS, end - time.monotonic()))):
            if cancel is not None and cancel():
                raise Cancelled("Tuning was cancelled.")
            if time.monotonic() >= end:
                break
        else:
            result = receive.recv()
    except (EOFError, OSError):  # it ended without a word (a crash, or killed)
        result = None
    finally:
        receive.close()
        stop_process(proc)
    if not isinstance(result, dict) or result.get("spin") != str(int(spin)):
        return None
    return SpinProbe(tuple(result["quiet"]), tuple(result["loaded"]))


def _child(bundle_path: str, cores: int, send) -> None:
    """In the candidate's process: the code predictor's frames, sent back with the spin count libgomp read."""
    try:
        cp = CodePredictor(Bundle.open(bundle_path), cores, adaptive_threads=False, int8_threads=cores)
        fixed = ThreadGovernor(cores, adaptive=False)
        time_frames(cp, fixed, frames=1)  # warm-up: a fresh net allocates its buffers on its first call
        quiet = time_frames(cp, fixed, frames=QUIET_FRAMES)
        with busy_processes(busy_count(cores)):
            loaded = time_frames(cp, ThreadGovernor(cores, adaptive=True, load=shared_cpu_load()),
                                 seconds=LOADED_SECONDS)
        send.send({"spin": os.environ.get("GOMP_SPINCOUNT"), "quiet": quiet, "loaded": loaded})
    finally:
        send.close()


def measure_spins(current: int, here: Callable[[], SpinProbe | None], there: Probe, deadline: float,
                  frame_seconds: float, clock: Callable[[], float] = time.monotonic,
                  cancel: Callable[[], bool] | None = None) -> dict[int, SpinProbe]:
    """Probes of `current` (here()) and of the other SPIN_CANDIDATES in their order (there(spin, seconds left)),
    each only while the time left before `deadline` holds one more: the stage is capped by time, not by
    candidates. frame_seconds: a quiet code predictor frame, for the estimate."""
    probes: dict[int, SpinProbe] = {}
    child = CHILD_START_SECONDS + (QUIET_FRAMES + 1) * frame_seconds + LOADED_SECONDS
    for spin in (current, *(s for s in SPIN_CANDIDATES if s != current)):
        if cancel is not None and cancel():
            raise Cancelled("Tuning was cancelled.")
        left = deadline - clock()
        if left < (LOADED_SECONDS if spin == current else child):
            break
        probe = here() if spin == current else there(spin, left)
        if probe is not None:
            probes[spin] = probe
    return probes


def spin_stage(bundle: Bundle, cp_at_top: Callable[[], CodePredictor], quiet: list[float], current: int,
               top: int, deadline: float, clock: Callable[[], float], cancel: Callable[[], bool] | None,
               injected: Probe | None = None) -> dict[int, SpinProbe]:
    """The self-tuner's spin stage: the counts timed while its share of the budget lasts. cp_at_top() gives the
    code predictor running at `top` threads (this process's count is timed on it; `quiet` are its frames from
    the thread stage); injected replaces every measurement (tests)."""
    if injected is not None:
        probe = injected

        def here() -> SpinProbe | None:
            return probe(current, deadline - clock())
    else:
        def here() -> SpinProbe | None:
            return probe_here(cp_at_top(), top, quiet)

        def probe(spin: int, seconds: float) -> SpinProbe | None:
            return probe_in_child(bundle, spin, top, seconds, cancel)
    return measure_spins(current, here, probe, deadline, median(quiet) if quiet else 0.1, clock, cancel)


def spin_figures(probes: dict[int, SpinProbe], chosen: int) -> list[CandidateFigure]:
    """The record's figures: each count's code predictor frame, quiet and loaded."""
    return [CandidateFigure("spin count", str(s), f"code predictor, {how}", ms, n, s == chosen)
            for s, p in sorted(probes.items())
            for how, ms, n in (("quiet", p.quiet_ms, len(p.quiet)), ("loaded", p.loaded_ms, len(p.loaded)))]


def busy_count(cores: int) -> int:
    """Busy processes for the loaded measurement: every core but one taken (one on 2 cores, as the figures in
    engine/runtime/cpu.py were measured)."""
    return max(1, cores - 1)


_environment_lock = threading.Lock()


