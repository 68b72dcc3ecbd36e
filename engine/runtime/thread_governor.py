"""Per-network thread count chosen from measured call times, so a busy machine does not stall generation.

With every core free, a decode step is fastest on all of them. When other programs hold cores, each of the
hundreds of parallel regions in a step waits for a thread the OS has descheduled, and one thread becomes several
times faster than two (full-size chain of GEMVs at load average 14 on 2 cores: 34 ms on one thread, 300 ms on two).
The governor times each call at the current count and now and then tries the other count once; whichever has the
lower recent median is used. A losing try is repeated less and less often (every 8, 16, ... 128 calls), so a
steady machine pays for at most one slow call in 128; two calls in a row twice as slow as usual trigger a try at once, so a
busier machine is noticed within a frame or two, a quieter one within 128 calls.
Given a CpuLoad (engine/runtime/cpu_load.py), the governor also reads how many cores other programs use: while they
hold the cores the upper count needs it runs one thread at once and does not try more (on a busy machine a try is
the slowest call there is), and when they let go it tries the upper count at the next call.
ncnn reads opt.num_threads at every extractor creation for the layers these graphs use (checked: identical
results at 1 and 2 threads, no "load-time value" warning).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

from .cpu_load import CpuLoad, crowded

WINDOW = 5  # recent calls per thread count whose median decides
FIRST_TRY = 3  # calls before the first try of the other count
MIN_GAP, MAX_GAP = 8, 128  # calls between tries of the losing count
MARGIN = 0.9  # the other count must be 10 % faster to take over
SLOWDOWN = 2.0  # a call this many times slower than the recent median triggers a try at once


class ThreadGovernor:
    def __init__(self, max_threads: int, adaptive: bool = True, clock: Callable[[], float] = time.perf_counter,
                 start: int | None = None, load: CpuLoad | None = None):
        """Choices: `start` (default max_threads: the count measured fastest by the self-tuner, or all cores) and
        the other end, 1 or max_threads, so a count tuned on a busy machine can still move up when it is quiet.
        load: other programs' CPU use (None: timings alone decide)."""
        self._clock = clock
        self._load = load
        self.limit: int | None = None  # while set, calls use at most this many threads and are not timed
        self._untimed = False
        self._crowded_before = False
        self.max_threads = max(1, int(max_threads))
        first = min(self.max_threads, max(1, int(start))) if start else self.max_threads
        other = self.max_threads if first == 1 else 1
        self.choices = [first] + ([other] if other != first else [])
        self.adaptive = adaptive and len(self.choices) > 1
        self.current = first
        self._times: dict[int, deque[float]] = {n: deque(maxlen=WINDOW) for n in self.choices}
        self._calls = 0
        self._gap = MIN_GAP
        self._next_try = FIRST_TRY
        self._trying: int | None = None
        self._slow: list[float] = []
        self._t0 = 0.0

    def fixed(self) -> int:
        """Thread count for a call that is not timed (a prefill: its length differs from a step's)."""
        return self.current

    def start(self) -> int:
        """Thread count for the call about to run; call stop() when it is done."""
        self._trying = None
        self._untimed = self.limit is not None and self.limit < self.max_threads
        if self._untimed:  # a limit set by the caller (generation beside streamed decoding): nothing to learn
            return max(1, min(self.current, self.limit or 1))
        crowded = self._crowded() if self.adaptive else None
        if crowded:
            if self.current != 1:  # other programs hold the cores: one thread now, without a try
                self.current, self._gap = 1, MIN_GAP
                self._times[1].clear()
            self._next_try = max(self._next_try, self._calls + 1)  # and no try of more while they do
        elif crowded is False and self._crowded_before and self.current == 1:
            self._next_try = self._calls  # they let go: try the upper count now
        self._crowded_before = bool(crowded) or (self._crowded_before and crowded is None)
        if self.adaptive and self._calls >= self._next_try and not crowded:
            self._trying = next(n for n in self.choices if n != self.current)
            self._times[self._trying].clear()  # its old times may come from another load
        self._t0 = self._clock()
        return self._trying or self.current

    def _crowded(self) -> bool | None:
        """True while other programs use the cores the upper count needs, False while they leave them free, None
        when unknown or in between (timings decide)."""
        return crowded(self._load, self.max_threads)

    def stop(self) -> None:
        seconds = self._clock() - self._t0
        self._calls += 1
        if self._untimed:
            self._next_try += 1  # limited calls do not bring the next try closer
            return
        if not self.adaptive:
            return
        used = self._trying or self.current
        if self._trying is None:
            usual = _median(self._times[used])
            slow = usual is not None and len(self._times[used]) >= 3 and seconds > SLOWDOWN * usual
            self._slow = self._slow + [seconds] if slow else []
            if len(self._slow) == 2:  # two slow calls in a row: the machine got busier, try the other count now
                self._times[used].clear()
                self._times[used].extend(self._slow)
                self._slow = []
                self._next_try, self._gap = self._calls, MIN_GAP
            else:
                self._times[used].append(seconds)
            return
        self._times[used].append(seconds)
        other, mine = _median(self._times[self._trying]), _median(self._times[self.current])
        if mine is not None and other is not None and other < MARGIN * mine:
            self.current, self._gap = self._trying, MIN_GAP
        else:
            self._gap = min(MAX_GAP, self._gap * 2)
        self._next_try = self._calls + self._gap


def _median(values) -> float | None:
    if not values:
        return None
    s = sorted(values)
    return s[len(s) // 2]
