"""Damaged values of the bundle manifest's typed parts (engine/runtime/manifest_parts.py) where the engine reads
them: each is one line naming the bundle, the part and the value, before any work starts and with nothing changed.
Each part's own reader is tested value by value beside its network (tests/test_talker.py, test_codec_decoder.py,
test_codec_encoder.py, test_speaker.py, test_convert_text.py); here, the readers that are not networks."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from engine.convert import convert_checkpoint
from engine.errors import BundleError
from engine.runtime.bundle import Bundle
from engine.runtime.manifest_parts import TalkerPart
from tests.bundles import MODELS, fixture_models

from .conftest import run_cli


def _edit_manifest(path: Path, change) -> bytes:
    manifest = json.loads((path / "manifest.json").read_text())
    change(manifest)
    data = json.dumps(manifest).encode()
    (path / "manifest.json").write_bytes(data)
    return data


@pytest.fixture(scope="module")
def old_q8(tmp_path_factory) -> Path:
    """An 8-bit bundle as converted before the 8-bit check (no record)."""
    return convert_checkpoint(MODELS / fixture_models()[0], tmp_path_factory.mktemp("q8") / "old", "q8", check=False)


@pytest.mark.parametrize("key, bad", [("promoted_fp32_layers", 3), ("tables", "codec")])
def test_the_8bit_check_refuses_a_damaged_talker_part_before_measuring(old_q8, tmp_path, monkeypatch, capsys, key,
                                                                       bad):
    """A wrong-typed list of fp32-stored Linears was a TypeError after minutes of measuring."""
    monkeypatch.setenv("QWEN3TTS_MODELS_DIR", str(tmp_path))
    bundle = tmp_path / "old"
    shutil.copytree(old_q8, bundle)
    before = _edit_manifest(bundle, lambda m: m["parts"]["talker"].__setitem__(key, bad))
    with pytest.raises(BundleError, match=rf"its 'talker' part: '{key}' is not") as caught:
        Bundle.open(bundle).record(TalkerPart)
    assert str(bundle) in str(caught.value) and "\n" not in str(caught.value)
    code, err = run_cli(capsys, "models", "check", "old", "--checkpoint", MODELS / fixture_models()[0])
    lines = err.strip().splitlines()
    assert code != 0 and len(lines) == 1 and f"'{key}'" in lines[0] and "Traceback" not in err, err
    assert (bundle / "manifest.json").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old"]  # no work folder left
