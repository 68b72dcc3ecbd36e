"""The OpenMP spin count given to libgomp at start-up, before ncnn is first imported (libgomp reads it once, at
load): the user's own setting, else this CPU's tuned count, else SPIN_COUNT (engine/runtime/cpu.py says why).

It sits above both cpu.py (the CPU facts, and what libgomp was given) and tuning.py (the record holding the tuned
count), which therefore do not import each other's way back."""

from __future__ import annotations

import os

from .cpu import (
    OPENMP_CHOICES,
    SPIN_COUNT,
    SpinSetting,
    cpu_model,
    ncnn_version,
    physical_cores,
    set_spin,
    usable_cpus,
)
from .tuning import stored_spin_count


def configure_openmp() -> SpinSetting:
    """Set the OpenMP spin count unless the user chose otherwise: this CPU's tuned count (the newest tuning record
    measured on it), else SPIN_COUNT. Effective only before ncnn is imported (libgomp reads it once, at load)."""
    if any(key in os.environ for key in OPENMP_CHOICES):
        value = os.environ.get("GOMP_SPINCOUNT", "")
        setting = SpinSetting(int(value) if value.isdigit() and "OMP_WAIT_POLICY" not in os.environ else None, "user")
    else:
        tuned = stored_spin_count(cpu_model(), physical_cores(), usable_cpus(), ncnn_version())
        setting = SpinSetting(int(SPIN_COUNT), "default") if tuned is None else SpinSetting(tuned, "tuned")
        os.environ["GOMP_SPINCOUNT"] = str(setting.count)
    set_spin(setting)
    return setting
