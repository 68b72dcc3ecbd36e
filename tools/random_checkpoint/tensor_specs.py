"""Tensor layout of the main model: names, shapes and how each is initialised, for the talker, the code
predictor and the speaker encoder (the speech tokenizer's are in speech_tensors.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from .configs import codec_ids
from .presets import SPK_DEFAULTS, Preset


@dataclass(frozen=True)
class TensorSpec:
    name: str
    shape: tuple[int, ...]
    init: str  # "normal" (std), "norm" (1 + 0.1 N), "uniform" (lo, hi), "usage", "codesum" (std), "ones", "const"
    a: float = 0.0
    b: float = 0.0
    pair: str = ""  # for "codesum": the matching cluster_usage tensor
    gain: float = 1.0
    rows: tuple[tuple[int, float], ...] = ()  # (row, extra gain) pairs, e.g. the talker's EOS row

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


def _w(name: str, *shape: int, fan_in: float | None = None, gain: float = 1.0) -> TensorSpec:
    """Linear / conv weight, std 1/sqrt(fan_in) (fan_in = prod(shape[1:]) unless given)."""
    fi = fan_in if fan_in is not None else math.prod(shape[1:])
    return TensorSpec(name, tuple(shape), "normal", 1.0 / math.sqrt(fi), gain=gain)


def _b(name: str, n: int) -> TensorSpec:
    return TensorSpec(name, (n,), "normal", 0.05)


def _norm(name: str, n: int) -> TensorSpec:
    return TensorSpec(name, (n,), "norm")


def _emb(name: str, rows: int, dim: int) -> TensorSpec:
    return TensorSpec(name, (rows, dim), "normal", 1.0)


def _uni(name: str, n: int, lo: float, hi: float) -> TensorSpec:
    return TensorSpec(name, (n,), "uniform", lo, hi)


def _snake(prefix: str, n: int) -> list[TensorSpec]:
    return [TensorSpec(f"{prefix}.alpha", (n,), "normal", 0.3), TensorSpec(f"{prefix}.beta", (n,), "normal", 0.3)]


def _conv(prefix: str, cout: int, cin: int, k: int, bias: bool = True, gain: float = 1.0) -> list[TensorSpec]:
    out = [_w(f"{prefix}.weight", cout, cin, k, gain=gain)]
    if bias:
        out.append(_b(f"{prefix}.bias", cout))
    return out


def _qwen3_layer(prefix: str, hidden: int, heads: int, kv: int, head_dim: int, inter: int) -> list[TensorSpec]:
    a = f"{prefix}.self_attn"
    return [
        _w(f"{a}.q_proj.weight", heads * head_dim, hidden),
        _w(f"{a}.k_proj.weight", kv * head_dim, hidden),
        _w(f"{a}.v_proj.weight", kv * head_dim, hidden),
        _w(f"{a}.o_proj.weight", hidden, heads * head_dim),
        _norm(f"{a}.q_norm.weight", head_dim),
        _norm(f"{a}.k_norm.weight", head_dim),
        _w(f"{prefix}.mlp.gate_proj.weight", inter, hidden),
        _w(f"{prefix}.mlp.up_proj.weight", inter, hidden),
        _w(f"{prefix}.mlp.down_proj.weight", hidden, inter),
        _norm(f"{prefix}.input_layernorm.weight", hidden),
        _norm(f"{prefix}.post_attention_layernorm.weight", hidden),
    ]


def main_tensors(p: Preset, text_vocab: int) -> list[TensorSpec]:
    t: list[TensorSpec] = []
    m = "talker.model"
    t.append(_emb(f"{m}.text_embedding.weight", text_vocab, p.text_hidden))
    t.append(_emb(f"{m}.codec_embedding.weight", p.codebook + 1024, p.t_hidden))
    for i in range(p.t_layers):
        t += _qwen3_layer(f"{m}.layers.{i}", p.t_hidden, p.t_heads, p.t_kv, p.t_head_dim, p.t_inter)
    t.append(_norm(f"{m}.norm.weight", p.t_hidden))
    t += [
        _w("talker.text_projection.linear_fc1.weight", p.text_hidden, p.text_hidden),
        _b("talker.text_projection.linear_fc1.bias", p.text_hidden),
        _w("talker.text_projection.linear_fc2.weight", p.t_hidden, p.text_hidden),
        _b("talker.text_projection.linear_fc2.bias", p.t_hidden),
        replace(_w("talker.codec_head.weight", p.codebook + 1024, p.t_hidden),
                rows=((codec_ids(p)["eos"], p.eos_gain),) if p.eos_gain != 1.0 else ()),
    ]
    c = "talker.code_predictor"
    for g in range(15):
        t.append(_emb(f"{c}.model.codec_embedding.{g}.weight", p.codebook, p.t_hidden))
    for i in range(p.cp_layers):
        t += _qwen3_layer(f"{c}.model.layers.{i}", p.cp_hidden, p.cp_heads, p.cp_kv, p.cp_head_dim, p.cp_inter)
    t.append(_norm(f"{c}.model.norm.weight", p.cp_hidden))
    for g in range(15):
        t.append(_w(f"{c}.lm_head.{g}.weight", p.codebook, p.cp_hidden))
    if p.t_hidden != p.cp_hidden:
        t += [_w(f"{c}.small_to_mtp_projection.weight", p.cp_hidden, p.t_hidden),
              _b(f"{c}.small_to_mtp_projection.bias", p.cp_hidden)]
    t += speaker_tensors(p)
    return t


def speaker_tensors(p: Preset) -> list[TensorSpec]:
    ch = p.spk_channels or SPK_DEFAULTS["channels"]
    att = p.spk_att or SPK_DEFAULTS["att"]
    scale = p.spk_scale or SPK_DEFAULTS["scale"]
    se = p.spk_se or SPK_DEFAULTS["se"]
    kernels, s = [5, 3, 3, 3, 1], "speaker_encoder"
    t = _conv(f"{s}.blocks.0.conv", ch[0], 128, kernels[0])
    for i in range(1, len(ch) - 1):
        b = f"{s}.blocks.{i}"
        t += _conv(f"{b}.tdnn1.conv", ch[i], ch[i - 1], 1)
        for j in range(scale - 1):
            t += _conv(f"{b}.res2net_block.blocks.{j}.conv", ch[i] // scale, ch[i] // scale, kernels[i])
        t += _conv(f"{b}.tdnn2.conv", ch[i], ch[i], 1)
        t += _conv(f"{b}.se_block.conv1", se, ch[i], 1)
        t += _conv(f"{b}.se_block.conv2", ch[i], se, 1)
    t += _conv(f"{s}.mfa.conv", ch[-1], ch[-1], kernels[-1])
    t += _conv(f"{s}.asp.tdnn.conv", att, ch[-1] * 3, 1)
    t += _conv(f"{s}.asp.conv", ch[-1], att, 1)
    t += _conv(f"{s}.fc", p.t_hidden, ch[-1] * 2, 1)
    return t
