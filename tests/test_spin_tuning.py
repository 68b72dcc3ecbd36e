"""The OpenMP spin count chosen per CPU (engine/synthesis/spin_tuning.py, engine/runtime/cpu.py): the choice on
CPUs we never see (injected timings: a long spin that wins quiet and loses beside a competing load, one that never
wins), the choice kept in the tuning record and given to libgomp before ncnn loads at the next start (checked in
a process of its own), a user's own setting winning, a candidate timed in a process of its own, and the whole
tuning stopping at its time cap."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from importlib import metadata

import pytest

from engine import Synthesizer
from engine.runtime import cpu
from engine.runtime.bundle import Bundle
from engine.runtime.cpu import SpinSetting, cpu_model, physical_cores, usable_cpus
from engine.runtime.tuning import TunedSettings, TuningKey, TuningRecord, save_record, stored_spin_count
from engine.synthesis import spin_tuning
from engine.synthesis.self_tuning import tune_synthesizer
from engine.synthesis.spin_tuning import SpinProbe, choose_spin, probe_in_child
from tests.tuning_stand_in import BUDGET, ONE_WINS, TIME_CAP, on_the_run_clock
from tests.tuning_stand_in import cpu as fake_cpu

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def probe(quiet_ms: float, loaded_ms: float) -> SpinProbe:
    return SpinProbe((quiet_ms / 1000,) * 3, (loaded_ms / 1000,) * 3)


def spins(table: dict[int, tuple[float, float]]) -> dict[int, SpinProbe]:
    return {s: probe(q, lo) for s, (q, lo) in table.items()}


# code predictor ms per frame (quiet, beside one busy process with the governor free): the AMD EPYC's shape, where
# a long spin is fastest quiet and collapses when another program wants the core (engine/runtime/cpu.py)
LONG_SPIN_LOSES_LOADED = spins({300: (110, 105), 1000: (66, 120), 10000: (60, 380), 100000: (58, 2400)})
# the Intel Xeon's shape (measured there): a long spin is faster quiet and stays bounded under load
LONG_SPIN_WINS = spins({300: (89, 120), 1000: (73, 110), 10000: (47, 80), 100000: (46.5, 85)})
# a CPU where a spin longer than 1000 never wins: within noise quiet, worse loaded
LONG_SPIN_NEVER_WINS = spins({300: (95, 100), 1000: (70, 90), 10000: (71, 130), 100000: (69.5, 135)})


def test_a_long_spin_that_wins_quiet_and_loses_loaded_is_not_chosen():
    assert choose_spin(LONG_SPIN_LOSES_LOADED) == 1000  # the fastest quiet whose loaded time stays bounded


def test_a_long_spin_that_stays_bounded_is_chosen():
    assert choose_spin(LONG_SPIN_WINS) == 10000  # 100000 is tied with it (within 3 %): the shorter spin


def test_where_a_long_spin_never_wins_the_short_one_stays():
    assert choose_spin(LONG_SPIN_NEVER_WINS) == 1000


def test_where_none_stays_bounded_the_fastest_under_load_is_chosen():
    assert choose_spin(spins({300: (50, 180), 1000: (40, 200), 10000: (30, 900)})) == 300


def test_an_unmeasured_loaded_time_never_stays_bounded():
    probes = {300: probe(100, 150), 10000: SpinProbe((0.04,), ())}
    assert choose_spin(probes) == 300


def test_the_time_left_decides_how_many_candidates_are_timed():
    now = [0.0]
    timed = []

    def there(spin, seconds):
        timed.append((spin, seconds))
        now[0] += 2.0
        return probe(50, 60)

    probes = spin_tuning.measure_spins(1000, lambda: probe(60, 70), there, deadline=5.0, frame_seconds=0.05,
                                       clock=lambda: now[0])
    # one child needs about 1.0 + 7 x 0.05 + 0.8 s: after two the 1 s left holds none
    assert list(probes) == [1000, 10000, 300] and [s for s, _ in timed] == [10000, 300]
    assert timed[0][1] == 5.0  # each child may take the time left


# -------------------------------------------------------------------------------------------------- the tuner


@pytest.fixture
def cache(tuning_cache, monkeypatch):
    monkeypatch.setattr(cpu, "_spin", SpinSetting(1000, "default"))
    return tuning_cache


def fake_spin_cpu(table: dict[int, SpinProbe]):
    asked = []

    def spin_probe(spin, seconds):
        asked.append(spin)
        return table.get(spin)

    return spin_probe, asked


needs_two_cores = pytest.mark.skipif(physical_cores() < 2, reason="the spin count matters only for teams")


@needs_two_cores
@pytest.mark.parametrize("table, expected", [(LONG_SPIN_LOSES_LOADED, 1000), (LONG_SPIN_WINS, 10000),
                                             (LONG_SPIN_NEVER_WINS, 1000)])
def test_the_tuner_keeps_the_chosen_spin_count_in_the_record(tuning_q8, cache, table, expected):
    synth = Synthesizer(tuning_q8)
    spin_probe, asked = fake_spin_cpu(table)
    record = tune_synthesizer(synth, timing=ONE_WINS, budget=BUDGET * 15, time_cap=TIME_CAP, spin_probe=spin_probe)
    assert record.settings.spin_count == expected
    assert asked[0] == 1000 and set(asked) == set(table)  # this process's count first, then the others
    chosen = {f.value for f in record.figures if f.setting == "spin count" and f.chosen}
    assert chosen == {str(expected)}
    reopened = Synthesizer(tuning_q8)
    assert reopened.tuning == record and not reopened.tuning_needed
    assert stored_spin_count(cpu_model(), physical_cores(), usable_cpus(), metadata.version("ncnn")) == expected


@needs_two_cores
def test_the_code_predictor_threads_follow_the_chosen_spin_count(tuning_q8, cache):
    # at 1000 one thread wins (68 against 117 ms); at 10000 two threads do their frame in 47 ms
    top = physical_cores()
    spin_probe, _ = fake_spin_cpu({1000: probe(117, 150), 10000: probe(47, 80)})
    record = tune_synthesizer(Synthesizer(tuning_q8), timing=ONE_WINS, budget=BUDGET * 15, time_cap=TIME_CAP,
                              spin_probe=spin_probe)
    assert record.settings.spin_count == 10000
    assert (record.settings.talker_threads, record.settings.code_predictor_threads) == (1, top)
    # where the spin count stays, the counts are the ones measured here
    spin_probe, _ = fake_spin_cpu({1000: probe(117, 150), 10000: probe(117, 900)})
    record = tune_synthesizer(Synthesizer(tuning_q8), timing=ONE_WINS, budget=BUDGET * 15, time_cap=TIME_CAP,
                              spin_probe=spin_probe)
    assert (record.settings.spin_count, record.settings.code_predictor_threads) == (1000, 1)


@needs_two_cores
def test_one_count_measured_is_no_choice(tuning_q8, cache):
    """A busy machine may leave time for this process's count alone: nothing is stored, so a later tuning on a
    quiet machine measures the others."""
    spin_probe, asked = fake_spin_cpu({1000: probe(117, 150)})
    record = tune_synthesizer(Synthesizer(tuning_q8), timing=ONE_WINS, budget=BUDGET * 15, time_cap=TIME_CAP,
                              spin_probe=spin_probe)
    assert 1000 in asked and record.settings.spin_count is None


@pytest.mark.parametrize("setting", [SpinSetting(None, "user"), SpinSetting(777, "user"), SpinSetting(5000, "tuned")])
def test_a_spin_count_the_user_set_or_a_tuning_measured_is_not_measured_again(tuning_q8, cache, monkeypatch,
                                                                                 setting):
    monkeypatch.setattr(cpu, "_spin", setting)
    spin_probe, asked = fake_spin_cpu(LONG_SPIN_WINS)
    record = tune_synthesizer(Synthesizer(tuning_q8), timing=ONE_WINS, budget=BUDGET, time_cap=TIME_CAP,
                              spin_probe=spin_probe)
    assert asked == []
    assert record.settings.spin_count == (5000 if setting.source == "tuned" else None)


def test_the_tuning_stops_at_its_time_cap(tuning_q8, cache):
    """Slow frames on a busy machine: the run stops measuring when its budget is spent, whatever candidates are
    left (before, every stage ran its minimum rounds: 26.8 s instead of about 15 on a busy Intel Xeon)."""
    timing, clock = on_the_run_clock(fake_cpu({1: 1000, 2: 1200}, {1: 2000, 2: 2100}, stream={},
                                              decode={"fp32": 500, "bf16": 400}))

    spin_probe, asked = fake_spin_cpu(LONG_SPIN_WINS)
    record = tune_synthesizer(Synthesizer(tuning_q8), timing=timing, budget=15.0, spin_probe=spin_probe,
                              clock=clock)
    assert record.seconds <= 15.0 + 3.1  # at most one frame (talker + code predictor) past the budget
    assert not any(f.setting in ("decoding", "decoder precision") for f in record.figures)  # no time was left
    assert record.settings.decoder_bf16_faster is None
    s = record.settings
    assert (s.overlap_decode, s.decoder_threads, s.streaming_threads) == (True, physical_cores(), physical_cores())


def test_a_stage_whose_least_work_does_not_fit_is_skipped(tuning_q8, cache):
    """3 s frames (a busy machine's fp32): after the thread stage 6 s are left, less than the decoder precision
    stage (codes for 4 frames and two decodes of them) or two streamed arrangements need; before, each stage
    started while any time was left and ran past the budget by its first measurement."""
    stream = {(g, True, d): 2500 for g in (1, 2) for d in (1, 2)} | {(2, False, 2): 2500}
    timing, clock = on_the_run_clock(fake_cpu({1: 1000, 2: 1200}, {1: 2000, 2: 2100}, stream=stream,
                                              decode={"fp32": 500, "bf16": 400}))

    spin_probe, _ = fake_spin_cpu(LONG_SPIN_WINS)
    record = tune_synthesizer(Synthesizer(tuning_q8), timing=timing, budget=25.0, spin_probe=spin_probe,
                              clock=clock)
    assert record.seconds <= 25.0
    assert not any(f.setting in ("decoding", "decoder precision") for f in record.figures)
    s = record.settings
    assert (s.overlap_decode, s.decoder_threads, s.streaming_threads) == (True, physical_cores(), physical_cores())


# -------------------------------------------------------------------------------------------------- processes


def test_a_candidate_is_timed_in_a_process_of_its_own(tuning_q8):
    found = probe_in_child(Bundle.open(tuning_q8), 4321, 2, timeout=120)
    assert found is not None  # the child reports the count it ran at: 4321 (else None)
    assert len(found.quiet) == spin_tuning.QUIET_FRAMES and len(found.loaded) >= 2
    assert all(v > 0 for v in found.quiet + found.loaded)
    assert os.environ.get("GOMP_SPINCOUNT") != "4321"  # this process's environment is as it was


def test_a_candidate_that_does_not_report_in_time_is_stopped(tuning_q8):
    import multiprocessing

    assert probe_in_child(Bundle.open(tuning_q8), 4321, 2, timeout=0.0) is None
    assert not multiprocessing.active_children()


SEEN_AT_NCNN_IMPORT = r"""
import os, sys
seen = {}
class Watch:
    def find_spec(self, name, path=None, target=None):
        if name == "ncnn" and "ncnn" not in seen:
            seen["ncnn"] = os.environ.get("GOMP_SPINCOUNT")
        return None
sys.meta_path.insert(0, Watch())
import engine
import ncnn
print(seen.get("ncnn"), engine.runtime.cpu.spin_setting().source)
assert engine.openmp_settings().endswith("(this CPU's tuning)") == (engine.runtime.cpu.spin_setting().source == "tuned")
"""


def _start_with(cache_dir, **env) -> list[str]:
    clean = {k: v for k, v in os.environ.items() if k not in cpu.OPENMP_CHOICES}
    out = subprocess.run([sys.executable, "-c", SEEN_AT_NCNN_IMPORT], capture_output=True, text=True, timeout=120,
                         env={**clean, "PYTHONPATH": ROOT, "QWEN3TTS_CACHE_DIR": str(cache_dir), **env}, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def _record(spin: int, measured: str, cpu_name: str | None = None, load: str = "0.50 0.40 0.30") -> TuningRecord:
    key = TuningKey(cpu=cpu_name or cpu_model(), cores=physical_cores(), logical=usable_cpus(),
                    ncnn=metadata.version("ncnn"), model=f"a model measured {measured}", precision="q8", format="f")
    return TuningRecord(key, TunedSettings(1, 1, 1, True, spin_count=spin), measured=measured, load_average=load)


def test_the_tuned_spin_count_is_given_to_libgomp_before_ncnn_loads(tmp_path):
    assert _start_with(tmp_path) == [cpu.SPIN_COUNT, "default"]  # no record: the first start's value
    save_record(_record(12345, "2026-12-01T10:00:00Z"), tmp_path)
    save_record(_record(23456, "2026-12-02T10:00:00Z"), tmp_path)  # the newest measurement on this CPU wins
    save_record(_record(99999, "2026-12-03T10:00:00Z", cpu_name="Another CPU"), tmp_path)
    save_record(_record(300, "2026-12-04T10:00:00Z", load=f"{usable_cpus() + 8}.00 9.00 9.00"), tmp_path)  # busy
    assert _start_with(tmp_path) == ["23456", "tuned"]


def test_the_users_own_openmp_setting_wins_over_the_tuned_one(tmp_path):
    save_record(_record(12345, "2026-12-01T10:00:00Z"), tmp_path)
    assert _start_with(tmp_path, GOMP_SPINCOUNT="777") == ["777", "user"]
    assert _start_with(tmp_path, OMP_WAIT_POLICY="passive") == ["None", "user"]


def test_a_damaged_record_gives_no_spin_count(tmp_path):
    path = save_record(_record(12345, "2026-12-01T10:00:00Z"), tmp_path)
    assert path is None
    for f in (tmp_path / "tuning").glob("*.json"):
        data = json.loads(f.read_text())
        data["settings"]["spin_count"] = -5
        f.write_text(json.dumps(data))
    (tmp_path / "tuning" / "fifo.json").parent.mkdir(exist_ok=True)
    os.mkfifo(tmp_path / "tuning" / "fifo.json")  # never opened (it would block)
    assert stored_spin_count(cpu_model(), physical_cores(), usable_cpus(), metadata.version("ncnn"),
                             tmp_path) is None
    assert _start_with(tmp_path) == [cpu.SPIN_COUNT, "default"]


def test_a_record_moved_under_another_name_is_not_read(tmp_path):
    save_record(_record(12345, "2026-12-01T10:00:00Z"), tmp_path)
    (f,) = (tmp_path / "tuning").glob("*.json")
    f.rename(f.with_name("copy.json"))
    assert stored_spin_count(cpu_model(), physical_cores(), usable_cpus(), metadata.version("ncnn"),
                             tmp_path) is None
    assert replace(_record(1, "x").settings, spin_count=None).spin_count is None


def test_a_candidate_running_when_the_tuning_is_cancelled_is_stopped(tuning_q8):
    import multiprocessing
    import time

    from engine.errors import Cancelled

    asked = []

    def cancel():
        asked.append(time.monotonic())
        return len(asked) > 2  # cancelled while the process still loads

    start = time.monotonic()
    with pytest.raises(Cancelled):
        probe_in_child(Bundle.open(tuning_q8), 4321, 2, timeout=120, cancel=cancel)
    assert time.monotonic() - start < 30 and not multiprocessing.active_children()


def test_a_candidate_whose_process_cannot_start_is_not_measured(tuning_q8, monkeypatch):
    import multiprocessing.context

    def refuse(self):
        raise OSError("no more processes")

    monkeypatch.setattr(multiprocessing.context.SpawnProcess, "start", refuse)
    assert probe_in_child(Bundle.open(tuning_q8), 4321, 2, timeout=120) is None
    assert os.environ.get("GOMP_SPINCOUNT") != "4321"


def test_the_summary_says_a_new_spin_count_applies_from_the_next_start(monkeypatch):
    record = _record(10000, "2026-12-01T10:00:00Z")
    monkeypatch.setattr(cpu, "_spin", SpinSetting(1000, "default"))
    assert record.summary().endswith("OpenMP spin count 10000 from the next start")
    monkeypatch.setattr(cpu, "_spin", SpinSetting(10000, "tuned"))
    assert record.summary().endswith("OpenMP spin count 10000")
