"""How many cores other programs are using right now: what the thread governor reads before it tries more threads.

Timing alone finds out that two threads lose to one on a busy machine only by trying two, and a try there is
the slowest call there is: every parallel region of the call waits for a thread the OS has handed to another
program (full-size 0.6B q8, AMD EPYC, 2 cores, two busy processes: tries of two threads took 0.6-1.8 s per call
against 50-150 ms on one). The kernel already counts every CPU's busy time (/proc/stat) and this process's own
(/proc/self/stat); the difference is the other programs'. Linux only: elsewhere other_cores() is None and the
governor goes by its timings alone.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

# other programs' use of the cores a thread count needs, in cores: above BUSY they hold them, below QUIET they do
# not (2 cores, one busy process: 0.9-1.0; quiet with a desktop running: 0.0-0.2)
BUSY, QUIET = 0.5, 0.25
MIN_INTERVAL = 0.1  # seconds between readings: /proc counts in 10 ms ticks, so shorter says little
WINDOW = 0.5  # seconds of readings the figure is taken over


def _read_proc() -> tuple[float, float, int] | None:
    """(busy seconds of all CPUs, busy seconds of this process, CPU count) since boot, or None without /proc."""
    try:
        stat = Path("/proc/stat").read_text().splitlines()
        own = Path("/proc/self/stat").read_text()
    except OSError:
        return None
    try:
        fields = [int(v) for v in stat[0].split()[1:]]  # user nice system idle iowait irq softirq steal ...
        cpus = sum(1 for line in stat if line.startswith("cpu") and line[3:4].isdigit())
        mine = own.rsplit(")", 1)[1].split()  # after the command name, which may contain spaces
        own_ticks = int(mine[11]) + int(mine[12])  # utime, stime (fields 14 and 15)
    except (IndexError, ValueError):
        return None
    busy = sum(fields[:8]) - fields[3] - fields[4]  # everything but idle and iowait, guest time already in user
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    return busy / tick, own_ticks / tick, max(1, cpus)


class CpuLoad:
    """Other programs' CPU use in cores, averaged over the last WINDOW seconds, read at most every MIN_INTERVAL."""

    def __init__(self, read: Callable[[], tuple[float, float, int] | None] = _read_proc,
                 clock: Callable[[], float] = time.monotonic):
        self._read, self._clock = read, clock
        self._samples: deque[tuple[float, float, float]] = deque()  # (time, all busy, own busy)
        self.cpus = 0
        self._lock = threading.Lock()  # the generation thread and the decoder's thread both read it

    def other_cores(self) -> float | None:
        """Cores' worth of CPU time other programs used lately; None where it cannot be read or not yet known."""
        with self._lock:
            return self._other_cores()

    def _other_cores(self) -> float | None:
        now = self._clock()
        if not self._samples or now - self._samples[-1][0] >= MIN_INTERVAL:
            reading = self._read()
            if reading is None:
                return None
            busy, own, self.cpus = reading
            self._samples.append((now, busy, own))
            while len(self._samples) > 2 and now - self._samples[1][0] >= WINDOW:
                self._samples.popleft()
        if len(self._samples) < 2:
            return None
        (t0, busy0, own0), (t1, busy1, own1) = self._samples[0], self._samples[-1]
        if t1 - t0 < MIN_INTERVAL:
            return None
        return max(0.0, ((busy1 - busy0) - (own1 - own0)) / (t1 - t0))


_shared: CpuLoad | None = None


def shared_cpu_load() -> CpuLoad:
    """The process's one reader (the governors of all networks read the same figure)."""
    global _shared
    if _shared is None:
        _shared = CpuLoad()
    return _shared


def crowded(load: CpuLoad | None, threads: int) -> bool | None:
    """True while other programs use the cores `threads` threads need, False while they leave them free, None when
    unknown or in between."""
    if load is None or threads <= 1:
        return None
    other = load.other_cores()
    if other is None:
        return None
    spare = max(0, load.cpus - threads)  # cores the count leaves to others
    if other >= spare + BUSY:
        return True
    return False if other <= spare + QUIET else None


def crowded_team(threads: int) -> int | None:
    """The team limit for a call on `threads` threads (engine/runtime/openmp.py): one thread while other programs
    hold the cores, else none."""
    return 1 if crowded(shared_cpu_load(), threads) else None
