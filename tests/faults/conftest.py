"""Shared pieces of the fault suite: a small real disk, the fixture checkpoint, the CLI runner."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from qwen3tts_cli.main import main
from tests.bundles import MODELS, fixture_models

ROOT = Path(__file__).resolve().parents[2]
REF = ROOT / "tests" / "fixtures" / "audio" / "en_24k_mono_2s.wav"


@pytest.fixture
def checkpoint() -> Path:
    """A fixture checkpoint folder (read-only use: copy it before changing anything)."""
    return MODELS / fixture_models()[0]  # the fixtures are committed: none at all fails, never skips


@pytest.fixture
def small_disk(tmp_path):
    """small_disk(kib) -> a folder on a tmpfs of that size (a real full disk); skips where mounting is not
    allowed (not root, no tmpfs)."""
    mounts = []

    def make(kib: int) -> Path:
        where = tmp_path / f"disk{len(mounts)}"
        where.mkdir()
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={kib}k", "tmpfs", str(where)],
                           capture_output=True)
        if r.returncode != 0:
            pytest.skip("cannot mount a small tmpfs here (needs root)")
        mounts.append(where)
        return where

    yield make
    for where in mounts:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def run_cli(capsys, *args) -> tuple[int, str]:
    """(exit code, stderr) of `qwen3tts ARGS` run in this process."""
    code = main([str(a) for a in args])
    return code, capsys.readouterr().err


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("qwen3tts: ") and "Traceback" not in err, err
    return lines[0]
