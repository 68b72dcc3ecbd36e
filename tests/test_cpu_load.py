"""Other programs' CPU use as the thread governor reads it, from injected /proc readings (and once from the real one)."""

from __future__ import annotations

import sys

import pytest

from engine.runtime import cpu_load
from engine.runtime.cpu_load import MIN_INTERVAL, CpuLoad, crowded


class Proc:
    """/proc/stat and /proc/self/stat as seconds: all CPUs' busy time and this process's, advanced by the test."""

    def __init__(self, cpus: int = 2):
        self.now, self.busy, self.own, self.cpus = 0.0, 0.0, 0.0, cpus

    def run(self, seconds: float, other: float, own: float) -> None:
        self.now += seconds
        self.busy += (other + own) * seconds
        self.own += own * seconds

    def read(self):
        return self.busy, self.own, self.cpus


def test_other_programs_cores_are_all_busy_time_minus_our_own():
    proc = Proc()
    load = CpuLoad(read=proc.read, clock=lambda: proc.now)
    assert load.other_cores() is None  # one reading says nothing yet
    proc.run(0.3, other=1.0, own=2.0)  # our two threads flat out beside one busy program
    assert load.other_cores() == pytest.approx(1.0)
    assert load.cpus == 2
    for _ in range(10):  # it lets go: the figure follows within the window
        proc.run(0.1, other=0.0, own=1.0)
        load.other_cores()
    assert load.other_cores() == pytest.approx(0.0, abs=1e-9)


def test_readings_closer_than_the_interval_reuse_the_last_figure():
    proc = Proc()
    calls = []
    load = CpuLoad(read=lambda: calls.append(1) or proc.read(), clock=lambda: proc.now)
    load.other_cores()
    proc.run(MIN_INTERVAL / 4, other=1.0, own=0.0)
    load.other_cores()
    assert len(calls) == 1


def test_no_proc_means_unknown():
    load = CpuLoad(read=lambda: None, clock=lambda: 0.0)
    assert load.other_cores() is None
    assert crowded(load, 2) is None and crowded(None, 2) is None


def test_crowded_counts_only_the_cores_a_thread_count_needs():
    proc = Proc(cpus=4)
    load = CpuLoad(read=proc.read, clock=lambda: proc.now)
    load.other_cores()
    proc.run(0.3, other=2.0, own=0.0)
    assert crowded(load, 2) is False  # two busy of four leave two free
    assert crowded(load, 4) is True
    assert crowded(load, 1) is None  # one thread opens no team: nothing to decide


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc is Linux's")
def test_the_real_proc_files_are_read():
    reading = cpu_load._read_proc()
    assert reading is not None
    busy, own, cpus = reading
    assert busy >= own >= 0 and cpus >= 1
