"""A stand-in CPU for the self-tuner's tests (tests/test_self_tuning.py, tests/test_spin_tuning.py): the machine's
load as the tuner reads it, timings injected per candidate, and a run clock that each measurement moves by its
injected time. The fixtures that use them (tuning_cache, tuning_q8) are in tests/conftest.py."""

from __future__ import annotations

from collections.abc import Callable

from engine.synthesis.self_tuning import STREAM_FRAMES

Timing = Callable[[str, object, float], float]


def quiet(monkeypatch, load: float = 0.25) -> None:
    """The machine's load as the tuner and the synthesizer read it (tests run beside other jobs)."""
    monkeypatch.setattr("os.getloadavg", lambda: (load, load, load))


def cpu(talker: dict, code_predictor: dict, stream=None, decode=None) -> Timing:
    """Injected timings in ms per candidate thread count (missing counts: very slow)."""
    figures = {"talker": talker, "code predictor": code_predictor, "stream": stream or {}, "decode": decode or {}}

    def timing(part, candidate, seconds):
        return figures[part].get(candidate, 1e6) / 1000

    return timing


def on_the_run_clock(timing: Timing) -> tuple[Timing, Callable[[], float]]:
    """`timing` whose every measurement takes its injected time on the run's clock (a streamed one, one per frame
    it streams), and that clock."""
    now = [0.0]

    def timed(part, candidate, seconds):
        value = timing(part, candidate, seconds)
        now[0] += value * (STREAM_FRAMES if part == "stream" else 1)
        return value

    return timed, lambda: now[0]


ONE_WINS = cpu({1: 25, 2: 44}, {1: 68, 2: 117})  # the AMD EPYC: one int8 thread, 93 vs 161 ms per frame
TWO_WIN = cpu({1: 55, 2: 40}, {1: 140, 2: 107})  # the Intel Xeon: two, 145 vs 191-224 ms per frame
BUDGET = 1.0  # seconds: the injected timings decide; the minimum rounds are all a test needs
TIME_CAP = 120.0  # the run's hard stop, far off: every candidate is timed at least once (a loaded machine included)
