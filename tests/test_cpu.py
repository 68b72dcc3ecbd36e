"""OpenMP set-up before ncnn loads, and the CPU facts the thread defaults come from."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from engine.runtime import cpu, openmp_setup

OPENMP_KEYS = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")
LIBGOMP_DEFAULT_SPIN = 300000  # libgomp's own spin count with no OMP_WAIT_POLICY (its env.c)


def _run(code: str, **env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "GOMP_"))}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={**clean, **env}, check=True)
    return out.stdout.strip()


# the OpenMP settings in the environment at the moment the first engine module imports ncnn (libgomp reads them
# once, when ncnn loads it), and again at the end
SPY = ("import os, json, builtins\n"
       f"keys = {OPENMP_KEYS!r}\n"
       "seen = []\n"
       "real = builtins.__import__\n"
       "def spy(name, *a, **k):\n"
       "    if name == 'ncnn' and not seen: seen.append({key: os.environ.get(key) for key in keys})\n"
       "    return real(name, *a, **k)\n"
       "builtins.__import__ = spy\n"
       "import qwen3tts_cli.main, engine.synthesis.synthesizer\n"
       "print(json.dumps([seen[0] if seen else 'ncnn not imported', {key: os.environ.get(key) for key in keys}]))")


def test_engine_import_sets_a_short_spin_before_ncnn_loads():
    at_import, after = json.loads(_run(SPY))
    assert at_import == {"OMP_WAIT_POLICY": None, "GOMP_SPINCOUNT": cpu.SPIN_COUNT}
    assert after == at_import
    assert 0 < int(cpu.SPIN_COUNT) < LIBGOMP_DEFAULT_SPIN  # shorter than libgomp's own, never "sleep at once"


@pytest.mark.parametrize("key, value", [("OMP_WAIT_POLICY", "ACTIVE"), ("OMP_WAIT_POLICY", "PASSIVE"),
                                        ("GOMP_SPINCOUNT", "1000")])
def test_a_users_openmp_choice_is_kept_and_nothing_is_added(key, value):
    at_import, after = json.loads(_run(SPY, **{key: value}))
    want = {k: (value if k == key else None) for k in OPENMP_KEYS}
    assert at_import == after == want


def test_configure_openmp_in_process(monkeypatch):
    for key in OPENMP_KEYS:
        monkeypatch.delenv(key, raising=False)
    openmp_setup.configure_openmp()
    assert {k: os.environ.get(k) for k in OPENMP_KEYS} == {"OMP_WAIT_POLICY": None, "GOMP_SPINCOUNT": cpu.SPIN_COUNT}
    assert cpu.openmp_settings() == f"GOMP_SPINCOUNT={cpu.SPIN_COUNT}"
    monkeypatch.delenv("GOMP_SPINCOUNT")
    monkeypatch.setenv("OMP_WAIT_POLICY", "passive")  # any value the user set stands, as they wrote it
    openmp_setup.configure_openmp()
    assert {k: os.environ.get(k) for k in OPENMP_KEYS} == {"OMP_WAIT_POLICY": "passive", "GOMP_SPINCOUNT": None}


def test_core_counts_are_sane():
    assert 1 <= cpu.physical_cores() <= cpu.usable_cpus()
    assert cpu.cpu_model().strip()
