"""mypy over the engine, the app, the command line, the speech server, tools/ and the app tests' fake synthesizer, as pyproject.toml [tool.mypy] configures it
(run_tests.sh runs it too): the synthesizer contract (engine/synthesis/contract.py) is held against the real
Synthesizer and the fake, and the app's use of the engine is checked, in every test run, not only in CI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_mypy_finds_no_type_errors():
    pytest.importorskip("mypy", reason="mypy comes with the test extra (pip install -e '.[test]')")
    run = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
