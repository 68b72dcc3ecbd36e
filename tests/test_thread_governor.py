"""The per-network thread governor, on a simulated clock (speed itself is never asserted)."""

from __future__ import annotations

from engine.runtime.thread_governor import MAX_GAP, ThreadGovernor


class Machine:
    """Call cost per thread count; the governor reads this clock."""

    def __init__(self, cost: dict[int, float]):
        self.cost, self.now = cost, 0.0

    def clock(self) -> float:
        return self.now

    def run(self, gov: ThreadGovernor, calls: int) -> list[int]:
        used = []
        for _ in range(calls):
            n = gov.start()
            self.now += self.cost[n]
            gov.stop()
            used.append(n)
        return used


def test_quiet_machine_keeps_all_threads_and_rarely_tries_one():
    m = Machine({2: 0.10, 1: 0.17})
    gov = ThreadGovernor(2, clock=m.clock)
    used = m.run(gov, 600)
    assert gov.current == 2
    assert used.count(1) <= 3 + 600 // MAX_GAP  # tries back off to one call in MAX_GAP


def test_busy_machine_moves_to_one_thread_and_back_when_load_ends():
    m = Machine({2: 1.0, 1: 0.2})
    gov = ThreadGovernor(2, clock=m.clock)
    used = m.run(gov, 10)
    assert gov.current == 1 and used[-1] == 1  # after the first try
    m.run(gov, 300)
    assert gov.current == 1
    m.cost = {2: 0.10, 1: 0.17}  # the other programs finished
    used = m.run(gov, MAX_GAP + 2)
    assert gov.current == 2 and used[-1] == 2


def test_one_thread_or_fixed_never_changes():
    m = Machine({1: 0.1, 4: 5.0})
    assert set(m.run(ThreadGovernor(1, clock=m.clock), 50)) == {1}
    assert set(m.run(ThreadGovernor(4, adaptive=False, clock=m.clock), 50)) == {4}


def test_sudden_load_is_noticed_within_a_few_calls():
    m = Machine({2: 0.10, 1: 0.17})
    gov = ThreadGovernor(2, clock=m.clock)
    m.run(gov, 400)  # tries have backed off to one in MAX_GAP
    m.cost = {2: 1.0, 1: 0.3}
    used = m.run(gov, 4)
    assert gov.current == 1 and used[-1] == 1


def test_a_tuned_start_count_still_moves_to_the_other_end():
    # tuned on a busy machine: one thread first, all cores once the machine is quiet and they are faster
    m = Machine({4: 0.10, 1: 0.17})
    gov = ThreadGovernor(4, clock=m.clock, start=1)
    assert gov.choices == [1, 4] and gov.current == 1
    used = m.run(gov, 10)
    assert used[0] == 1 and gov.current == 4
    # tuned at two of four cores: two first, one under load
    m = Machine({2: 1.0, 1: 0.2, 4: 9.9})
    gov = ThreadGovernor(4, clock=m.clock, start=2)
    assert gov.choices == [2, 1]
    m.run(gov, 10)
    assert gov.current == 1
    assert ThreadGovernor(2, start=5).choices == [2, 1]  # a start above the cores is the cores


class FakeLoad:
    """Other programs' CPU use as the governor reads it (engine/runtime/cpu_load.py CpuLoad)."""

    def __init__(self, other: float | None, cpus: int = 2):
        self.other, self.cpus = other, cpus

    def other_cores(self) -> float | None:
        return self.other


def test_other_programs_on_the_cores_mean_one_thread_at_once_and_no_tries():
    # timings alone would keep two threads here (two look faster), and every try under load is the slowest call
    m = Machine({2: 0.10, 1: 0.17})
    load = FakeLoad(0.0)
    gov = ThreadGovernor(2, clock=m.clock, load=load)
    m.run(gov, 50)
    assert gov.current == 2
    load.other = 1.0  # one busy process on a 2-core machine
    used = m.run(gov, 300)
    assert used[0] == 1 and set(used) == {1} and gov.current == 1


def test_when_other_programs_let_go_the_upper_count_is_tried_at_the_next_call():
    m = Machine({2: 0.10, 1: 0.17})
    load = FakeLoad(1.0)
    gov = ThreadGovernor(2, clock=m.clock, load=load)
    m.run(gov, 300)  # without the load reading, the next try would be up to MAX_GAP calls away
    load.other = 0.1
    used = m.run(gov, 2)
    assert used == [2, 2] and gov.current == 2


def test_between_busy_and_quiet_or_unknown_the_timings_decide():
    for other in (0.4, None):  # between QUIET and BUSY; not readable (not Linux)
        m = Machine({2: 1.0, 1: 0.2})
        gov = ThreadGovernor(2, clock=m.clock, load=FakeLoad(other))
        used = m.run(gov, 10)
        assert 2 in used and gov.current == 1  # it had to try to find out


def test_spare_cores_are_not_counted_as_crowded():
    # 8 CPUs, generation on 2: six busy cores elsewhere leave ours free
    m = Machine({2: 0.10, 1: 0.17})
    gov = ThreadGovernor(2, clock=m.clock, load=FakeLoad(5.9, cpus=8))
    m.run(gov, 20)
    assert gov.current == 2
    gov._load = FakeLoad(6.6, cpus=8)
    assert m.run(gov, 1) == [1]


def test_a_limit_caps_the_count_and_teaches_nothing():
    m, plain = Machine({2: 0.10, 1: 5.0}), Machine({2: 0.10, 1: 5.0})  # one thread would look terrible if timed
    gov, same = ThreadGovernor(2, clock=m.clock), ThreadGovernor(2, clock=plain.clock)
    m.run(gov, 21)
    plain.run(same, 21)
    gov.limit = 1
    assert set(m.run(gov, 50)) == {1}
    gov.limit = None
    assert m.run(gov, 40) == plain.run(same, 40)  # as if the limited calls had not happened
    gov.limit = 4  # above the upper count: no effect
    assert m.run(gov, 1) == plain.run(same, 1)
