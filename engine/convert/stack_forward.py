"""The fp32 forward pass of the talker's and the code predictor's decoder stacks in numpy, read from a checkpoint.

Two users: the outlier smoothing's calibration (smooth.py: the activation maxima at every Linear input) and the
8-bit check's per-layer measurement (q8_layers.py: how far one Linear's 8-bit product alone moves the logits).
`linear` lets a caller replace any Linear's product; `record` sees every Linear input.
stack_shape reads a stack's shape from its config, checked: the converter builds the graphs from it, the manifest
records it (manifest_parts.StackShape, the one declaration) and this forward runs on it.

Linear sites are named as the converter names its Linears (talker.py): "qkv" (q/k/v_proj, one fused product), "o",
"gate_up" (gate/up_proj, fused) and "down".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import ConvertError
from ..runtime.manifest_parts import StackShape
from .checkpoint import Checkpoint

TALKER = "talker.model."
CODE_PREDICTOR = "talker.code_predictor.model."
SITES = ("qkv", "o", "gate_up", "down")
# the smoothing's names for the inputs of those sites (its calibration statistics are keyed by them)
SITE_INPUTS = {"qkv": "attn_in", "o": "o_in", "gate_up": "mlp_in", "down": "down_in"}

Get = Callable[[str], np.ndarray]
# linear(layer, site, x, weight names) -> x @ concat(weights).T (+ biases), or None for the fp32 product
Linear = Callable[[int, str, np.ndarray, list[str]], np.ndarray | None]
Record = Callable[[tuple[int, str], np.ndarray], None]


def stack_shape(cfg: dict[str, Any], what: str) -> StackShape:
    """One decoder stack's shape from its config dict (the talker's, or its code_predictor_config), checked for
    what the converted graphs support; the manifest records it as it is (TalkerPart)."""
    try:
        hidden = int(cfg["hidden_size"])
        heads = int(cfg["num_attention_heads"])
        shape = StackShape(
            layers=int(cfg["num_hidden_layers"]),
            hidden=hidden,
            heads=heads,
            kv_heads=int(cfg.get("num_key_value_heads") or heads),
            head_dim=int(cfg.get("head_dim") or hidden // heads),
            intermediate=int(cfg["intermediate_size"]),
            eps=float(cfg.get("rms_norm_eps", 1e-6)),
            rope_theta=float(cfg.get("rope_theta", 10000.0)),
        )
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as e:
        raise ConvertError(f"config.json: {what} config is missing or has a bad value: {e}") from None
    if min(shape.layers, shape.hidden, shape.heads, shape.kv_heads, shape.head_dim, shape.intermediate) < 1:
        raise ConvertError(f"config.json: {what} config has a size below 1 ({shape})")
    if shape.heads % shape.kv_heads:
        raise ConvertError(f"config.json: {what} has {shape.heads} heads, not a multiple of {shape.kv_heads} kv heads")
    if shape.head_dim % 2:
        raise ConvertError(f"config.json: {what} head_dim {shape.head_dim} is odd; RoPE needs an even size")
    if cfg.get("use_sliding_window") or "sliding_attention" in (cfg.get("layer_types") or []):
        raise ConvertError(f"config.json: {what} uses sliding-window attention, which is not supported")
    if (cfg.get("hidden_act") or "silu") != "silu":
        raise ConvertError(f"config.json: {what} activation {cfg.get('hidden_act')!r} is not supported")
    scaling = cfg.get("rope_scaling") or {}
    rope_type = scaling.get("rope_type", scaling.get("type", "default"))
    if rope_type != "default":
        raise ConvertError(f"config.json: {what} rope type {rope_type!r} is not supported")
    return shape


def stacks(ckpt: Checkpoint) -> list[tuple[str, dict[str, Any]]]:
    cfg = ckpt.talker_config
    return [(TALKER, cfg), (CODE_PREDICTOR, cfg["code_predictor_config"])]


def site_weights(prefix: str, layer: int, site: str) -> list[str]:
    """The checkpoint tensors of one Linear site, in the converter's concatenation order."""
    a, m = f"{prefix}layers.{layer}.self_attn.", f"{prefix}layers.{layer}.mlp."
    return {"qkv": [a + "q_proj.weight", a + "k_proj.weight", a + "v_proj.weight"],
            "o": [a + "o_proj.weight"],
            "gate_up": [m + "gate_proj.weight", m + "up_proj.weight"],
            "down": [m + "down_proj.weight"]}[site]


def rms(x: np.ndarray, g: np.ndarray, eps: float) -> np.ndarray:
    return (x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * g).astype(np.float32)


class TextRows:
    """text_projection(text_embedding[id]) in numpy, reading only the rows used."""

    def __init__(self, ckpt: Checkpoint):
        self.ckpt = ckpt
        get = ckpt.main.get
        p = "talker.text_projection."
        self.w1, self.b1 = get(p + "linear_fc1.weight"), get(p + "linear_fc1.bias")
        self.w2, self.b2 = get(p + "linear_fc2.weight"), get(p + "linear_fc2.bias")
        self.vocab = ckpt.main.shape("talker.model.text_embedding.weight")[0]

    def __call__(self, token: int) -> np.ndarray:
        e = self.ckpt.main.get_rows("talker.model.text_embedding.weight", token, token + 1)[0]
        h = e @ self.w1.T + self.b1
        h = h / (1 + np.exp(-h))
        return (h @ self.w2.T + self.b2).astype(np.float32)


class StackForward:
    """One decoder stack over sequences x (B, L, H), causal, fp32: layer() runs one layer, final() the last norm."""

    def __init__(self, get: Get, has: Callable[[str], bool], prefix: str, shape: StackShape, length: int):
        self.get, self.has, self.prefix, self.s = get, has, prefix, shape
        inv = shape.rope_theta ** (-np.arange(0, shape.head_dim, 2, dtype=np.float64) / shape.head_dim)
        ang = np.arange(length)[:, None] * inv[None]
        self.cos, self.sin = np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)
        self.mask = np.triu(np.full((length, length), -np.inf, np.float32), 1)

    def _rope(self, t: np.ndarray) -> np.ndarray:  # (B, n, L, hd), rotate-half convention
        half = self.s.head_dim // 2
        h1, h2 = t[..., :half], t[..., half:]
        return np.concatenate([h1 * self.cos - h2 * self.sin, h2 * self.cos + h1 * self.sin], axis=-1)

    def _product(self, layer: int, site: str, x: np.ndarray, linear: Linear | None) -> np.ndarray:
        names = site_weights(self.prefix, layer, site)
        if linear is not None:
            y = linear(layer, site, x, names)
            if y is not None:
                return y
        parts = []
        for n in names:  # one product per tensor, then joined: the same sums as unfused Linears
            y = x @ self.get(n).T
            bias = n[:-len("weight")] + "bias"
            parts.append(y + self.get(bias) if self.has(bias) else y)
        return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=-1)

    def layer(self, i: int, x: np.ndarray, linear: Linear | None = None, record: Record | None = None) -> np.ndarray:
        s, get = self.s, self.get
        b, length, _ = x.shape
        p = f"{self.prefix}layers.{i}."
        a = p + "self_attn."
        qd, kd = s.heads * s.head_dim, s.kv_heads * s.head_dim
        h = rms(x, get(p + "input_layernorm.weight"), s.eps)
        if record:
            record((i, "qkv"), h)
        qkv = self._product(i, "qkv", h, linear)

        def heads(t: np.ndarray, n: int) -> np.ndarray:
            return t.reshape(b, length, n, s.head_dim).transpose(0, 2, 1, 3)

        q = self._rope(rms(heads(qkv[..., :qd], s.heads), get(a + "q_norm.weight"), s.eps))
        k = self._rope(rms(heads(qkv[..., qd:qd + kd], s.kv_heads), get(a + "k_norm.weight"), s.eps))
        v = heads(qkv[..., qd + kd:], s.kv_heads)
        group = s.heads // s.kv_heads
        k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
        att = q @ k.transpose(0, 1, 3, 2) * np.float32(s.head_dim ** -0.5) + self.mask[:length, :length]
        att = np.exp(att - att.max(-1, keepdims=True))
        att = (att / att.sum(-1, keepdims=True)) @ v
        att = att.transpose(0, 2, 1, 3).reshape(b, length, qd)
        if record:
            record((i, "o"), att)
        x = x + self._product(i, "o", att, linear)
        h = rms(x, get(p + "post_attention_layernorm.weight"), s.eps)
        if record:
            record((i, "gate_up"), h)
        gu = self._product(i, "gate_up", h, linear)
        inter = gu.shape[-1] // 2
        gate = gu[..., :inter]
        y = gate / (1 + np.exp(-gate)) * gu[..., inter:]
        if record:
            record((i, "down"), y)
        return (x + self._product(i, "down", y, linear)).astype(np.float32)

    def final(self, x: np.ndarray) -> np.ndarray:
        return rms(x, self.get(self.prefix + "norm.weight"), self.s.eps)
