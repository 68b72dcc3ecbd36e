"""Converter part "text": tokenizer files, the projected text table, ids and the model fingerprint."""

from __future__ import annotations

import json

import numpy as np
import pytest

from engine.convert.checkpoint import Checkpoint
from engine.runtime.bundle import Bundle
from tests.bundles import MODELS, bundle_for, fixture_models

MODEL_LIST = fixture_models()


def reference_rows(model: str, ids: np.ndarray) -> np.ndarray:
    """text_projection(text_embedding(ids)) in float64 straight from the checkpoint."""
    ckpt = Checkpoint.open(MODELS / model)
    try:
        g = lambda n: ckpt.main.get(n).astype(np.float64)  # noqa: E731
        e = g("talker.model.text_embedding.weight")[ids]
        h = e @ g("talker.text_projection.linear_fc1.weight").T + g("talker.text_projection.linear_fc1.bias")
        h = h / (1 + np.exp(-h))
        return h @ g("talker.text_projection.linear_fc2.weight").T + g("talker.text_projection.linear_fc2.bias")
    finally:
        ckpt.close()


@pytest.mark.parametrize("model", MODEL_LIST)
def test_text_table_is_the_projected_embedding(model):
    fp32 = Bundle.open(bundle_for(model, "fp32", parts=["text"]))
    table = fp32.table("text_rows")
    assert table.dtype == np.float32
    ids = np.unique(np.r_[np.arange(0, table.shape[0], 7), table.shape[0] - 1])
    ref = reference_rows(model, ids)
    np.testing.assert_allclose(table[ids], ref, rtol=0, atol=1e-5)
    fp16 = Bundle.open(bundle_for(model, "fp16", parts=["text"]))
    t16 = fp16.table("text_rows")
    assert t16.dtype == np.float16 and t16.shape == table.shape
    np.testing.assert_allclose(t16[ids].astype(np.float32), ref, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("model", MODEL_LIST)
def test_ids_files_and_fingerprint(model):
    path = bundle_for(model, "fp32", parts=["text"])
    b = Bundle.open(path)
    info, cfg = b.part("text"), json.loads((MODELS / model / "config.json").read_text())
    tc = cfg["talker_config"]
    for key in ("im_start_token_id", "im_end_token_id", "tts_pad_token_id", "tts_bos_token_id", "tts_eos_token_id"):
        assert info[key] == cfg[key]
    for key in ("codec_pad_id", "codec_bos_id", "codec_eos_token_id", "codec_think_id", "codec_nothink_id",
                "codec_think_bos_id", "codec_think_eos_id"):
        assert info[key] == tc[key]
    assert info["codec_language_id"] == tc["codec_language_id"]
    assert info["tts_model_type"] == cfg["tts_model_type"] and info["tts_model_size"] == cfg["tts_model_size"]
    for name in ("vocab.json", "merges.txt", "tokenizer_config.json"):
        assert (path / "tokenizer" / name).read_bytes() == (MODELS / model / name).read_bytes()
    # voices made with the fp32 bundle are valid for the fp16 one (same encoders), not for another model
    fp16 = Bundle.open(bundle_for(model, "fp16", parts=["text"]))
    assert b.manifest["model_id"] and b.manifest["model_id"] == fp16.manifest["model_id"]
    others = [m for m in fixture_models() if m != model]
    if others:
        other = Bundle.open(bundle_for(others[0], "fp32", parts=["text"]))
        assert other.manifest["model_id"] != b.manifest["model_id"]


@pytest.mark.parametrize("model", MODEL_LIST)
def test_the_text_part_is_one_typed_record_and_the_manifests_read_back_byte_identical(model):
    """TextPart: each fixture bundle's text part reads into the typed record and writes back to the same JSON bytes
    (so bundles converted before it open the same); a wrong-typed or missing value is one BundleError line."""
    from engine.errors import BundleError
    from engine.runtime.bundle import _Part
    from engine.runtime.manifest_parts import TextPart

    stored = Bundle.open(bundle_for(model, "fp32", parts=["text"])).manifest["parts"]["text"]
    part = TextPart.from_manifest(stored)
    assert json.dumps(part.to_manifest()) == json.dumps(stored)
    assert part.id("codec_eos_token_id") == stored["codec_eos_token_id"] and part.hidden == stored["hidden"]
    for key, bad, says in [("text_vocab", "151936", "'text_vocab' is not a whole number"),
                           ("max_position_embeddings", 0, r"context length \(max_position_embeddings\) is 0, not 256-"),
                           ("split_regex", 2, "'split_regex' is not a name"),
                           ("spk_id", {"a": "x"}, "'spk_id' is not a table of token ids"),
                           ("tts_pad_token_id", -1, "'tts_pad_token_id' is -1, not a count")]:
        with pytest.raises(BundleError, match=says) as caught:
            TextPart.from_manifest({**stored, key: bad})
        assert "\n" not in str(caught.value)
    with pytest.raises(BundleError, match="'codec_bos_id'") as caught:
        TextPart.from_manifest(_Part.wrap({k: v for k, v in stored.items() if k != "codec_bos_id"}, "at"))
    assert "\n" not in str(caught.value)
