"""Bundles converted from the fixture checkpoints (tests/fixtures/models/<model>), once per test session.

    bundle_for("tiny06b", "fp32")                    every available part (engine.convert.convert_checkpoint)
    bundle_for("tiny06b", "fp16", parts=["talker"])  only the listed parts (faster; other parts may be unfinished)
Both return the bundle folder (a Path): Bundle.open() it, or pass it to the CLI.

Bundles live in one temporary folder removed at exit. Missing fixture checkpoints fail the test.
q8 bundles are the converter's plain 8-bit output, without the 8-bit check (which may keep some Linears fp32 and
needs seconds per bundle): tests/test_q8_check.py tests the check and the bundles it makes.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path

import pytest

from engine.convert import convert_checkpoint

FIXTURES = Path(__file__).resolve().parent / "fixtures"
MODELS = FIXTURES / "models"
OUTPUTS = FIXTURES / "outputs"

_built: dict[tuple[str, str, tuple[str, ...] | None], Path] = {}
_root: list[Path] = []


def fixture_models() -> list[str]:
    """Names of the fixture checkpoints. They are committed, so none at all fails the test (never a skip)."""
    names = sorted(p.name for p in MODELS.iterdir() if (p / "config.json").is_file()) if MODELS.is_dir() else []
    if not names:
        pytest.fail(f"no fixture checkpoints under {MODELS}; they are committed with the repository "
                    "(tests/reference/make_fixtures.py regenerates them)", pytrace=False)
    return names


def _tmp_root() -> Path:
    if not _root:
        root = Path(tempfile.mkdtemp(prefix="qwen3tts-test-bundles-"))
        atexit.register(shutil.rmtree, root, True)
        _root.append(root)
    return _root[0]


def convert_parts(src: Path, dest: Path, precision: str, parts: tuple[str, ...]) -> Path:
    return convert_checkpoint(src, dest, precision, overwrite=True, parts=list(parts), check=False)


def bundle_for(model: str, precision: str = "fp32", parts: Iterable[str] | None = None) -> Path:
    """The fixture checkpoint `model` converted at `precision` (cached for the session)."""
    key_parts = tuple(sorted(parts)) if parts is not None else None
    key = (model, precision, key_parts)
    if key not in _built:
        src = MODELS / model
        if not (src / "config.json").is_file():
            pytest.fail(f"the committed fixture model {model} is missing (tests/reference/make_fixtures.py makes it)",
                        pytrace=False)
        dest = _tmp_root() / f"{model}-{precision}-{'+'.join(key_parts) if key_parts else 'all'}"
        if key_parts is None:
            _built[key] = convert_checkpoint(src, dest, precision=precision, overwrite=True, check=False)
        else:
            _built[key] = convert_parts(src, dest, precision, key_parts)
    return _built[key]
