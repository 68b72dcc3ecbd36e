"""CPU facts and the OpenMP set-up that must happen before ncnn is first imported.

The ncnn wheel runs its parallel loops on libgomp, whose idle threads spin for a while between parallel regions
before they sleep. A decode step opens hundreds of small regions, so how long they spin decides two things.
Full-size 0.6B q8 generation on two threads, AMD EPYC, 2 cores, ms per frame (min / median of 15 frames,
alternating in one run; "busy": another program holding about one core):

| GOMP_SPINCOUNT | quiet-ish | busy |
|---|---|---|
| 0 (OMP_WAIT_POLICY=PASSIVE) | 131-143 | 215 |
| 300 | 109 / 120 | 101-106 / 105-119 |
| 1000 | 65 / 71 | 148-178 / 151-193 |
| 3000 | 64 / 73 | 252-317 / 315-354 |
| 30000 | 60 / 71 | 2290-2330 / 2425-2446 |
| one thread, for comparison | 71 / 88 | 73-77 / 83-88 |

A sleeping thread costs a wake-up per region; a spinning one burns the time slice its partner needs when another
program holds a core (and libgomp's default, 300000, took generation from 0.25 s to 5 s per frame at a load
average of 4). 1000 (about 10 microseconds) keeps nearly all of the quiet gain and bounds the busy loss at about
twice one thread's time; the thread governor (engine/runtime/thread_governor.py) moves generation to one thread,
which opens no team, as soon as other programs hold the cores (engine/runtime/cpu_load.py). libgomp cuts the spin
to 100 by itself while it runs more threads than there are CPUs. Figures: docs/performance.md, "Busy machines".

The best count is a property of the CPU: on a 2-vCPU Intel Xeon (Sapphire/Emerald Rapids class) 1000 was the main
loss (generation 95-105 ms/frame at 1000, 59-69 at 10000-100000, one thread 109-110). So 1000 is only the first
start's value: the self-tuner measures candidates in processes of their own (engine/synthesis/spin_tuning.py) and
keeps its choice in the tuning record, which configure_openmp() (openmp_setup.py) reads at the next start. A value the user set in
the environment (either variable) is kept.
"""

from __future__ import annotations

import multiprocessing
import os
import platform
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

# GOMP_SPINCOUNT until this CPU's tuning chose one (see the module docstring): chosen on the AMD EPYC, the safe end
# of the trade-off (a region gap of a few microseconds against a partner descheduled for milliseconds); how long
# an iteration takes, and so the best count, differs by CPU (the Intel Xeon's was 10000-100000)
SPIN_COUNT = "1000"
OPENMP_CHOICES = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")  # either one set by the user: their choice stands


@dataclass(frozen=True)
class SpinSetting:
    """The GOMP_SPINCOUNT this process's libgomp was given, and where it came from."""

    count: int | None  # None: the user's own OpenMP waiting settings (OMP_WAIT_POLICY, or a count not a number)
    source: str  # "user", "tuned" (this CPU's tuning record) or "default" (SPIN_COUNT)


_spin = SpinSetting(None, "default")


def set_spin(setting: SpinSetting) -> None:
    """Record what libgomp was given (engine/runtime/openmp_setup.py configure_openmp decides it)."""
    global _spin
    _spin = setting


def spin_setting() -> SpinSetting:
    """What configure_openmp() (engine/runtime/openmp_setup.py) gave libgomp in this process."""
    return _spin


def ncnn_version() -> str:
    """ncnn's version as the tuning key spells it (ncnn.__version__), read without importing ncnn."""
    try:
        return metadata.version("ncnn")
    except metadata.PackageNotFoundError:
        return "?"


def openmp_settings() -> str:
    """The OpenMP environment in effect, for benchmark headers."""
    keys = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "OMP_NUM_THREADS")
    text = " ".join(f"{k}={os.environ[k]}" for k in keys if k in os.environ) or "libgomp defaults"
    return text + (" (this CPU's tuning)" if _spin.source == "tuned" else "")


def usable_cpus() -> int:
    """Logical CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def physical_cores() -> int:
    """Physical cores available to this process (SMT siblings counted once); the default thread count."""
    logical = usable_cpus()
    cores = None
    if sys.platform.startswith("linux"):
        cores = _linux_cores()
    elif sys.platform == "darwin":
        cores = _sysctl_int("hw.physicalcpu")
    if not cores:
        return max(1, logical)
    return max(1, min(cores, logical))


def _linux_cores() -> int | None:
    try:
        cpus = os.sched_getaffinity(0)
    except (AttributeError, OSError):
        cpus = set(range(os.cpu_count() or 1))
    groups = set()
    for cpu in cpus:
        f = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list")
        try:
            groups.add(f.read_text().strip())
        except OSError:
            return None
    return len(groups) or None


def _sysctl_int(name: str) -> int | None:
    try:
        return int(subprocess.run(["sysctl", "-n", name], capture_output=True, text=True, timeout=2).stdout)
    except (OSError, ValueError, subprocess.SubprocessError):
        return None


def cpu_model() -> str:
    """The processor's marketing name, or the architecture when it cannot be read."""
    if sys.platform.startswith("linux"):
        try:
            for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
        except OSError:
            pass
    elif sys.platform == "darwin":
        try:
            out = subprocess.run(["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True, text=True,
                                 timeout=2).stdout.strip()
            if out:
                return out
        except (OSError, subprocess.SubprocessError):
            pass
    return platform.processor() or platform.machine() or "unknown CPU"


def load_average() -> str:
    """The 1/5/15-minute load averages, or a note where the OS has none (Windows)."""
    try:
        return " ".join(f"{v:.2f}" for v in os.getloadavg())
    except (AttributeError, OSError):
        return "n/a"


@contextmanager
def busy_processes(count: int) -> Iterator[None]:
    """`count` CPU-bound busy processes (a stand-in for other programs) for the duration of the block, each spinning
    before the block starts. Started with multiprocessing's spawn (the packaged app too, where sys.executable is the
    app); each stops by itself when this process is gone, so a killed caller never leaves one spinning."""
    ctx = multiprocessing.get_context("spawn")
    pipes = [ctx.Pipe(duplex=False) for _ in range(count)]
    procs = [ctx.Process(target=exec, args=(_SPIN_CODE, {"ready": send}), daemon=True, name="busy process")
             for _, send in pipes]
    started = []
    try:
        for p in procs:
            p.start()
            started.append(p)
        for receive, send in pipes:  # spinning before the block starts (a process takes a few hundred ms to start)
            send.close()
            try:
                if receive.poll(BUSY_START_SECONDS):
                    receive.recv()
            except EOFError:  # it ended at once: the load is lighter than asked
                pass
            receive.close()
        yield
    finally:
        for p in started:
            stop_process(p)


BUSY_START_SECONDS = 5.0  # the most a busy process is waited for
# a busy process: says it runs, then spins until its parent is gone
_SPIN_CODE = "import os\nparent = os.getppid()\nready.send(1)\nready.close()\nwhile os.getppid() == parent: pass"


def stop_process(proc) -> None:
    """Stop a multiprocessing process (terminate, then kill after 2 s) and release it."""
    if proc.is_alive():
        proc.terminate()
        proc.join(2)
        if proc.is_alive():
            proc.kill()
    proc.join()
    proc.close()


def has_bf16_dot_product() -> bool:
    """True where ncnn's convolutions have native bf16 kernels (x86 AVX512-BF16); elsewhere ncnn emulates bf16
    storage, correct but slower than fp32. Read from /proc/cpuinfo (Linux); False where it cannot be read."""
    return "avx512_bf16" in _cpu_flags()


def _cpu_flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.partition(":")[2].split())
    return set()
