"""Live oracle tier: regenerate the fixtures with the official qwen-tts (venv with the `reference` extra)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "reference: needs torch and the official qwen-tts package (live oracle tier)")


def _make_fixtures(out: Path, steps: str) -> None:
    """Run tests/reference/make_fixtures.py (fresh process, offline, CPU); fail with its output tail."""
    # a broken reference environment fails the tier, never skips it (found, not imported: qwen_tts needs the
    # oracle's torchaudio stand-in, which make_fixtures.py installs in its own process)
    missing = [name for name in ("torch", "qwen_tts", "transformers") if importlib.util.find_spec(name) is None]
    if missing:
        pytest.fail(f"The reference environment lacks {', '.join(missing)}; run ./run_tests.sh to install it.",
                    pytrace=False)
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    t0 = time.time()
    proc = subprocess.run(
        [sys.executable, str(REPO / "tests" / "reference" / "make_fixtures.py"), "--out", str(out), "--steps", steps],
        env=env, capture_output=True, text=True, timeout=1200,
    )
    if proc.returncode != 0:
        pytest.fail(f"make_fixtures.py failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    print(f"\nmake_fixtures.py --steps {steps} took {time.time() - t0:.1f}s")


@pytest.fixture(scope="session")
def rebuilt_models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny checkpoints built again from their seeds (compared with the committed ones)."""
    out = tmp_path_factory.mktemp("models")
    _make_fixtures(out, "models")
    return out


@pytest.fixture(scope="session")
def regenerated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The outputs made again by the official code from the committed checkpoints.

    The committed checkpoints, not rebuilt ones: torch's random initialisation is not bit-stable across CPU
    instruction sets (a bf16 weight can land one step apart), and outputs of a slightly different model would
    say nothing about the official code's outputs."""
    out = tmp_path_factory.mktemp("fixtures")
    shutil.copytree(REPO / "tests" / "fixtures" / "models", out / "models")
    _make_fixtures(out, "outputs")
    return out
