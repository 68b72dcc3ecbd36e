"""scripts/setup_venv.sh (sourced by studio.sh and qwen3tts.sh) installs the app again when pyproject.toml changed
since the last install: a checkout pulled onto an older .venv otherwise misses a new library or a new package of
the app (the qwen3tts command then stops with a traceback). Run in a copy with a stand-in .venv whose pip only
notes that it ran."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _checkout(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "setup_venv.sh", repo / "scripts")
    (repo / "pyproject.toml").write_text('[project]\nname = "x"\ndependencies = ["numpy"]\n')
    bin_ = repo / ".venv" / "bin"
    bin_.mkdir(parents=True)
    (bin_ / "python").write_text("#!/bin/sh\nexit 0\n")  # "import engine, qwen3tts_gui" succeeds
    (bin_ / "pip").write_text('#!/bin/sh\necho "$@" >> "$(dirname "$0")/../pip-calls"\n')
    (bin_ / "qwen3tts").write_text("from qwen3tts_cli.main import main\n")
    for f in ("python", "pip"):
        (bin_ / f).chmod(0o755)
    return repo


def _source(repo: Path) -> int:
    """How many times pip has been asked to install, after sourcing the script once more."""
    subprocess.run(["bash", "-c", ". scripts/setup_venv.sh"], cwd=repo, check=True, capture_output=True)
    calls = repo / ".venv" / "pip-calls"
    return len(calls.read_text().splitlines()) if calls.exists() else 0


def test_an_older_install_is_renewed_once_when_pyproject_changes(tmp_path):
    repo = _checkout(tmp_path)
    assert _source(repo) == 1  # an install made before the stamp existed: installed again, once
    assert _source(repo) == 1  # nothing changed: no install
    (repo / "pyproject.toml").write_text('[project]\nname = "x"\ndependencies = ["numpy", "starlette"]\n')
    assert _source(repo) == 2  # a new library: installed again
    assert _source(repo) == 2
