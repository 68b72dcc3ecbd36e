"""Damaged bundles that used to get through: a manifest precision of "q3" gave a traceback (a bare ValueError from
the net options), and a manifest whose file list is empty skipped every size and checksum check, so a .param
with a layer three times as wide (RMSNorm 192 -> 576) loaded and "spoke" noise with exit 0. Each network's layer
shapes are now checked against the config when the bundle opens, whatever the manifest lists."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from engine.errors import BundleError
from engine.runtime.bundle import Bundle
from tests.bundles import bundle_for

from .conftest import REF, one_line, run_cli


@pytest.fixture(scope="module", params=["fp32", "q8"])
def bundle(request) -> Path:
    return bundle_for("tiny06b", request.param)


@pytest.fixture
def unlisted(bundle, tmp_path) -> Path:
    """A copy of the bundle whose manifest lists no files (no size or checksum covers any of them)."""
    dest = tmp_path / "bundle"
    shutil.copytree(bundle, dest)
    manifest = json.loads((dest / "manifest.json").read_text())
    manifest["files"] = {}
    (dest / "manifest.json").write_text(json.dumps(manifest))
    return dest


def widen(param: Path, kind: str, key: str = "0", times: int = 3, nth: int = 0) -> str:
    """Make the nth `kind` layer's parameter `key` `times` as large; returns the layer's name."""
    lines = param.read_text().splitlines()
    found = [i for i, line in enumerate(lines) if line.startswith(kind + " ")]
    i = found[nth]
    lines[i] = re.sub(rf"(?<= ){key}=(\d+)", lambda m: f"{key}={int(m.group(1)) * times}", lines[i], count=1)
    param.write_text("\n".join(lines) + "\n")
    return lines[i].split()[1]


def synth(capsys, bundle: Path, out: Path) -> tuple[int, str]:
    return run_cli(capsys, "synth", "--model", bundle, "--text", "Hello.", "-o", out, "--greedy", "--max-frames",
                   "2", "--language", "english", "--ref", REF, "--x-vector-only", "--threads", "1")


def test_an_unlisted_but_intact_bundle_still_opens(unlisted):
    Bundle.open(unlisted)


@pytest.mark.parametrize("graph, kind, key, nth", [
    ("talker", "RMSNorm", "0", 0),
    ("talker", "RMSNorm", "0", 1),  # a head-wide norm (q_norm)
    ("code_predictor", "RMSNorm", "0", 0),
    ("codec_decoder", "RMSNorm", "0", 0),
    ("codec_decoder", "LayerNorm", "0", 0),
    ("codec_encoder_tf", "LayerNorm", "0", 0),
], ids=lambda v: str(v))
def test_a_layer_wider_than_the_config_is_refused_at_open(unlisted, capsys, tmp_path, graph, kind, key, nth):
    layer = widen(unlisted / f"{graph}.param", kind, key, nth=nth)
    with pytest.raises(BundleError) as e:
        Bundle.open(unlisted)
    message = str(e.value)
    assert f"{graph}.param, layer {layer}" in message and "width" in message and "\n" not in message, message
    code, err = synth(capsys, unlisted, tmp_path / "a.wav")
    assert code == 2 and f"{graph}.param" in one_line(err) and not (tmp_path / "a.wav").exists()


def test_a_linear_layer_of_another_width_is_refused(unlisted, bundle):
    kind = "Gemm" if "q8" in bundle.name else "InnerProduct"
    key = "8" if kind == "Gemm" else "0"
    layer = widen(unlisted / "talker.param", kind, key)
    with pytest.raises(BundleError, match=rf"talker\.param, layer {layer}: its output width"):
        Bundle.open(unlisted)


def test_a_missing_attention_layer_is_refused(unlisted):
    param = unlisted / "code_predictor.param"
    lines = param.read_text().splitlines()
    param.write_text("\n".join(line.replace("SDPA ", "Noop ", 1) if line.startswith("SDPA ") else line
                               for line in lines[:2] + lines[2:]) + "\n")
    with pytest.raises(BundleError, match=r"code_predictor\.param: it has 0 attention layers; the config has"):
        Bundle.open(unlisted)


@pytest.mark.parametrize("precision", ["q3", 8, None, "fp32 " * 1000])
def test_an_unknown_precision_is_one_line(unlisted, capsys, tmp_path, precision):
    manifest = json.loads((unlisted / "manifest.json").read_text())
    manifest["precision"] = precision
    (unlisted / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(BundleError, match="its precision .* is not one of fp32, fp16, bf16, q8"):
        Bundle.open(unlisted)
    code, err = synth(capsys, unlisted, tmp_path / "a.wav")
    line = one_line(err)
    assert code == 2 and "precision" in line and len(line) < 400


# the outlier channels a q8 bundle splits off its Linears (engine/convert/q8_split.py), damaged
SPLIT_DAMAGE = [
    ("not a table", [1, 2]), ("no such Linear", {"talker.99.qkv": [1]}), ("not a Linear", {"../etc": [1]}),
    ("a channel past the input", {"talker.0.qkv": [64]}), ("negative", {"talker.0.o": [-1]}),
    ("not ascending", {"talker.0.down": [5, 2]}), ("twice", {"talker.0.down": [2, 2]}),
    ("a truth value", {"talker.0.down": [True]}), ("a number as text", {"talker.head": ["3"]}),
    ("empty", {"code_predictor.head.0": []}), ("a head past the groups", {"code_predictor.head.15": [1]}),
    ("not a list", {"talker.0.qkv": 3}),
]


@pytest.mark.parametrize("why, value", SPLIT_DAMAGE, ids=[w for w, _ in SPLIT_DAMAGE])
def test_damaged_split_channels_are_refused_with_one_line(tmp_path, capsys, why, value):
    from engine.nets.talker import talker_part

    source = bundle_for("tiny06b", "q8")
    dest = tmp_path / "bundle"
    shutil.copytree(source, dest)
    manifest = json.loads((dest / "manifest.json").read_text())
    manifest["parts"]["talker"]["split_channels"] = value
    (dest / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(BundleError) as err:
        talker_part(Bundle.open(dest))
    assert "split_channels" in str(err.value) and "\n" not in str(err.value)
    code, text = synth(capsys, dest, tmp_path / "out.wav")
    assert code != 0 and one_line(text) and "Traceback" not in text


def test_split_channels_as_written_are_read_back():
    from engine.runtime.manifest_parts import TalkerPart

    part = Bundle.open(bundle_for("tiny06b", "q8")).part("talker")
    info = dict(part) | {"split_channels": {"talker.0.qkv": [1, 63], "code_predictor.head.14": [0]}}
    read = TalkerPart.from_manifest(info)
    assert read.split_channels == {"talker.0.qkv": (1, 63), "code_predictor.head.14": (0,)}
    assert read.to_manifest()["split_channels"] == info["split_channels"]
    assert TalkerPart.from_manifest(part).split_channels == {}  # a bundle from before: none
