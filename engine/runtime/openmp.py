"""A per-thread limit on the OpenMP teams ncnn opens, for the layers whose thread count is fixed at load.

ncnn's int8 Gemm packs its weights for the thread count the net was loaded with and then always opens a team of
that size (a later opt.num_threads only prints a warning). libgomp bounds every team by its dynamic-threads rule
when dyn-var is on, and that rule never gives more than nthreads-var (libgomp's gomp_resolve_num_threads and
gomp_dynamic_max_threads): with dyn-var on and nthreads-var 1, every region the calling thread opens runs on that
thread alone. Both are per-thread settings (OpenMP ICVs), so the generation thread can run a net loaded for two
threads on one without touching the decoder's thread and without a second copy of the weights. Results do not
change: the int8 products are exact integer sums whatever the team.

Measured on the full-size 0.6B q8 bundle loaded for two threads (AMD EPYC, 2 cores, quiet): limited to one thread,
talker 19-20 ms and code predictor 48-52 ms per frame with one CPU busy, as fast as a net loaded for one thread
(19.7 / 53.0); unlimited, 15-17 / 35-41 ms with two CPUs busy; the codes were identical.

Only libgomp (the ncnn wheels for Linux) is driven this way; elsewhere limited() is False and int8 nets keep the
count they were loaded with (engine/runtime/step_graph.py).
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path


@cache
def _libgomp() -> ctypes.CDLL | None:
    """The libgomp ncnn runs on (found among the libraries this process has loaded), or None."""
    import ncnn  # noqa: F401  (loads ncnn's OpenMP runtime)

    if not sys.platform.startswith("linux"):
        return None
    try:
        maps = Path("/proc/self/maps").read_text(errors="replace")
    except OSError:
        return None
    paths = {line.split(None, 5)[-1] for line in maps.splitlines() if "libgomp" in line and "/" in line}
    # the wheel's own copy first (ncnn.libs/): another library may have brought a second libgomp along
    for path in sorted(paths, key=lambda p: ("ncnn" not in p, p)):
        try:
            lib = ctypes.CDLL(path)
            lib.omp_get_dynamic.restype = lib.omp_get_max_threads.restype = ctypes.c_int
            lib.omp_set_dynamic.argtypes = lib.omp_set_num_threads.argtypes = [ctypes.c_int]
        except (OSError, AttributeError):
            continue
        return lib
    return None


def limited() -> bool:
    """True when teams can be limited per thread here (libgomp found)."""
    return _libgomp() is not None


@contextmanager
def team_limit(threads: int | None) -> Iterator[None]:
    """Every OpenMP team the calling thread opens inside the block has at most `threads` threads (None or where
    limited() is False: no limit). The thread's previous settings are restored afterwards."""
    lib = _libgomp() if threads else None
    if lib is None:
        yield
        return
    dynamic, most = lib.omp_get_dynamic(), lib.omp_get_max_threads()
    lib.omp_set_dynamic(1)
    lib.omp_set_num_threads(max(1, int(threads or 1)))
    try:
        yield
    finally:
        lib.omp_set_num_threads(most)
        lib.omp_set_dynamic(dynamic)


def thread_settings() -> tuple[int, int] | None:
    """(dyn-var, nthreads-var) of the calling thread, or None without libgomp (tests)."""
    lib = _libgomp()
    return None if lib is None else (lib.omp_get_dynamic(), lib.omp_get_max_threads())
