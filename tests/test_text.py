"""engine.text: ids identical to the official processor (fixture tokenizer.npz), templates, split rule choice."""

from __future__ import annotations

import numpy as np
import pytest

from engine.errors import TextError
from engine.runtime.bundle import Bundle
from engine.text.tokenizer import TextTokenizer, clean_text, split_pattern_for
from tests.bundles import MODELS, OUTPUTS, bundle_for, fixture_models

MODELS_WITH_TOKENS = [m for m in fixture_models() if (OUTPUTS / m / "tokenizer.npz").is_file()]


@pytest.mark.parametrize("model", MODELS_WITH_TOKENS or [pytest.param("none", marks=pytest.mark.skip("no fixtures"))])
def test_ids_identical_to_official_processor(model):
    with np.load(OUTPUTS / model / "tokenizer.npz", allow_pickle=True) as z:
        texts = [str(t) for t in z["texts"]]
        ids = [list(map(int, a)) for a in z["ids"]]
    tok = TextTokenizer(MODELS / model)
    assert len(texts) == len(ids) > 0
    for text, ref in zip(texts, ids, strict=True):
        assert tok.encode(text) == ref, repr(text)


@pytest.mark.parametrize("model", fixture_models() or [pytest.param("none", marks=pytest.mark.skip("no fixtures"))])
def test_templates_and_bundle_ids(model):
    bundle = Bundle.open(bundle_for(model, "fp32", parts=["text"]))
    info = bundle.part("text")
    tok = TextTokenizer(bundle)
    im_start, im_end, nl = info["im_start_token_id"], info["im_end_token_id"], info["newline_id"]
    role = [im_start, info["assistant_token_id"], nl]
    body = tok.encode("Hello world. 你好")
    ids = tok.target_ids("Hello world. 你好")
    assert ids[:3] == role and ids[-5:] == [im_end, nl] + role and ids[3:-5] == body
    ref = tok.reference_ids("Reference words.")
    assert ref[:3] == role and ref[-2:] == [im_end, nl] and ref[3:-2] == tok.encode("Reference words.")
    assert tok.instruct_ids("calm")[-2:] == [im_end, nl]
    # the three tts specials are single tokens with the config's ids
    cfg = bundle.config
    for key in ("tts_pad_token_id", "tts_bos_token_id", "tts_eos_token_id"):
        assert info[key] == cfg[key]
        assert tok.encode(tok.decode([cfg[key]])) == [cfg[key]]


def test_split_rule_follows_transformers_4_57_3():
    cfg = {"model_type": "qwen3_tts", "transformers_version": "4.57.3"}
    assert split_pattern_for(cfg, 151643) == "mistral_fix"  # the real checkpoints
    assert split_pattern_for(cfg, 5000) == "qwen2"  # small vocabulary: never patched
    assert split_pattern_for({**cfg, "transformers_version": "4.57.1"}, 151643) == "qwen2"
    assert split_pattern_for({**cfg, "transformers_version": "5.0.0"}, 151643) == "qwen2"
    assert split_pattern_for({"model_type": "qwen3_tts"}, 151643) == "mistral_fix"  # no version: patched


@pytest.mark.parametrize("model", fixture_models()[:1] or [pytest.param("none", marks=pytest.mark.skip("no fixtures"))])
def test_split_rules_differ_where_expected(model):
    qwen = TextTokenizer(MODELS / model, split="qwen2")._tok.pre_tokenizer
    fix = TextTokenizer(MODELS / model, split="mistral_fix")._tok.pre_tokenizer
    pieces = lambda p, s: [w for w, _ in p.pre_tokenize_str(s)]  # noqa: E731
    assert pieces(qwen, "HelloWorld") == ["HelloWorld"]
    assert pieces(fix, "HelloWorld") == ["Hello", "World"]
    assert pieces(qwen, "it's 12") == pieces(fix, "it's 12")


def test_clean_text_refuses_empty():
    for bad in ("", "   ", "\n\t "):
        with pytest.raises(TextError):
            clean_text(bad)
    assert clean_text(" hi ") == " hi "
