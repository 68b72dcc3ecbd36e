"""Outlier smoothing for q8 bundles (SmoothQuant, Xiao et al. 2023), folded exactly into the weights.

q8's int8 Gemm rounds each activation row with one scale set by the row's largest value (q8.py), so a few input
channels 10-100x larger than the rest, as real LLM activations have, leave every other input of the row a few
bits. Smoothing divides such a channel j by a factor s_j and multiplies the matching input column of every Linear
that reads it by s_j: the product is unchanged, the activation row flatter. The factors are moved into the layer
that produces the activation, so nothing changes at run time:
- the inputs of q/k/v_proj and of gate/up_proj are RMSNorm outputs: the norm gain is divided by s;
- the input of down_proj is silu(gate) * up: up_proj's rows are divided by s;
- the input of o_proj is the attention output, linear in v: v_proj's rows are divided by s, one factor per kv
  channel shared by the query heads that read it;
- the code predictor's lm heads read its final norm: that gain is divided by s (all heads share it).
s_j = max|X_j|^ALPHA / max|W_j|^(1 - ALPHA), relative to the site's median channel and rounded to a power of two;
only channels 4x or more from the median move (MIN_SHIFT). A multiply by a power of two is exact in floating point,
so a smoothed network computes the same function to the last bit in fp32 (tests/test_q8_smooth.py converts fp32
bundles both ways and compares).
max|X_j| comes from a calibration pass of the fp32 network in numpy over the model's own prompt rows (role and
codec control tokens, text tokens, then frames fed back from codes), and max|W_j| over the columns of every
Linear reading X. ALPHA 0.5 is SmoothQuant's default. Measured on the full-size random 0.6B checkpoint
(benchmarks/q8_accuracy.py, teacher-forced KL talker / code predictor): moving every channel (factors 2x and up)
made the plain checkpoint worse, 1.46e-3 / 1.56e-3 against 7.7e-4 / 1.18e-3 unsmoothed, as random weights have no
outliers to remove; with MIN_SHIFT 2 it is unchanged (7.6e-4 / 1.18e-3) and its 32x outlier copy goes from
3.9e-2 / 6.7e-2 to 8.0e-4 / 1.29e-3 (docs/performance.md, "8-bit accuracy").
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from ..runtime import q8
from ..runtime.manifest_parts import StackShape
from .checkpoint import Checkpoint
from .stack_forward import CODE_PREDICTOR, SITE_INPUTS, TALKER, StackForward, TextRows, stack_shape, stacks

ALPHA = 0.5
MIN_SHIFT = 2  # factors 2^e with |e| < MIN_SHIFT stay 1: random-weight noise, not outliers (module docstring)
SEARCH = ((0.5, 2), (0.5, 1), (0.75, 2), (0.75, 1), (0.25, 1))  # (alpha, min_shift) tried per site by alpha None
MAX_SITE_ROWS = 256  # calibration rows kept per site for the search
CALIBRATION_TEXT_TOKENS = 24
CALIBRATION_FRAMES = 24


class SmoothedWeights:
    """The checkpoint's main weights with the smoothed tensors replaced (what the converter reads)."""

    def __init__(self, main, changed: dict[str, np.ndarray]):
        self._main, self.changed = main, changed

    def get(self, name: str, dtype=np.float32) -> np.ndarray:
        if name in self.changed:
            return np.array(self.changed[name], dtype=dtype)
        return self._main.get(name, dtype)

    def get_rows(self, name: str, start: int, stop: int) -> np.ndarray:
        if name in self.changed:
            return np.array(self.changed[name][start:stop], np.float32)
        return self._main.get_rows(name, start, stop)

    def __contains__(self, name: str) -> bool:
        return name in self._main

    def keys(self) -> list[str]:
        return self._main.keys()

    def shape(self, name: str) -> tuple[int, ...]:
        return self._main.shape(name)

    def element_count(self) -> int:
        return self._main.element_count()

    def close(self) -> None:
        """Nothing to close: the file read through belongs to the checkpoint these weights were made from."""


def smoothed(ckpt: Checkpoint, alpha: float | None = ALPHA) -> tuple[Checkpoint, dict[str, Any]]:
    """The checkpoint with smoothed weights, and a summary for the bundle manifest. alpha None: per site, the
    candidate of SEARCH whose 8-bit output error on the calibration rows is smallest (no smoothing included)."""
    rows: dict[tuple[str, int, str], np.ndarray] | None = {} if alpha is None else None
    stats = calibrate(ckpt, rows)
    get = ckpt.main.get
    changed: dict[str, np.ndarray] = {}
    moved = 0

    def w(name: str) -> np.ndarray:
        return changed[name] if name in changed else get(name)

    for prefix, cfg in _stacks(ckpt):
        spec = stack_shape(cfg, prefix)
        for i in range(spec.layers):
            p = f"{prefix}layers.{i}."
            a, m = p + "self_attn.", p + "mlp."
            qkv = [a + "q_proj.weight", a + "k_proj.weight", a + "v_proj.weight"]
            site = (prefix, i, "attn_in")
            moved += _fold_norm(changed, w, stats[site], p + "input_layernorm.weight", qkv, alpha, rows, site)
            site = (prefix, i, "mlp_in")
            moved += _fold_norm(changed, w, stats[site], p + "post_attention_layernorm.weight",
                                [m + "gate_proj.weight", m + "up_proj.weight"], alpha, rows, site)
            site = (prefix, i, "down_in")
            moved += _fold_rows(changed, w, stats[site], m + "up_proj.weight", [m + "down_proj.weight"], alpha,
                                rows, site)
            # o_proj: one factor per kv channel (v_proj row), the max over the query heads of its group
            o = w(a + "o_proj.weight")
            group = spec.heads // spec.kv_heads
            ax = stats[(prefix, i, "o_in")].reshape(spec.kv_heads, group, spec.head_dim).max(1).reshape(-1)
            aw = np.abs(o).max(0).reshape(spec.kv_heads, group, spec.head_dim).max(1).reshape(-1)

            def per_head(s: np.ndarray, kv=spec.kv_heads, hd=spec.head_dim, group=group) -> np.ndarray:
                return np.repeat(s.reshape(kv, 1, hd), group, axis=1).reshape(-1)

            s = _choose(ax, aw, alpha, rows, (prefix, i, "o_in"), [o], per_head)
            if np.any(s != 1):
                s_cols = per_head(s)
                changed[a + "o_proj.weight"] = o * s_cols.astype(np.float32)
                changed[a + "v_proj.weight"] = w(a + "v_proj.weight") / s[:, None].astype(np.float32)
                if a + "v_proj.bias" in ckpt.main:
                    changed[a + "v_proj.bias"] = w(a + "v_proj.bias") / s.astype(np.float32)
                moved += int(np.sum(s != 1))
    groups = int(ckpt.talker_config.get("num_code_groups", 16))
    heads = [f"talker.code_predictor.lm_head.{g}.weight" for g in range(groups - 1)]
    site = (CODE_PREDICTOR, -1, "final")
    moved += _fold_norm(changed, w, stats[site], CODE_PREDICTOR + "norm.weight", heads, alpha, rows, site)
    layers = sum(int(cfg["num_hidden_layers"]) for _, cfg in _stacks(ckpt))
    summary = {"method": "smoothquant-pow2", "alpha": "search" if alpha is None else alpha, "min_shift": MIN_SHIFT,
               "layers": layers,
               "channels_moved": moved,
               "calibration": {"text_tokens": CALIBRATION_TEXT_TOKENS, "frames": CALIBRATION_FRAMES}}
    return replace(ckpt, main=SmoothedWeights(ckpt.main, changed)), summary


def _factors(ax: np.ndarray, aw: np.ndarray, alpha: float, min_shift: int = MIN_SHIFT) -> np.ndarray:
    """Powers of two s_j (float64) from activation and weight column maxima; the median channel gets 1."""
    ok = (ax > 0) & (aw > 0)
    if not ok.any():
        return np.ones_like(ax, np.float64)
    ax, aw = np.where(ok, ax, 1.0), np.where(ok, aw, 1.0)
    e = alpha * np.log2(ax.astype(np.float64)) - (1 - alpha) * np.log2(aw.astype(np.float64))
    e = np.round(e - np.median(e[ok]))
    e = np.where(ok & (np.abs(e) >= min_shift), np.clip(e, -20, 20), 0)
    return np.exp2(e)


def _q8_error(x: np.ndarray, weights: list[np.ndarray], s: np.ndarray) -> float:
    """Squared error of the 8-bit Linears (q8.py's rounding, float sums) on rows x smoothed by s, relative."""
    xq, descale = q8.quantize_rows(x / s.astype(np.float32))
    xq = xq.astype(np.float32)
    err = ref_sq = 0.0
    for w in weights:
        ref = x @ w.T
        q, scale = q8.quantize(w * s.astype(np.float32))
        err += float(np.sum(((xq @ q.astype(np.float32).T) * descale * scale - ref) ** 2))
        ref_sq += float(np.sum(ref * ref))
    return err / max(ref_sq, 1e-30)


def _choose(ax, aw, alpha, rows, site, weights: list[np.ndarray], expand=lambda s: s) -> np.ndarray:
    """The factors for one site: SmoothQuant's at `alpha`, or (alpha None) the best of SEARCH on the rows."""
    if alpha is not None:
        return _factors(ax, aw, alpha)
    x = rows[site]
    best, best_err = np.ones_like(ax, np.float64), _q8_error(x, weights, np.ones(x.shape[1]))
    for a, shift in SEARCH:
        s = _factors(ax, aw, a, shift)
        if np.any(s != 1) and not np.array_equal(s, best):
            err = _q8_error(x, weights, expand(s))
            if err < best_err:
                best, best_err = s, err
    return best


def _fold_norm(changed, w, ax, norm: str, readers: list[str], alpha, rows, site) -> int:
    aw = np.max([np.abs(w(r)).max(0) for r in readers], axis=0)
    s = _choose(ax, aw, alpha, rows, site, [w(r) for r in readers])
    if np.all(s == 1):
        return 0
    changed[norm] = w(norm) / s.astype(np.float32)
    for r in readers:
        changed[r] = w(r) * s.astype(np.float32)
    return int(np.sum(s != 1))


def _fold_rows(changed, w, ax, producer: str, readers: list[str], alpha, rows, site) -> int:
    aw = np.max([np.abs(w(r)).max(0) for r in readers], axis=0)
    s = _choose(ax, aw, alpha, rows, site, [w(r) for r in readers])
    if np.all(s == 1):
        return 0
    changed[producer] = w(producer) / s[:, None].astype(np.float32)
    for r in readers:
        changed[r] = w(r) * s.astype(np.float32)
    return int(np.sum(s != 1))


# ------------------------------------------------------------------------------------------- calibration


def _stacks(ckpt: Checkpoint) -> list[tuple[str, dict[str, Any]]]:
    return stacks(ckpt)


def calibrate(ckpt: Checkpoint, site_rows: dict | None = None) -> dict[tuple[str, int, str], np.ndarray]:
    """Per-channel max |activation| at every smoothing site: (stack prefix, layer, site) -> [channels]
    (layer -1: the final norm; site "residual": the residual stream after the layer). The talker runs one prompt
    then CALIBRATION_FRAMES frames fed back from random codes (teacher forcing: one causal pass); the code predictor
    runs each frame's 16-row sequence. site_rows, if given, receives up to MAX_SITE_ROWS activation rows per site."""
    get = ckpt.main.get
    cfg = ckpt.talker_config
    cp_cfg = cfg["code_predictor_config"]
    rng = np.random.default_rng(0)
    codebook, groups = int(cp_cfg["vocab_size"]), int(cfg.get("num_code_groups", 16))
    text = TextRows(ckpt)
    codec = get("talker.model.codec_embedding.weight")
    top = ckpt.config
    first_text = int(top["im_start_token_id"])
    words = rng.integers(0, max(1, min(first_text, ckpt.main.shape("talker.model.text_embedding.weight")[0])),
                         CALIBRATION_TEXT_TOKENS)
    rows = [text(int(top["im_start_token_id"])), text(int(top["assistant_token_id"])), text(int(words[0]))]
    pad_t = text(int(top["tts_pad_token_id"]))
    prefix = [cfg.get(k) for k in ("codec_nothink_id", "codec_think_bos_id", "codec_think_eos_id")]
    rows += [pad_t + codec[int(c)] for c in prefix if c is not None]
    pad_c = codec[int(cfg["codec_pad_id"])]
    rows.append(text(int(top["tts_bos_token_id"])) + pad_c)
    rows += [text(int(t)) + pad_c for t in words[1:]]
    rows.append(text(int(top["tts_eos_token_id"])) + pad_c)
    rows.append(pad_t + codec[int(cfg["codec_bos_id"])])
    start = len(rows)
    codes = rng.integers(0, codebook, (CALIBRATION_FRAMES, groups))
    cp_tables = [get(f"talker.code_predictor.model.codec_embedding.{g}.weight") for g in range(groups - 1)]
    for frame in codes[:-1]:
        rows.append(pad_t + codec[frame[0]] + sum(t[c] for t, c in zip(cp_tables, frame[1:], strict=True)))
    stats: dict[tuple[str, int, str], np.ndarray] = {}
    x = np.stack(rows).astype(np.float32)[None]
    hidden = _run_stack(ckpt, TALKER, stack_shape(cfg, "talker"), x, stats, site_rows)[0, start - 1:]  # the rows each frame starts from
    proj = "talker.code_predictor.small_to_mtp_projection."
    seq = [hidden[:, None]] + [codec[codes[:, 0]][:, None]]
    seq += [cp_tables[g][codes[:, g + 1]][:, None] for g in range(groups - 2)]
    x = np.concatenate(seq, axis=1).astype(np.float32)  # (frames, groups, talker width)
    if proj + "weight" in ckpt.main:
        x = x @ get(proj + "weight").T + (get(proj + "bias") if proj + "bias" in ckpt.main else 0)
    _run_stack(ckpt, CODE_PREDICTOR, stack_shape(cp_cfg, "code predictor"), x.astype(np.float32), stats, site_rows)
    return stats


def _absmax(a: np.ndarray) -> np.ndarray:
    return np.abs(a.reshape(-1, a.shape[-1])).max(0)


def _run_stack(ckpt: Checkpoint, prefix: str, s: StackShape, x: np.ndarray,
               stats: dict[tuple[str, int, str], np.ndarray], rows: dict | None = None) -> np.ndarray:
    """fp32 forward of a decoder stack over sequences x (B, L, H) (stack_forward.py); records the site maxima and
    returns the final-normed output."""

    def record(site: tuple[str, int, str], a: np.ndarray) -> None:
        stats[site] = _absmax(a)
        if rows is not None:
            flat = a.reshape(-1, a.shape[-1])
            rows[site] = flat[:: max(1, -(-len(flat) // MAX_SITE_ROWS))].astype(np.float32)

    def record_input(where: tuple[int, str], a: np.ndarray) -> None:
        record((prefix, where[0], SITE_INPUTS[where[1]]), a)

    forward = StackForward(ckpt.main.get, ckpt.main.__contains__, prefix, s, x.shape[1])
    for i in range(s.layers):
        x = forward.layer(i, x, record=record_input)
        stats[(prefix, i, "residual")] = _absmax(x)
    out = forward.final(x)
    record((prefix, -1, "final"), out)
    return out
