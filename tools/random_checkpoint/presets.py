"""Model shapes and presets: "demo" (tiny, every code path), "0.6b" and "1.7b" (the real shapes); the token
offsets and generation settings every preset shares."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.errors import EngineError

DEMO_SEED = 0
DEMO_CHECKPOINT = Path(__file__).resolve().parents[2] / "engine" / "demo_checkpoint"  # shipped with the app


@dataclass(frozen=True, kw_only=True)
class ModelShape:
    """The sizes of a Qwen3-TTS model, network by network: the one description of a random model's shape, which
    this tool's presets and the test oracle's tiny models (tests/reference/oracle.py TinySpec) both extend."""

    # talker
    t_hidden: int
    t_inter: int
    t_layers: int
    t_heads: int
    t_kv: int
    t_head_dim: int
    mrope: Sequence[int]  # the three multimodal RoPE sections
    text_hidden: int
    # code predictor
    cp_hidden: int
    cp_inter: int
    cp_layers: int
    cp_heads: int
    cp_kv: int
    cp_head_dim: int
    # speaker encoder (None fields: leave the class default out of config.json, like the real file)
    spk_channels: Sequence[int] | None
    spk_att: int | None
    spk_scale: int | None
    spk_se: int | None
    # speech tokenizer decoder
    d_hidden: int
    d_inter: int
    d_layers: int
    d_heads: int
    d_head_dim: int
    d_window: int
    d_latent: int
    d_dim: int
    d_codebook_dim: int
    # speech tokenizer encoder (HF Mimi)
    e_filters: int
    e_hidden: int
    e_inter: int
    e_layers: int
    e_heads: int
    e_head_dim: int
    e_window: int
    e_codebook_dim: int
    out_gain: float = 1.0  # the decoder's last conv gain (calibrated per model against the official code)
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class Preset(ModelShape):
    name: str
    size: str  # tts_model_size
    codebook: int  # codec codebook rows (2048 real); talker vocab = codebook + 1024
    real_text_ids: bool  # special text tokens at the real Qwen ids (151643...), vocab padded to match
    main_dtype: str  # default storage of model.safetensors ("bf16" like the real files, or "fp32")
    text_vocab: int | None  # None: the tokenizer size rounded up to 64
    cp_max_pos: int
    # constants found once against the official implementation (benchmarks/calibrate_demo.py): out_gain and
    # out_bias make the random voice audible noise (std ~0.2, no DC), neither silent nor clipped
    out_bias: float = 0.0  # cancels the DC that SnakeBeta's sin^2 term builds up
    res_gain: float = 0.3  # vocoder residual-unit output conv gain
    eos_gain: float = 1.0  # talker codec_head EOS row gain: makes sampled runs end on their own


_SPK_DEFAULT: dict[str, Any] = dict(spk_channels=None, spk_att=None, spk_scale=None, spk_se=None)
_CODEC_REAL: dict[str, Any] = dict(
    d_hidden=512, d_inter=1024, d_layers=8, d_heads=16, d_head_dim=64, d_window=72, d_latent=1024, d_dim=1536,
    d_codebook_dim=512,
    e_filters=64, e_hidden=512, e_inter=2048, e_layers=8, e_heads=8, e_head_dim=64, e_window=250, e_codebook_dim=256,
)
_CP_REAL: dict[str, Any] = dict(cp_hidden=1024, cp_inter=3072, cp_layers=5, cp_heads=16, cp_kv=8, cp_head_dim=128, cp_max_pos=65536)

PRESETS: dict[str, Preset] = {
    "demo": Preset(
        name="demo", size="0b6", codebook=256, real_text_ids=False, main_dtype="fp32",
        t_hidden=64, t_inter=128, t_layers=2, t_heads=4, t_kv=2, t_head_dim=32, mrope=(6, 5, 5),
        text_hidden=48, text_vocab=None,
        cp_hidden=48, cp_inter=96, cp_layers=2, cp_heads=4, cp_kv=2, cp_head_dim=16, cp_max_pos=65536,
        spk_channels=(32, 32, 32, 32, 96), spk_att=16, spk_scale=4, spk_se=16,
        d_hidden=32, d_inter=64, d_layers=2, d_heads=4, d_head_dim=16, d_window=8, d_latent=32, d_dim=64,
        d_codebook_dim=32,
        e_filters=4, e_hidden=32, e_inter=64, e_layers=2, e_heads=2, e_head_dim=16, e_window=16, e_codebook_dim=16,
        out_gain=0.05924, out_bias=-0.09148, eos_gain=2.0,  # sampled runs end after ~2-4 s (median)
    ),
    "0.6b": Preset(
        name="0.6b", size="0b6", codebook=2048, real_text_ids=True, main_dtype="bf16",
        t_hidden=1024, t_inter=3072, t_layers=28, t_heads=16, t_kv=8, t_head_dim=128, mrope=(24, 20, 20),
        text_hidden=2048, text_vocab=151936, **_CP_REAL, **_SPK_DEFAULT, **_CODEC_REAL,
        out_gain=0.07193, out_bias=0.01455,
    ),
    "1.7b": Preset(
        name="1.7b", size="1b7", codebook=2048, real_text_ids=True, main_dtype="bf16",
        t_hidden=2048, t_inter=6144, t_layers=28, t_heads=16, t_kv=8, t_head_dim=128, mrope=(24, 20, 20),
        text_hidden=2048, text_vocab=151936, **_CP_REAL, **_SPK_DEFAULT, **_CODEC_REAL,
        out_gain=0.07193, out_bias=0.01455,
    ),
}

# Speaker-encoder class defaults (used when the preset leaves them out of config.json, as the real file does).
SPK_DEFAULTS: dict[str, Any] = dict(channels=(512, 512, 512, 512, 1536), att=128, scale=8, se=128)

# Codec control ids relative to the codebook size (real: codebook 2048 -> pad 2148 ... languages 2050...).
CODEC_OFFSETS = {"pad": 100, "bos": 101, "eos": 102, "think": 106, "nothink": 107, "think_bos": 108, "think_eos": 109}
LANGUAGE_OFFSETS = {
    "chinese": 7, "english": 2, "german": 5, "italian": 22, "portuguese": 23, "spanish": 6, "japanese": 10,
    "korean": 16, "french": 13, "russian": 21,
}

GENERATION_CONFIG = {
    "do_sample": True,
    "repetition_penalty": 1.05,
    "temperature": 0.9,
    "top_p": 1.0,
    "top_k": 50,
    "subtalker_dosample": True,
    "subtalker_temperature": 0.9,
    "subtalker_top_p": 1.0,
    "subtalker_top_k": 50,
    "max_new_tokens": 8192,
}

TRANSFORMERS_VERSION = "4.57.3"


def get_preset(preset: str | Preset) -> Preset:
    if isinstance(preset, Preset):
        return preset
    try:
        return PRESETS[preset.lower()]
    except KeyError:
        raise EngineError(f"unknown checkpoint preset {preset!r}; choose one of {', '.join(PRESETS)}") from None
