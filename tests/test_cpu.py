"""OpenMP set-up before ncnn loads, and the CPU facts the thread defaults come from."""

from __future__ import annotations

import os
import subprocess
import sys

from engine.runtime import cpu


def _run(code: str, **env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "GOMP_"))}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={**clean, **env}, check=True)
    return out.stdout.strip()


def test_engine_import_sets_wait_policy_before_ncnn_loads():
    # the policy must be in the environment by the time the first engine module imports ncnn
    code = ("import sys, os, builtins\n"
            "seen = []\n"
            "real = builtins.__import__\n"
            "def spy(name, *a, **k):\n"
            "    if name == 'ncnn' and not seen: seen.append(os.environ.get('OMP_WAIT_POLICY'))\n"
            "    return real(name, *a, **k)\n"
            "builtins.__import__ = spy\n"
            "import qwen3tts_cli.main, engine.synthesis.synthesizer\n"
            "print(seen[0] if seen else 'ncnn not imported')")
    assert _run(code) == "PASSIVE"


def test_user_choice_is_kept():
    assert _run("import os, engine; print(os.environ['OMP_WAIT_POLICY'])", OMP_WAIT_POLICY="ACTIVE") == "ACTIVE"


def test_core_counts_are_sane():
    assert 1 <= cpu.physical_cores() <= cpu.usable_cpus()
    assert cpu.cpu_model().strip()
