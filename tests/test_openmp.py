"""Per-thread limits on OpenMP teams (engine/runtime/openmp.py) and the int8 graphs that run under them.

team_limit is checked through libgomp's own per-thread settings (dyn-var, nthreads-var) and then by what it is for:
an int8 graph loaded for two threads, asked for one, must leave libgomp's worker threads idle while the calling
thread works (per-thread CPU time from /proc/self/task/*/stat), and the same calls at two threads must keep a worker
busy, so the measurement can tell the two apart. Results are bit-identical at either count. Where teams cannot be
limited (no libgomp: simulated by hiding it), int8 graphs keep their load-time count and say so.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from engine.nets.code_predictor import CodePredictor
from engine.nets.talker import Talker
from engine.runtime import openmp
from engine.runtime.bundle import Bundle
from engine.runtime.thread_governor import ThreadGovernor
from tests.bundles import bundle_for
from tests.test_q8 import SYNTH_MODELS

TASKS = Path("/proc/self/task")
MIN_CPU_SECONDS = 0.5  # calling-thread CPU time per measurement: 50 ticks at the usual 100 Hz, so ticks do not decide
IDLE_SHARE = 0.05  # the workers' CPU time against the caller's at one thread: (almost) nothing
BUSY_SHARE = 0.2  # ... at two threads, at least this (measured: about 1.0 spinning, 0.45 with OMP_WAIT_POLICY=PASSIVE)
ROUND_STEPS = 6  # decode steps per round of the talker workloads


def _need_libgomp() -> None:
    if not openmp.limited():
        pytest.skip("libgomp is not among this process's libraries (not Linux, or ncnn built on another OpenMP "
                    "runtime): OpenMP teams cannot be limited per thread here")


def _need_task_stats() -> None:
    if not (TASKS / str(threading.get_native_id()) / "stat").is_file():
        pytest.skip("no per-thread CPU times here (/proc/self/task/<tid>/stat is Linux-only)")


@pytest.fixture
def gomp():
    """libgomp, with the calling thread's settings put back after the test."""
    _need_libgomp()
    lib = openmp._libgomp()
    dynamic, most = openmp.thread_settings()
    yield lib
    lib.omp_set_dynamic(dynamic)
    lib.omp_set_num_threads(most)


@pytest.fixture(scope="module")
def q8_bundle() -> Bundle:
    return Bundle.open(bundle_for(SYNTH_MODELS[0], "q8", parts=["talker"]))


# ------------------------------------------------------------------------------------------------ team_limit


def test_team_limit_sets_the_calling_threads_settings_and_restores_them(gomp):
    gomp.omp_set_dynamic(0)
    gomp.omp_set_num_threads(3)  # not libgomp's defaults here, so a restore to the defaults would show
    assert openmp.thread_settings() == (0, 3)
    for n in (1, 2):
        with openmp.team_limit(n):
            assert openmp.thread_settings() == (1, n)
        assert openmp.thread_settings() == (0, 3)
    with pytest.raises(RuntimeError, match="inside the block"), openmp.team_limit(1):
        assert openmp.thread_settings() == (1, 1)
        raise RuntimeError("inside the block")
    assert openmp.thread_settings() == (0, 3)


def test_team_limit_none_changes_nothing(gomp):
    gomp.omp_set_num_threads(3)
    before = openmp.thread_settings()
    with openmp.team_limit(None):
        assert openmp.thread_settings() == before
    assert openmp.thread_settings() == before


def test_team_limit_leaves_other_threads_alone(gomp):
    """The settings are per thread: another Python thread keeps its own while the block is open (the speech
    decoder's thread runs its teams at its own count beside generation), and its block does not reach us."""
    seen: dict[str, tuple[int, int] | None] = {}
    opened, looked, done = threading.Event(), threading.Event(), threading.Event()

    def other() -> None:
        seen["before"] = openmp.thread_settings()
        opened.wait(30)
        seen["while ours is open"] = openmp.thread_settings()
        with openmp.team_limit(1):
            seen["its own block"] = openmp.thread_settings()
            looked.set()
            done.wait(30)

    thread = threading.Thread(target=other)
    thread.start()
    try:
        ours = openmp.thread_settings()
        with openmp.team_limit(1):
            opened.set()
            assert looked.wait(30)
            assert openmp.thread_settings() == (1, 1)
        assert openmp.thread_settings() == ours  # the other thread's block (still open) did not touch ours
    finally:
        opened.set()
        done.set()
        thread.join(30)
    assert seen["while ours is open"] == seen["before"] != (1, 1)
    assert seen["its own block"] == (1, 1)


# ------------------------------------------------------------------------------ the limit, measured in use


def _cpu_ticks() -> dict[int, int]:
    """utime + stime (clock ticks) of each thread of this process."""
    ticks = {}
    for task in TASKS.iterdir():
        try:
            stat = (task / "stat").read_text()
        except OSError:  # the thread ended meanwhile
            continue
        fields = stat.rsplit(")", 1)[1].split()  # after the name, which may hold spaces: field 3 onwards
        ticks[int(task.name)] = int(fields[11]) + int(fields[12])  # fields 14 and 15
    return ticks


def _run_for_a_while(work: Callable[[], list[np.ndarray]]) -> tuple[list[np.ndarray], float, float]:
    """Rounds of `work` until the calling thread has used MIN_CPU_SECONDS; every round must give the same arrays.
    Returns them, the CPU time all other threads of the process used and the busiest one alone, as shares of
    the calling thread's."""
    want = work()  # also the warm-up: a net's first calls allocate
    me = threading.get_native_id()
    before, cpu0, wall0 = _cpu_ticks(), time.thread_time(), time.monotonic()
    rounds = 0
    while time.thread_time() - cpu0 < MIN_CPU_SECONDS and time.monotonic() - wall0 < 120:
        got = work()
        rounds += 1
        assert all(np.array_equal(a, b) for a, b in zip(got, want, strict=True)), f"round {rounds} differs"
    after = _cpu_ticks()
    gained = {tid: ticks - before.get(tid, 0) for tid, ticks in after.items()}
    mine = gained.pop(me)
    if mine < 0.5 * MIN_CPU_SECONDS * os.sysconf("SC_CLK_TCK"):
        raise RuntimeError(f"the machine was too busy to give this thread {MIN_CPU_SECONDS} s of CPU in 2 minutes")
    return want, sum(gained.values()) / mine, max(gained.values(), default=0) / mine


def _talker_work(talker: Talker, rows: int) -> Callable[[], list[np.ndarray]]:
    """Prefill `rows` sequences and step them ROUND_STEPS times (1 row: StepNet.run, attention inside; more: StepNet.run_rows)."""
    rng = np.random.default_rng(rows)
    prompt = (rng.standard_normal((5, talker.hidden_size)) * 0.1).astype(np.float32)
    steps = (rng.standard_normal((ROUND_STEPS, rows, talker.hidden_size)) * 0.1).astype(np.float32)

    def work() -> list[np.ndarray]:
        seqs = [talker.start(prompt[: 3 + j % 3])[0] for j in range(rows)]
        return [a for step in steps for a in talker.step_many(seqs, step)]

    return work


def _code_predictor_work(cp: CodePredictor, rows: int) -> Callable[[], list[np.ndarray]]:
    """A frame for `rows` rows at once (the q8 code predictor: a SequenceNet with its attention inside)."""
    rng = np.random.default_rng(rows)
    hidden = (rng.standard_normal((rows, cp.hidden_size)) * 0.1).astype(np.float32)
    c0s = rng.integers(0, cp.codebook_size, rows)

    def work() -> list[np.ndarray]:
        logits: list[np.ndarray] = []

        def greedy(row_logits: np.ndarray, group: int) -> int:
            logits.append(row_logits.copy())
            return int(np.argmax(row_logits))

        codes = cp.predict_many(hidden, c0s, [greedy] * rows)
        return [codes, *logits]

    return work


WORKLOADS = {"talker, one row": ("talker", 1), "talker, 8 rows": ("talker", 8),
             "code predictor, 8 rows": ("code predictor", 8)}


def measure(bundle_path: str, workload: str) -> dict:
    """In a process of its own (so that no thread another test left behind is counted): the workload at one and at
    two threads, the other threads' CPU time as shares of the calling thread's, and whether the results agree."""
    part, rows = WORKLOADS[workload]
    bundle = Bundle.open(bundle_path)
    owner = (Talker if part == "talker" else CodePredictor)(bundle, 2, int8_threads=2, adaptive_threads=False)
    work = (_talker_work if part == "talker" else _code_predictor_work)(owner, rows)
    results, shares, states = {}, {}, []
    for threads in (1, 2):
        owner.governor = ThreadGovernor(2, adaptive=False, start=threads)  # every call runs at `threads`
        results[threads], others, busiest = _run_for_a_while(work)
        shares[threads] = (others, busiest)
        states.append((owner.net.weight_threads, owner.net.fixed_threads, owner.net.net.opt.num_threads))
    same = all(np.array_equal(a, b) for a, b in zip(results[1], results[2], strict=True))
    return {"shares": shares, "states": states, "same": same}


@pytest.mark.parametrize("workload", list(WORKLOADS))
def test_an_int8_graph_loaded_for_two_threads_runs_on_one_when_asked(q8_bundle, workload):
    _need_libgomp()
    _need_task_stats()
    code = ("import json, sys; from tests.test_openmp import measure; "
            f"print(json.dumps(measure(sys.argv[1], {workload!r})))")
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", code, str(q8_bundle.path)], capture_output=True, text=True,
                         cwd=root, env={**os.environ, "PYTHONPATH": str(root)}, timeout=600)
    if "too busy" in out.stdout + out.stderr:
        pytest.skip("the machine was too busy to give the measuring thread its CPU time")
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    shares = {int(k): v for k, v in got["shares"].items()}
    # the net runs at the count asked for, from int8 Gemms packed for two (ncnn's load-time count)
    assert [tuple(s) for s in got["states"]] == [(1, False, 2), (2, False, 2)]
    print(f"{workload}: CPU time of the other threads against the calling thread's: one thread "
          f"{shares[1][0]:.3f}, two threads {shares[2][0]:.3f} (busiest {shares[2][1]:.3f})")
    assert shares[1][0] <= IDLE_SHARE, "OpenMP workers ran while the net was limited to one thread"
    assert shares[2][1] >= BUSY_SHARE, "no OpenMP worker ran at two threads: the measurement cannot tell"
    assert got["same"], "results differ between one and two threads"


# ------------------------------------------------------------------------- what the nets say they can do


def test_with_team_limits_int8_nets_run_at_up_to_their_load_time_count(q8_bundle):
    _need_libgomp()
    for owner in (Talker(q8_bundle, 2, int8_threads=2), CodePredictor(q8_bundle, 2, int8_threads=2)):
        net = owner.net
        assert not net.fixed_threads and net.weight_threads == 2
        assert net.can_run_at(1) and net.can_run_at(2) and not net.can_run_at(3)
        for n in (1, 2, 3, 1):
            net.set_threads(n)
            assert net.weight_threads == min(n, 2)  # never more than loaded
            assert net.net.opt.num_threads == 2
    one = Talker(q8_bundle, 2, int8_threads=1).net
    assert one.can_run_at(1) and not one.can_run_at(2)
    floats = Talker(Bundle.open(bundle_for(SYNTH_MODELS[0], "fp32", parts=["talker"])), 2).net
    assert not floats.fixed_threads and all(floats.can_run_at(n) for n in (1, 2, 3))


def test_without_team_limits_int8_nets_keep_their_load_time_count(q8_bundle, monkeypatch):
    """Where libgomp cannot be driven (hidden here), set_threads moves only the talker's attention nets; the int8
    Gemms run at their load-time count and the nets say so (the tuner loads a net per count then)."""
    monkeypatch.setattr(openmp, "_libgomp", lambda: None)
    assert not openmp.limited() and openmp.thread_settings() is None
    talker, cp = Talker(q8_bundle, 2, int8_threads=2), CodePredictor(q8_bundle, 2, int8_threads=2)
    for net in (talker.net, cp.net):
        assert net.fixed_threads
        assert net.can_run_at(2) and not net.can_run_at(1) and not net.can_run_at(3)
        for n in (1, 2, 1):
            net.set_threads(n)
            assert net.weight_threads == 2 and net.net.opt.num_threads == 2
            assert net._team is None  # nothing limits the next calls' teams
    assert talker.net._sdpa
    for n in (1, 2):
        talker.net.set_threads(n)
        assert all(sdpa.opt.num_threads == n for sdpa in talker.net._sdpa.values())
    one = Talker(q8_bundle, 2, int8_threads=1).net
    assert one.fixed_threads and one.can_run_at(1) and not one.can_run_at(2)
    with openmp.team_limit(1):
        assert openmp.thread_settings() is None


def test_without_team_limits_asking_for_one_thread_still_runs_two(q8_bundle, monkeypatch):
    """The other side of the measurement above: with libgomp hidden, set_threads(1) on a net loaded for two leaves
    its teams at two, as weight_threads reports (and the workers' CPU time shows)."""
    _need_libgomp()  # the teams are libgomp's; only its use by the engine is hidden
    _need_task_stats()
    monkeypatch.setattr(openmp, "_libgomp", lambda: None)
    talker = Talker(q8_bundle, 2, int8_threads=2, adaptive_threads=False, start_threads=1)
    assert talker.governor.current == 1
    _, others, busiest = _run_for_a_while(_talker_work(talker, 8))
    assert talker.net.weight_threads == 2
    assert busiest >= BUSY_SHARE, f"workers' share {others:.3f}: the teams were limited after all"
