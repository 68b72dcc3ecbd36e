"""Tools around the official qwen-tts package: tiny model builders, tokenizer, capture hooks.

Runs only in the reference environment (torch + qwen-tts). Everything is deterministic: fixed
seeds, fixed constants, CPU, fp32.
"""

from __future__ import annotations

import importlib.machinery
import json
import math
import os
import shutil
import sys
import types
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def install_torchaudio_stub() -> None:
    """qwen_tts imports torchaudio (only for the unused 25 Hz tokenizer); the wheel here cannot load."""
    if "torchaudio" in sys.modules:
        return
    ta = types.ModuleType("torchaudio")
    comp = types.ModuleType("torchaudio.compliance")
    kaldi = types.ModuleType("torchaudio.compliance.kaldi")

    def _unavailable(*_a: Any, **_k: Any) -> Any:
        raise RuntimeError("torchaudio stub: not available in the oracle environment")

    kaldi.fbank = _unavailable  # type: ignore[attr-defined]
    comp.kaldi = kaldi  # type: ignore[attr-defined]
    ta.compliance = comp  # type: ignore[attr-defined]
    for m, name in ((ta, "torchaudio"), (comp, "torchaudio.compliance"), (kaldi, "torchaudio.compliance.kaldi")):
        m.__spec__ = importlib.machinery.ModuleSpec(name, None)  # transformers probes find_spec()
    sys.modules["torchaudio"] = ta
    sys.modules["torchaudio.compliance"] = comp
    sys.modules["torchaudio.compliance.kaldi"] = kaldi


install_torchaudio_stub()

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

# tiny tensors: threads only add sync overhead. ORACLE_TORCH_THREADS changes it to check that the fixtures
# hold on "another machine" (a different thread count splits reductions differently).
torch.set_num_threads(int(os.environ.get("ORACLE_TORCH_THREADS", "1")))

from qwen_tts import Qwen3TTSModel  # noqa: E402
from qwen_tts.core.models import (  # noqa: E402
    Qwen3TTSConfig,
    Qwen3TTSForConditionalGeneration,
    Qwen3TTSProcessor,
)
from qwen_tts.core.tokenizer_12hz.configuration_qwen3_tts_tokenizer_v2 import (  # noqa: E402
    Qwen3TTSTokenizerV2Config,
)
from qwen_tts.core.tokenizer_12hz.modeling_qwen3_tts_tokenizer_v2 import (  # noqa: E402
    EuclideanCodebook,
    Qwen3TTSTokenizerV2Model,
    SnakeBeta,
)

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"

# The preset tables have one home, tools/random_checkpoint/presets.py (numpy + engine only, both in the reference venv).
# Imported after torch: engine sets its OpenMP environment on import, which must not reach torch's runtime.
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # make_fixtures.py runs as a script, so the repository is not on the path
from tools.random_checkpoint import CODEC_OFFSETS, GENERATION_CONFIG, LANGUAGE_OFFSETS, ModelShape  # noqa: E402

# --------------------------------------------------------------------------------------------
# Text tokenizer
# --------------------------------------------------------------------------------------------

# Qwen2's pre-tokenizer split pattern (verbatim from the Qwen2 tokenizer definition).
QWEN2_SPLIT = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)

# Specials in the same order as Qwen2/Qwen3 (ids follow the BPE vocabulary); tts ones at the end.
CHATML_SPECIALS = [
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
    "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
    "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>",
]
TTS_SPECIALS = ["<tts_pad>", "<tts_text_bos>", "<tts_text_eod>"]

CORPUS = [
    "Hello world! This is a tiny test of the text to speech system.",
    "The quick brown fox jumps over the lazy dog. It's 10:45 and we're late, aren't we?",
    "I'd say you'll like it; they've been here since 1999. Don't worry, be happy.",
    "Please call 555-0123 or visit https://example.com/page?id=42 for more information.",
    "Numbers: 0 1 2 3 4 5 6 7 8 9, 12345, 3.14159, -7, 100%, $20.50, 1,000,000.",
    "Speech synthesis converts written text into spoken words with natural prosody.",
    "She sells sea shells by the sea shore. Peter Piper picked a peck of pickled peppers.",
    "Good morning, good afternoon, and good night. How are you doing today?",
    "assistant user system assistant\nassistant\n user\n",
    "你好，世界！这是一个语音合成系统的小测试。",
    "今天天气很好，我们去公园散步吧。你吃饭了吗？",
    "中文和English混合的句子也很常见，比如AI和GPU。",
    "我叫通义千问，是阿里云的开源大模型。北京、上海、广州、深圳。",
    "一二三四五六七八九十，百千万亿。二〇二六年三月十七日。",
    "こんにちは、世界！今日はいい天気ですね。ありがとうございます。",
    "日本語のテキストも少し入れておきます。カタカナとひらがな。",
    "안녕하세요, 세계! 오늘 날씨가 좋네요. 감사합니다.",
    "한국어 문장도 조금 넣어 둡니다. 음성 합성 테스트입니다.",
    "Emoji test 😀🎉👍❤️🚀 and more 🙂🐱🌏 in the middle of text.",
    "Full-width ＡＢＣ１２３，punctuation：「」『』（）【】！？",
    "Café, naïve, résumé, Straße, Ångström, crème brûlée — accents éèêë.",
    "Tabs\tand  double  spaces, newlines\nand\r\nwindows endings.",
    "Bonjour le monde. Hola mundo. Hallo Welt. Ciao mondo. Olá mundo.",
    "Привет, мир! Это тест.",
]


def build_text_tokenizer(vocab_size: int = 640):
    """Train a tiny Qwen2-shaped byte-level BPE; return (Qwen2TokenizerFast, special ids)."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import Qwen2TokenizerFast

    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[],
    )
    tok.train_from_iterator(CORPUS * 3, trainer=trainer)
    tmp = Path(os.environ.get("TMPDIR", "/tmp")) / f"oracle_bpe_{os.getpid()}"
    tmp.mkdir(parents=True, exist_ok=True)
    tok.model.save(str(tmp))
    fast = Qwen2TokenizerFast(
        vocab_file=str(tmp / "vocab.json"),
        merges_file=str(tmp / "merges.txt"),
        unk_token=None,
        bos_token=None,
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
        clean_up_tokenization_spaces=False,
        model_max_length=32768,
    )
    fast.add_special_tokens({"additional_special_tokens": CHATML_SPECIALS[1:] + TTS_SPECIALS})
    shutil.rmtree(tmp, ignore_errors=True)
    ids = {s: fast.convert_tokens_to_ids(s) for s in CHATML_SPECIALS + TTS_SPECIALS}
    return fast, ids


# --------------------------------------------------------------------------------------------
# Model specs
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class TinySpec(ModelShape):
    """A tiny model the official code builds: the shape (tools/random_checkpoint/presets.py ModelShape, shared with the
    random checkpoints) plus its seeds, codebook and kind."""

    name: str
    seed: int
    size: str  # tts_model_size
    codebook_size: int
    # constants found once by calibration (see make_fixtures.py --calibrate); fixed for determinism
    enc_cb_std: float = 1.0  # Mimi codebook std (matches projected-latent scale)
    eos_gain: float = 1.25  # talker codec_head EOS row multiplier
    st_seed_offset: int = 1  # speech tokenizer seed = seed + this
    # model kind (tts_model_type) and, for custom_voice, the preset speakers:
    # name -> (offset from the codebook start like the real ids, dialect or False, stored as a list?)
    kind: str = "base"
    speakers: dict = field(default_factory=dict)
    st_seed: int | None = None  # speech tokenizer seed when it must equal another spec's (identical bytes)

    @property
    def speech_seed(self) -> int:
        return self.st_seed if self.st_seed is not None else self.seed + self.st_seed_offset


SPECS: dict[str, TinySpec] = {
    # like 0.6B: talker width == CP width (Identity projection), GQA 2, head_dim != hidden/heads
    "tiny06b": TinySpec(
        name="tiny06b", seed=1006, size="0b6", codebook_size=256,
        t_hidden=64, t_inter=128, t_layers=2, t_heads=4, t_kv=2, t_head_dim=32, mrope=[6, 5, 5],
        text_hidden=48,
        cp_hidden=64, cp_inter=128, cp_layers=2, cp_heads=4, cp_kv=2, cp_head_dim=32,
        spk_channels=[32, 32, 32, 32, 96], spk_att=16, spk_scale=4, spk_se=16,
        d_hidden=32, d_inter=64, d_layers=2, d_heads=4, d_head_dim=16, d_window=72, d_latent=32,
        d_dim=64, d_codebook_dim=32,
        e_filters=4, e_hidden=32, e_inter=64, e_layers=2, e_heads=2, e_head_dim=16, e_window=250,
        e_codebook_dim=16, out_gain=0.13, enc_cb_std=0.5,
    ),
    # like 1.7B: talker wider than the CP -> small_to_mtp_projection is a Linear with bias
    "tiny17b": TinySpec(
        name="tiny17b", seed=1017, size="1b7", codebook_size=128,
        t_hidden=96, t_inter=192, t_layers=2, t_heads=4, t_kv=2, t_head_dim=32, mrope=[6, 5, 5],
        text_hidden=64,
        cp_hidden=64, cp_inter=128, cp_layers=2, cp_heads=4, cp_kv=2, cp_head_dim=32,
        spk_channels=[32, 32, 32, 32, 96], spk_att=16, spk_scale=4, spk_se=16,
        d_hidden=32, d_inter=64, d_layers=2, d_heads=4, d_head_dim=16, d_window=72, d_latent=32,
        d_dim=64, d_codebook_dim=32,
        e_filters=4, e_hidden=32, e_inter=64, e_layers=2, e_heads=2, e_head_dim=16, e_window=250,
        e_codebook_dim=16, out_gain=0.11, enc_cb_std=0.43, st_seed_offset=3,
    ),
    # awkward: GQA 3 everywhere, head_dim != hidden/heads, CP narrower with odd sizes, decoder
    # sliding window (8) far shorter than the test sequences, small Mimi window (64 @ 25 Hz).
    "tinyodd": TinySpec(
        name="tinyodd", seed=1099, size="0b6", codebook_size=64,
        t_hidden=48, t_inter=80, t_layers=3, t_heads=6, t_kv=2, t_head_dim=12, mrope=[2, 2, 2],
        text_hidden=40,
        cp_hidden=36, cp_inter=60, cp_layers=1, cp_heads=3, cp_kv=1, cp_head_dim=20,
        spk_channels=[24, 24, 24, 24, 72], spk_att=12, spk_scale=3, spk_se=12,
        d_hidden=24, d_inter=40, d_layers=3, d_heads=3, d_head_dim=10, d_window=8, d_latent=24,
        d_dim=48, d_codebook_dim=24,
        e_filters=4, e_hidden=32, e_inter=48, e_layers=1, e_heads=2, e_head_dim=12, e_window=64,
        e_codebook_dim=8, out_gain=0.10, enc_cb_std=0.34, eos_gain=1.1,
    ),
}

# CustomVoice / VoiceDesign checkpoints: the talker shapes of tiny06b / tiny17b with their own weights, and the
# very same speech tokenizer and text tokenizer (same seed -> byte-identical files, which git stores once).
# Speaker offsets are the real ids minus 2048 (serena 3066, uncle_fu 3010, eric 2875, dylan 2878, ryan 3061).
CV_SPEAKERS = {
    "serena": (1018, False, False), "uncle_fu": (962, False, False),
    "eric": (827, "sichuan_dialect", False), "dylan": (830, "beijing_dialect", False),
}
SPECS["tinycv06b"] = replace(SPECS["tiny06b"], name="tinycv06b", seed=2006, kind="custom_voice",
                             speakers=dict(CV_SPEAKERS), st_seed=SPECS["tiny06b"].speech_seed)
# 1.7B-like: honours the instruct; one speaker id stored as a one-element list, as some real configs do
SPECS["tinycv17b"] = replace(SPECS["tiny17b"], name="tinycv17b", seed=2017, kind="custom_voice",
                             speakers=dict(CV_SPEAKERS, ryan=(1013, False, True)),
                             st_seed=SPECS["tiny17b"].speech_seed)
SPECS["tinyvd17b"] = replace(SPECS["tiny17b"], name="tinyvd17b", seed=3017, kind="voice_design",
                             st_seed=SPECS["tiny17b"].speech_seed)

# Control ids keep the real offsets from codebook start (real: codebook 2048, pad 2148, ...): CODEC_OFFSETS.
# The tiny models' config.json lists the languages by id (the committed fixtures hold this order).
LANG_OFFSETS = dict(sorted(LANGUAGE_OFFSETS.items(), key=lambda item: item[1]))
DIALECT_OFFSETS = dict(sichuan_dialect=14, beijing_dialect=26)  # CustomVoice only (real 2062, 2074)


def codec_ids(spec: TinySpec) -> dict[str, int]:
    cb = spec.codebook_size
    return {k: cb + v for k, v in CODEC_OFFSETS.items()}


def make_config(spec: TinySpec, text_ids: dict[str, int], text_vocab: int) -> Qwen3TTSConfig:
    cb = spec.codebook_size
    cid = codec_ids(spec)
    languages = dict(LANG_OFFSETS, **(DIALECT_OFFSETS if spec.kind == "custom_voice" else {}))
    cp = dict(
        vocab_size=cb, hidden_size=spec.cp_hidden, intermediate_size=spec.cp_inter,
        num_hidden_layers=spec.cp_layers, num_attention_heads=spec.cp_heads,
        num_key_value_heads=spec.cp_kv, head_dim=spec.cp_head_dim, hidden_act="silu",
        max_position_embeddings=65536, rms_norm_eps=1e-6, rope_theta=1000000, rope_scaling=None,
        attention_bias=False, use_sliding_window=False, sliding_window=None, max_window_layers=28,
        layer_types=["full_attention"] * spec.cp_layers, attention_dropout=0.0, num_code_groups=16,
        initializer_range=0.02, use_cache=True, tie_word_embeddings=False,
    )
    talker = dict(
        code_predictor_config=cp, vocab_size=cb + 1024, hidden_size=spec.t_hidden,
        intermediate_size=spec.t_inter, num_hidden_layers=spec.t_layers,
        num_attention_heads=spec.t_heads, num_key_value_heads=spec.t_kv, head_dim=spec.t_head_dim,
        hidden_act="silu", max_position_embeddings=32768, rms_norm_eps=1e-6, rope_theta=1000000,
        rope_scaling={"interleaved": True, "mrope_section": list(spec.mrope), "rope_type": "default",
                      "type": "default"},
        attention_bias=False, use_sliding_window=False, sliding_window=None, attention_dropout=0.0,
        num_code_groups=16, text_hidden_size=spec.text_hidden, text_vocab_size=text_vocab,
        codec_eos_token_id=cid["eos"], codec_think_id=cid["think"], codec_nothink_id=cid["nothink"],
        codec_think_bos_id=cid["think_bos"], codec_think_eos_id=cid["think_eos"],
        codec_pad_id=cid["pad"], codec_bos_id=cid["bos"],
        spk_id={k: [cb + off] if as_list else cb + off for k, (off, _, as_list) in spec.speakers.items()},
        spk_is_dialect={k: dialect for k, (_, dialect, _) in spec.speakers.items()},
        codec_language_id={k: cb + v for k, v in languages.items()},
        position_id_per_seconds=13, initializer_range=0.02, use_cache=True,
        tie_word_embeddings=False,
    )
    spk = dict(
        mel_dim=128, enc_dim=spec.t_hidden, enc_channels=list(spec.spk_channels),
        enc_kernel_sizes=[5, 3, 3, 3, 1], enc_dilations=[1, 2, 3, 4, 1],
        enc_attention_channels=spec.spk_att, enc_res2net_scale=spec.spk_scale,
        enc_se_channels=spec.spk_se, sample_rate=24000,
    )
    return Qwen3TTSConfig(
        talker_config=talker, speaker_encoder_config=spk, tokenizer_type="qwen3_tts_tokenizer_12hz",
        tts_model_size=spec.size, tts_model_type=spec.kind,
        im_start_token_id=text_ids["<|im_start|>"], im_end_token_id=text_ids["<|im_end|>"],
        tts_pad_token_id=text_ids["<tts_pad>"], tts_bos_token_id=text_ids["<tts_text_bos>"],
        tts_eos_token_id=text_ids["<tts_text_eod>"], assistant_token_id=text_ids["assistant"],
        architectures=["Qwen3TTSForConditionalGeneration"],
    )


def make_speech_tokenizer_config(spec: TinySpec) -> Qwen3TTSTokenizerV2Config:
    enc = dict(
        sampling_rate=24000, frame_rate=12.5, audio_channels=1, hidden_size=spec.e_hidden,
        num_filters=spec.e_filters, num_residual_layers=1, upsampling_ratios=[8, 6, 5, 4],
        kernel_size=7, last_kernel_size=3, residual_kernel_size=3, dilation_growth_rate=2,
        use_causal_conv=True, pad_mode="constant", compress=2, trim_right_ratio=1.0,
        codebook_size=spec.codebook_size, codebook_dim=spec.e_codebook_dim, num_quantizers=32,
        use_conv_shortcut=False, vector_quantization_hidden_dimension=spec.e_codebook_dim,
        num_semantic_quantizers=1, upsample_groups=spec.e_hidden,
        num_hidden_layers=spec.e_layers, intermediate_size=spec.e_inter,
        num_attention_heads=spec.e_heads, num_key_value_heads=spec.e_heads,
        head_dim=spec.e_head_dim, hidden_act="gelu", max_position_embeddings=8000,
        norm_eps=1e-5, use_cache=False, use_streaming=False, rope_theta=10000.0,
        sliding_window=spec.e_window, attention_dropout=0.0, layer_scale_initial_scale=0.01,
        attention_bias=False, normalize=False,
    )
    dec = dict(
        codebook_size=spec.codebook_size, codebook_dim=spec.d_codebook_dim,
        hidden_size=spec.d_hidden, latent_dim=spec.d_latent, max_position_embeddings=8000,
        rope_theta=10000, num_attention_heads=spec.d_heads, num_key_value_heads=spec.d_heads,
        head_dim=spec.d_head_dim, attention_bias=False, sliding_window=spec.d_window,
        intermediate_size=spec.d_inter, hidden_act="silu", layer_scale_initial_scale=0.01,
        rms_norm_eps=1e-5, num_hidden_layers=spec.d_layers, num_quantizers=16,
        num_semantic_quantizers=1, semantic_codebook_size=spec.codebook_size,
        vector_quantization_hidden_dimension=spec.d_codebook_dim,
        upsample_rates=[8, 5, 4, 3], upsampling_ratios=[2, 2], decoder_dim=spec.d_dim,
        attention_dropout=0.0,
    )
    return Qwen3TTSTokenizerV2Config(
        encoder_config=enc, decoder_config=dec, encoder_valid_num_quantizers=16,
        input_sample_rate=24000, output_sample_rate=24000, decode_upsample_rate=1920,
        encode_downsample_rate=1920, architectures=["Qwen3TTSTokenizerV2Model"],
    )


# --------------------------------------------------------------------------------------------
# Non-degenerate random weights
# --------------------------------------------------------------------------------------------


def _randn(g: torch.Generator, shape, std: float) -> torch.Tensor:
    return torch.randn(shape, generator=g, dtype=torch.float32) * std


def _unif(g: torch.Generator, shape, lo: float, hi: float) -> torch.Tensor:
    return lo + (hi - lo) * torch.rand(shape, generator=g, dtype=torch.float32)


@torch.no_grad()
def randomise(root: nn.Module, seed: int, cb_std: float = 1.0, enc_cb_std: float = 1.0) -> list[str]:
    """Re-initialise every parameter and codebook buffer of `root` (module order, one generator).

    Returns the names that fell back to the generic rule (for inspection)."""
    g = torch.Generator().manual_seed(seed)
    fallback: list[str] = []
    for mname, mod in root.named_modules():
        own = dict(mod.named_parameters(recurse=False))
        bufs = dict(mod.named_buffers(recurse=False))
        cls = type(mod).__name__
        if isinstance(mod, EuclideanCodebook):
            usage = _unif(g, own["cluster_usage"].shape, 0.5, 2.0)
            own["cluster_usage"].copy_(usage)
            own["embedding_sum"].copy_(_randn(g, own["embedding_sum"].shape, cb_std) * usage[:, None])
            continue
        if cls == "MimiEuclideanCodebook":
            usage = _unif(g, bufs["cluster_usage"].shape, 0.5, 2.0)
            bufs["cluster_usage"].copy_(usage)
            bufs["embed_sum"].copy_(_randn(g, bufs["embed_sum"].shape, enc_cb_std) * usage[:, None])
            bufs["initialized"].fill_(1.0)
            mod._embed = None
            continue
        if isinstance(mod, SnakeBeta):
            own["alpha"].copy_(_randn(g, own["alpha"].shape, 0.3))
            own["beta"].copy_(_randn(g, own["beta"].shape, 0.3))
            continue
        for pname, p in own.items():
            full = f"{mname}.{pname}" if mname else pname
            if isinstance(mod, (nn.Linear, nn.Conv1d)) and pname == "weight":
                fan_in = p[0].numel()
                p.copy_(_randn(g, p.shape, 1.0 / math.sqrt(fan_in)))
            elif isinstance(mod, nn.ConvTranspose1d) and pname == "weight":
                fan_in = p.shape[0] * p.shape[2] / mod.stride[0]
                p.copy_(_randn(g, p.shape, 1.0 / math.sqrt(fan_in)))
            elif pname == "bias":
                p.copy_(_randn(g, p.shape, 0.05))
            elif isinstance(mod, nn.Embedding):
                p.copy_(_randn(g, p.shape, 1.0))
            elif "Norm" in cls and pname == "weight":
                p.copy_(1.0 + _randn(g, p.shape, 0.1))
            elif "LayerScale" in cls and pname == "scale":
                p.copy_(_unif(g, p.shape, 0.05, 0.3))
            elif pname == "gamma":
                p.copy_(_unif(g, p.shape, 0.05, 0.3))
            else:
                fallback.append(full)
                p.copy_(_randn(g, p.shape, 0.1))
    return fallback


RES_GAIN = 0.25
HEAD_GAIN = 4.0


def build_models(spec: TinySpec):
    """Return (model, speech_tokenizer_model, text_tokenizer) with fixed random weights."""
    tok, text_ids = build_text_tokenizer()
    text_ids["assistant"] = tok.convert_tokens_to_ids("assistant")
    n_tok = len(tok)
    text_vocab = int(math.ceil((n_tok + 10) / 64.0) * 64)  # padded rows, like the real 151936
    cfg = make_config(spec, text_ids, text_vocab)
    torch.manual_seed(spec.seed)
    model = Qwen3TTSForConditionalGeneration(cfg).float().eval()
    fb = randomise(model, spec.seed)
    # Peaked logits (std ~4) keep greedy argmax far from near-ties; EOS must stay reachable under
    # greedy, so its codec_head row gets its own fixed gain.
    eos = cfg.talker_config.codec_eos_token_id
    with torch.no_grad():
        model.talker.codec_head.weight.mul_(HEAD_GAIN)
        model.talker.codec_head.weight[eos].mul_(spec.eos_gain)
        for head in model.talker.code_predictor.lm_head:
            head.weight.mul_(HEAD_GAIN)

    st_cfg = make_speech_tokenizer_config(spec)
    st = Qwen3TTSTokenizerV2Model(st_cfg).float().eval()
    fb += randomise(st, spec.speech_seed, enc_cb_std=spec.enc_cb_std)
    with torch.no_grad():
        # keep vocoder activations moderate: damp residual branches (variance would grow ~2x per unit,
        # and SnakeBeta's sin() of huge arguments amplifies rounding), then set the output level
        for mod in st.decoder.modules():
            if type(mod).__name__ == "Qwen3TTSTokenizerV2DecoderDecoderResidualUnit":
                mod.conv2.conv.weight.mul_(RES_GAIN)
        st.decoder.decoder[-1].conv.weight.mul_(spec.out_gain)
    return model, st, tok, fb


def _write_json(path: Path, obj: Any) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def save_hub(model, st, tok, out: Path) -> None:
    """Write the checkpoint exactly in the hub layout (no tokenizer.json, like the real repos)."""
    from transformers import EncodecFeatureExtractor

    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    # Main weights stored as bf16 like the real checkpoints (the loader upcasts exactly to fp32);
    # the speech tokenizer stays fp32.
    model.to(torch.bfloat16).save_pretrained(str(out), safe_serialization=True)
    Qwen3TTSProcessor(tokenizer=tok).save_pretrained(str(out))
    for extra in ("tokenizer.json", "special_tokens_map.json", "added_tokens.json", "chat_template.jinja"):
        (out / extra).unlink(missing_ok=True)
    cfg = json.loads((out / "config.json").read_text())
    cfg["speaker_encoder_config"].pop("model_type", None)  # loader rejects model_type ""
    _write_json(out / "config.json", cfg)
    _write_json(out / "generation_config.json", GENERATION_CONFIG)
    sd = out / "speech_tokenizer"
    st.save_pretrained(str(sd), safe_serialization=True)
    EncodecFeatureExtractor(feature_size=1, sampling_rate=24000, padding_value=0.0).save_pretrained(str(sd))
    (sd / "generation_config.json").unlink(missing_ok=True)


def load_official(path: Path, attn: str = "sdpa") -> Qwen3TTSModel:
    tts = Qwen3TTSModel.from_pretrained(
        str(path), dtype=torch.float32, attn_implementation=attn, local_files_only=True
    )
    tts.model.eval()
    return tts


# --------------------------------------------------------------------------------------------
# Capture hooks
# --------------------------------------------------------------------------------------------


class TalkerCapture:
    """Record the talker prefill inputs_embeds, trailing text rows and raw logits of the first steps.

    Forward hooks on the official talker (its returned logits are the raw codec_head output, before
    any HF logits processor). Also counts talker forward calls."""

    def __init__(self, model: Qwen3TTSForConditionalGeneration, k_logits: int = 4):
        self.model = model
        self.k = k_logits
        self.prefill: np.ndarray | None = None
        self.trailing: np.ndarray | None = None
        self.logits: list[np.ndarray] = []
        self.calls = 0
        self._hooks: list = []

    def __enter__(self):
        talker = self.model.talker

        def pre(_mod: nn.Module, _args: tuple, kwargs: dict):
            emb = kwargs.get("inputs_embeds")
            if emb is not None and emb.shape[1] > 1 and self.prefill is None:
                self.prefill = emb[0].detach().float().numpy().copy()
                tr = kwargs.get("trailing_text_hidden")
                self.trailing = tr[0].detach().float().numpy().copy()
            return None

        def post(_mod: nn.Module, _args: tuple, _kwargs: dict, out: Any):
            self.calls += 1
            if len(self.logits) < self.k:
                self.logits.append(out.logits[0, -1].detach().float().numpy().copy())
            return None

        self._hooks = [
            talker.register_forward_pre_hook(pre, with_kwargs=True),
            talker.register_forward_hook(post, with_kwargs=True),
        ]
        return self

    def __exit__(self, *exc: Any) -> None:
        for h in self._hooks:
            h.remove()


class GenerateCapture:
    """Record what the official wrapper hands to Qwen3TTSForConditionalGeneration.generate (its keyword
    arguments: input_ids, instruct_ids, ref_ids, ...), the codes it returns and the talker's sampled code-0 ids
    (the last one is EOS when the run stopped by itself)."""

    def __init__(self, model: Qwen3TTSForConditionalGeneration):
        self.model = model
        self.kwargs: dict = {}
        self.codes: np.ndarray | None = None
        self.sampled: np.ndarray | None = None

    def __enter__(self):
        model, gen, tgen = self.model, self.model.generate, self.model.talker.generate

        def gen_wrap(*a: Any, **kw: Any):
            self.kwargs = kw
            res = gen(*a, **kw)
            self.codes = res[0][0].numpy().astype(np.int64).copy()
            return res

        def tgen_wrap(*a: Any, **kw: Any):
            res = tgen(*a, **kw)
            self.sampled = res.sequences[0].numpy().astype(np.int64).copy()
            return res

        model.generate = gen_wrap
        model.talker.generate = tgen_wrap
        return self

    def __exit__(self, *exc: Any) -> None:
        del self.model.generate
        del self.model.talker.generate

    def first_ids(self, key: str) -> np.ndarray | None:
        """The first batch item of a list-of-tensors argument (input_ids, ref_ids, instruct_ids), or None."""
        items = self.kwargs.get(key)
        if not items or items[0] is None:
            return None
        return items[0][0].numpy().astype(np.int64).copy()

    def gen_kwargs(self) -> dict:
        return {k: self.kwargs[k] for k in ("max_new_tokens", "do_sample", "subtalker_dosample",
                                            "repetition_penalty", "top_k", "top_p", "temperature")}


class CodePredictorMargins:
    """Smallest gap between the best and second-best raw code-predictor logit over a run (greedy argmax)."""

    def __init__(self, model: Qwen3TTSForConditionalGeneration):
        self.model = model
        self.margin = float("inf")
        self._h = None

    def __enter__(self):
        def post(_mod: nn.Module, _args: tuple, _kwargs: dict, out: Any):
            top = torch.topk(out.logits[0, -1].detach().float(), 2).values
            self.margin = min(self.margin, float(top[0] - top[1]))
            return None

        self._h = self.model.talker.code_predictor.register_forward_hook(post, with_kwargs=True)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._h.remove()


class SpeakerCapture:
    """Record the mel input of the speaker encoder."""

    def __init__(self, model: Qwen3TTSForConditionalGeneration):
        self.model = model
        self.mels: list[np.ndarray] = []
        self._h = None

    def __enter__(self):
        def pre(_mod: nn.Module, args: tuple):
            self.mels.append(args[0][0].detach().float().numpy().copy())

        self._h = self.model.speaker_encoder.register_forward_pre_hook(pre)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._h.remove()


def mimi_transformer_mask_probe(st_model: Qwen3TTSTokenizerV2Model, n_frames: int) -> dict:
    """Ask the Mimi transformer which mask it builds for n_frames (25 Hz) inputs: does it apply
    config.sliding_window? Returns the count of visible keys of the last query row."""
    enc = st_model.encoder
    seen: dict = {}

    def pre(_mod: nn.Module, args: tuple, kwargs: dict):
        m = kwargs.get("attention_mask")
        if m is not None:
            row = m[0, 0, -1]
            seen["visible_last_row"] = int((row == 0).sum()) if row.dtype != torch.bool else int(row.sum())
        else:
            seen["visible_last_row"] = None  # None = implicit full causal (sdpa is_causal)
        return None

    h = enc.encoder_transformer.layers[0].self_attn.register_forward_pre_hook(pre, with_kwargs=True)
    try:
        with torch.inference_mode():
            x = torch.zeros(1, 1, n_frames * 960)
            enc.encode(x, return_dict=True)
    finally:
        h.remove()
    seen["n_frames_25hz"] = n_frames
    seen["sliding_window"] = enc.config.sliding_window
    return seen
