"""tools/random_checkpoint/ (random-weight checkpoints in the hub layout) and engine.demo (the shipped demo).

The official tensor names/shapes (tests/data/official_tensors_*.json) come from the official qwen-tts modules
built from the presets' config files (benchmarks/official_check.py names); the full-size presets are compared
header-only, without writing their data.
"""

from __future__ import annotations

import json
import struct
import unicodedata
from pathlib import Path

import numpy as np
import pytest
from safetensors import safe_open

from engine.convert.checkpoint import Checkpoint
from engine.demo import DEMO_CHECKPOINT, DEMO_MARK, is_demo_bundle, make_demo_bundle
from engine.errors import EngineError
from engine.runtime.bundle import Bundle
from tools.random_checkpoint import (
    DEMO_SEED,
    PRESETS,
    QWEN2_SPLIT,
    checkpoint_layout,
    codec_ids,
    write_random_checkpoint,
)

DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture(scope="module")
def demo_ckpt(tmp_path_factory) -> Path:
    return write_random_checkpoint(tmp_path_factory.mktemp("demo") / "ckpt", "demo", seed=DEMO_SEED)


def test_shipped_demo_checkpoint_is_what_the_tool_writes(demo_ckpt):
    """One source of truth: engine/demo_checkpoint/ holds exactly the files tools/random_checkpoint/ writes
    (regenerate with `python -m tools.random_checkpoint` after changing the demo preset)."""
    shipped = sorted(p.relative_to(DEMO_CHECKPOINT) for p in DEMO_CHECKPOINT.rglob("*") if p.is_file())
    written = sorted(p.relative_to(demo_ckpt) for p in demo_ckpt.rglob("*") if p.is_file())
    assert shipped == written
    for rel in written:
        assert (DEMO_CHECKPOINT / rel).read_bytes() == (demo_ckpt / rel).read_bytes(), rel


def _header(raw: bytes) -> dict:
    (n,) = struct.unpack("<Q", raw[:8])
    h = json.loads(raw[8:8 + n])
    h.pop("__metadata__", None)
    return h


@pytest.mark.parametrize("preset", ["0.6b", "1.7b"])
def test_full_size_headers_match_official_tensor_list(preset):
    official = json.loads((DATA / f"official_tensors_{preset}.json").read_text())["files"]
    layout = checkpoint_layout(preset)
    for rel, raw in layout.headers().items():
        have = {k: v["shape"] for k, v in _header(raw).items()}
        want = official[rel]
        assert sorted(set(want) - set(have)) == [], f"{rel}: missing tensors"
        assert sorted(set(have) - set(want)) == [], f"{rel}: unexpected tensors"
        wrong = {k: (have[k], want[k]) for k in want if have[k] != want[k]}
        assert wrong == {}, f"{rel}: wrong shapes"


def test_full_size_configs_have_the_real_values():
    cfg = checkpoint_layout("0.6b").config
    t, cp = cfg["talker_config"], cfg["talker_config"]["code_predictor_config"]
    assert (cfg["im_start_token_id"], cfg["im_end_token_id"], cfg["assistant_token_id"]) == (151644, 151645, 77091)
    assert (cfg["tts_pad_token_id"], cfg["tts_bos_token_id"], cfg["tts_eos_token_id"]) == (151671, 151672, 151673)
    assert (t["hidden_size"], t["num_hidden_layers"], t["head_dim"], t["num_key_value_heads"]) == (1024, 28, 128, 8)
    assert (t["vocab_size"], t["text_vocab_size"], t["codec_pad_id"], t["codec_eos_token_id"]) == (3072, 151936, 2148, 2150)
    assert t["codec_language_id"]["english"] == 2050 and t["codec_language_id"]["chinese"] == 2055
    assert (cp["hidden_size"], cp["num_hidden_layers"], cp["vocab_size"]) == (1024, 5, 2048)
    assert cfg["speaker_encoder_config"] == {"enc_dim": 1024, "sample_rate": 24000}
    big = checkpoint_layout("1.7b").config
    assert big["talker_config"]["hidden_size"] == 2048 and big["speaker_encoder_config"]["enc_dim"] == 2048


def test_demo_checkpoint_is_readable_and_complete(demo_ckpt):
    layout = checkpoint_layout("demo")
    ckpt = Checkpoint.open(demo_ckpt)
    try:
        assert ckpt.config == layout.config
        for f, specs in ((ckpt.main, layout.main), (ckpt.speech, layout.speech)):
            assert sorted(f.keys()) == sorted(s.name for s in specs)
            for s in specs:
                assert f.shape(s.name) == s.shape
        # every tensor the official modules need for this config (header check against the official list)
        official = json.loads((DATA / "official_tensors_demo.json").read_text())["files"]
        assert {k: list(ckpt.main.shape(k)) for k in ckpt.main.keys()} == official["model.safetensors"]
        assert {k: list(ckpt.speech.shape(k)) for k in ckpt.speech.keys()} == \
            official["speech_tokenizer/model.safetensors"]
        # non-degenerate values
        for name in ckpt.main.keys() + ckpt.speech.keys():
            v = (ckpt.main if name in ckpt.main else ckpt.speech).get(name)
            assert np.isfinite(v).all(), name
            if not name.endswith(("initialized", "decoder.6.conv.bias")):
                assert v.std() > 0, name
        for name in ckpt.speech.keys():
            if name.endswith("cluster_usage"):
                assert ckpt.speech.get(name).min() > 0
            if name.endswith((".alpha", ".beta")):
                assert np.abs(ckpt.speech.get(name)).max() > 0.01
        sums = [n for n in ckpt.speech.keys() if n.endswith(("embedding_sum", "embed_sum"))]
        assert len(sums) == 16 + 32
        tc = ckpt.config["talker_config"]
        assert tc["hidden_size"] != tc["code_predictor_config"]["hidden_size"]  # projection path exercised
        assert "talker.code_predictor.small_to_mtp_projection.weight" in ckpt.main
        assert tc["num_key_value_heads"] < tc["num_attention_heads"]
        assert tc["head_dim"] != tc["hidden_size"] // tc["num_attention_heads"]
        ids = codec_ids(PRESETS["demo"])
        assert tc["codec_eos_token_id"] == ids["eos"] and tc["vocab_size"] == PRESETS["demo"].codebook + 1024
    finally:
        ckpt.close()


def test_safetensors_files_are_valid_for_the_safetensors_library(demo_ckpt):
    for rel in ("model.safetensors", "speech_tokenizer/model.safetensors"):
        with safe_open(str(demo_ckpt / rel), framework="numpy") as f:
            name = next(iter(f.keys()))
            assert f.get_tensor(name).dtype == np.float32


def test_same_seed_same_bytes_other_seed_differs(demo_ckpt, tmp_path):
    again = write_random_checkpoint(tmp_path / "again", "demo", seed=0)
    other = write_random_checkpoint(tmp_path / "other", "demo", seed=1)
    for rel in ("model.safetensors", "speech_tokenizer/model.safetensors", "vocab.json", "merges.txt",
                "config.json", "tokenizer_config.json"):
        assert (again / rel).read_bytes() == (demo_ckpt / rel).read_bytes(), rel
    assert (other / "model.safetensors").read_bytes() != (demo_ckpt / "model.safetensors").read_bytes()


def test_bf16_storage_is_rounded_fp32(demo_ckpt, tmp_path):
    bf = write_random_checkpoint(tmp_path / "bf16", "demo", seed=0, dtype="bf16")
    a, b = Checkpoint.open(demo_ckpt), Checkpoint.open(bf)
    try:
        name = "talker.model.layers.0.mlp.up_proj.weight"
        x, y = a.main.get(name), b.main.get(name)
        assert (y.view(np.uint32) & 0xFFFF).max() == 0
        np.testing.assert_allclose(y, x, rtol=2 ** -8, atol=0)
        assert b.config["dtype"] == "bfloat16"
    finally:
        a.close()
        b.close()


def test_existing_destination_is_refused(demo_ckpt):
    with pytest.raises(EngineError, match="already exists"):
        write_random_checkpoint(demo_ckpt, "demo")
    with pytest.raises(EngineError, match="unknown checkpoint preset"):
        checkpoint_layout("7b")


def _tokenizer(folder: Path):
    """The Qwen2 byte-level BPE rebuilt from vocab.json + merges.txt + tokenizer_config.json."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

    tok = Tokenizer(models.BPE.from_file(str(folder / "vocab.json"), str(folder / "merges.txt")))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    cfg = json.loads((folder / "tokenizer_config.json").read_text())
    added = sorted(((int(i), t) for i, t in cfg["added_tokens_decoder"].items()))
    for i, t in added:
        assert i == tok.get_vocab_size(with_added_tokens=True), "added tokens must follow the vocabulary"
        tok.add_special_tokens([AddedToken(t["content"], normalized=False, special=t["special"])])
    return tok


SAMPLES = [
    "Hello world! It's 10:45, isn't it?",
    "你好，世界！今天天气很好。",
    "こんにちは、カタカナ。안녕하세요 😀🎶 1234567",
    "Tabs\tand   spaces\nnew lines\r\n and e\u0301 combining",
    "Ünïcödé — «quotes» ＡＢＣ１２３",
]


@pytest.mark.parametrize("preset", ["demo", "0.6b"])
def test_tokenizer_round_trips_and_matches_config(preset, tmp_path):
    layout = checkpoint_layout(preset)
    layout.tokenizer.write(tmp_path)
    tok = _tokenizer(tmp_path)
    cfg = layout.config
    for text in SAMPLES:
        ids = tok.encode(text).ids
        assert max(ids) < cfg["talker_config"]["text_vocab_size"]
        assert tok.decode(ids, skip_special_tokens=False) == unicodedata.normalize("NFC", text)
    prompt = tok.encode("<|im_start|>assistant\nHi there<|im_end|>\n<|im_start|>assistant\n").ids
    assert prompt[:3] == [cfg["im_start_token_id"], cfg["assistant_token_id"], 198]
    assert prompt[-5:] == [cfg["im_end_token_id"], 198, cfg["im_start_token_id"], cfg["assistant_token_id"], 198]
    for surface, key in (("<tts_pad>", "tts_pad_token_id"), ("<tts_text_bos>", "tts_bos_token_id"),
                         ("<tts_text_eod>", "tts_eos_token_id")):
        assert tok.token_to_id(surface) == cfg[key]
    assert not (tmp_path / "tokenizer.json").exists()


def test_make_demo_bundle_is_accepted_by_bundle_open(tmp_path):
    seen: list[float] = []
    out = make_demo_bundle(tmp_path / "bundle", progress=lambda f, _m: seen.append(f))
    bundle = Bundle.open(out)
    assert bundle.config["tts_model_type"] == "base"
    assert bundle.config == {**checkpoint_layout("demo").config, DEMO_MARK: True}
    assert is_demo_bundle(out) and not is_demo_bundle(tmp_path)
    assert seen and seen[-1] == pytest.approx(1.0)
    with pytest.raises(EngineError):
        make_demo_bundle(out)
