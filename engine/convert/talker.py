"""Talker + code predictor -> two ncnn graphs and three numpy tables.

Graph `talker` (one call per step, KV cache inside SDPA):
    inputs  in0   (H,) for one step or (L, H) for a prefill      residual-stream input rows
            cos, sin  (L, head_dim/2)                            RoPE rows for the positions of in0
            mask  (L, past + L)                                  additive causal mask (zeros for one step)
            k_in_<i>, v_in_<i>                                   cache of layer i (opaque, fed back as extracted)
    outputs hidden (final-normed, (H,) or (L, H)), logits (codec_head), k_out_<i>, v_out_<i>
Graph `code_predictor` (one row per call, no mask; cache restarts every frame):
    inputs  in0 (talker width,), cos, sin (1, head_dim/2), k_in_<i>, v_in_<i>
    outputs logits_<g> (g = 0..G-2, lm_head[g]; only the requested head runs), k_out_<i>, v_out_<i>
    small_to_mtp_projection (Linear with bias) is the first layer when the widths differ.
Tables: talker_codec_embedding (V, H); cp_codec_embedding (G-1, codebook, H) (talker width, for the feedback sum).

One decode row stays 1-D through the whole stack so every Linear runs ncnn's GEMV kernel; a prefill is 2-D
(GEMM kernel). Squeeze(h) after the attention reshape turns a 1-row matrix back into a vector.
q/k/v and gate/up are fused into one InnerProduct each (same rows, so the same dot products).

Weight storage: fp16 bundles store every Linear weight as fp16. fp32 bundles store a Linear weight as fp16 when
that is lossless for it (every value of fp16 normal magnitude converts exactly; values below 2^-14 move by at most
2^-25): true for bf16 checkpoints, the form the real ones ship in. On x86, ncnn's fp16 weight storage keeps all
activations in fp32 and accumulates in fp32, so such a bundle computes with the checkpoint's exact weights at half
the memory traffic. Other Linears of an fp32 bundle stay fp32 and carry featmask "no fp16 storage" (param 31).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..errors import ConvertError
from ..runtime import q8
from ..runtime.manifest_parts import StackShape, TalkerPart
from ..runtime.ncnn_graph import Graph, Packed, Weight, raw, tagged
from . import q8_split, smooth
from .checkpoint import Checkpoint
from .stack_forward import stack_shape

TALKER_GRAPH = "talker"
CP_GRAPH = "code_predictor"
FP16_MAX = 65504.0
FP16_MIN_NORMAL = 2.0**-14
FEATMASK_NO_FP16 = 1 << 1  # ncnn per-layer featmask bit: no fp16 storage/packing for this layer
FEATMASK_ONE_THREAD = 1 << 7  # ncnn per-layer featmask bit: run this layer on one thread
# q8 Linears: "int8" (ncnn's int8 Gemm + a scale per output channel; rows independent of each other, the fast
# kernels) or "block" (the 8-bit block Gemm of older bundles, kept so benchmarks/q8_accuracy.py can compare them);
# see q8.py and docs/performance.md, "Precision"
Q8_FORMAT = "int8"
# values per scale of the block format: 128 ran 1.1-1.4x faster than 32 at full size for 1.4x the sampling KL
Q8_BLOCK = 128


def fp16_lossless(w: np.ndarray) -> bool:
    """Every value of fp16 normal magnitude converts exactly (smaller ones move by at most 2^-25)."""
    if not np.isfinite(w).all() or float(np.max(np.abs(w), initial=0.0)) >= FP16_MAX:
        return False
    back = w.astype(np.float16).astype(np.float32)
    return bool(np.all((back == w) | (np.abs(w) < FP16_MIN_NORMAL)))


class _Builder:
    """Adds layers of one stack to a Graph, reading weights from the checkpoint."""

    def __init__(self, g: Graph, ckpt: Checkpoint, precision: str, net: str = "",
                 promote: frozenset[str] = frozenset(), split: q8_split.Split | None = None):
        """net: "talker" or "code_predictor" (the first part of a Linear's name, q8_layers.linear_name); promote:
        names of Linears a q8 bundle keeps in fp32 (the 8-bit check's choice, q8_check.py); split: the q8 Linears
        whose outlier input channels are computed apart in fp32 (q8_split.py; the check's first choice)."""
        self.g, self.ckpt, self.precision, self.net, self.promote = g, ckpt, precision, net, promote
        self.split = split or {}
        self.split_done: dict[str, tuple[int, ...]] = {}
        self._split_inputs: dict[tuple[str, tuple[int, ...], bool], tuple[str, str]] = {}
        self.fp16_layers = 0
        self.fp32_layers = 0
        self.q8_layers = 0
        self.promoted: list[str] = []  # Linears kept float (fp16-stored where lossless)
        self.promoted_fp32: list[str] = []  # of those, the ones stored fp32

    def w(self, name: str) -> np.ndarray:
        return self.ckpt.main.get(name)

    def has(self, name: str) -> bool:
        return name in self.ckpt.main

    def linear(self, x: str, weights: list[np.ndarray], biases: list[np.ndarray | None] | None = None,
               name: str | None = None, *, site: str = "", folded: bool = False,
               out_factor: np.ndarray | None = None) -> str:
        """InnerProduct over the row-concatenation of `weights` (PyTorch [out, in] layout); q8 bundles get an int8
        Gemm instead (q8_linear), or where the 8-bit check promoted the Linear (`site`: its name after the net's),
        an fp32 InnerProduct in the same frame (promoted_linear). folded, out_factor: q8_linear's (only for a Linear
        that q8_linear makes: folds() says which)."""
        w = np.concatenate(weights, axis=0) if len(weights) > 1 else weights[0]
        if self.precision == "q8":
            full_name = f"{self.net}.{site}"
            if full_name in self.promote:
                return self.promoted_linear(x, w, biases, weights, name, full_name)
            channels = tuple(self.split.get(full_name, ()))
            if channels:
                self.split_done[full_name] = channels
            return self.q8_linear(x, w, biases, weights, name, channels, folded, out_factor)
        params: dict[int, Any] = {0: int(w.shape[0]), 1: 0, 2: int(w.size)}
        fp16 = self.precision == "fp16" or (self.precision == "fp32" and fp16_lossless(w))
        if fp16:
            self.fp16_layers += 1
        else:
            self.fp32_layers += 1
            if self.precision == "fp32":
                params[31] = FEATMASK_NO_FP16  # ncnn would round this layer's weights if fp16 storage is on
        ws = [tagged(w, fp16=fp16)]
        if biases is not None and any(b is not None for b in biases):
            full = [b if b is not None else np.zeros(wi.shape[0], np.float32) for b, wi in zip(biases, weights, strict=True)]
            params[1] = 1
            ws.append(raw(np.concatenate(full)))
        return self.g.layer("InnerProduct", [x], params=params, weights=ws, name=name)

    def q8_linear(self, x: str, w: np.ndarray, biases: list[np.ndarray | None] | None, parts: list[np.ndarray],
                  name: str | None, channels: tuple[int, ...] = (), folded: bool = False,
                  out_factor: np.ndarray | None = None) -> str:
        """The one place q8 weights are emitted: Reshape to (K, rows) -> int8 Gemm -> times the channel scales
        (-> plus the bias) -> Squeeze(h) (q8.py says what ncnn computes). `channels`: input channels split off
        (q8_split.py): the Gemm reads the rows with them zeroed, their fp32 product is added last. folded: the layer
        before already scaled those channels by q8_split.FOLD (no mask). out_factor: a factor per output channel
        (q8_split.FOLD on the channels a split Linear after this one reads), folded into the scale row and bias.

        The reshape keeps the Gemm's input 2-D; the squeeze gives a one-row input its 1-D output back, as
        InnerProduct would, so the layers after it are the same for every precision (the step graph turns it into
        a Noop: rows stay a matrix there)."""
        n, k = (int(d) for d in w.shape)
        bias = None
        if biases is not None and any(b is not None for b in biases):
            bias = np.concatenate([b if b is not None else np.zeros(p.shape[0], np.float32)
                                   for b, p in zip(biases, parts, strict=True)])
        self.q8_layers += 1
        gemm_name = f"{name}_gemm" if name else None
        if Q8_FORMAT == "block":
            rows = self.op("Reshape", [x], params={0: k, 1: -1})
            return self.op("Squeeze", [self._q8_block_gemm(rows, w, bias, gemm_name)], params={1: 1}, name=name)
        if channels:
            gemm_in, picked = self._split_input(x, k, channels, folded)
            w, outlier_w = q8.split_weights(w, channels)
        else:
            gemm_in = self.op("Reshape", [x], params={0: k, 1: -1})
        q, scale = q8.quantize(w)
        inputs = []
        if channels:
            # the outlier columns' fp32 product, divided by the channel scales, is the Gemm's C: the Gemm adds it
            # to its dequantized sum before the scale row multiplies both (no add layer of its own)
            inputs = [self.g.layer("InnerProduct", [picked], params={
                0: n, 1: 0, 2: n * len(channels), 31: q8_split.FEATMASK_NO_FP16_ONE_THREAD},
                weights=[tagged(q8_split.outlier_weights(outlier_w, scale, folded))])]
        if out_factor is not None:
            scale = (scale * out_factor).astype(np.float32)
            bias = None if bias is None else (bias * out_factor).astype(np.float32)
        y = self.g.layer("Gemm", [gemm_in, *inputs], params={2: 0, 3: 1, 4: 0, 5: 1, 6: 0, 7: 0, 8: n, 9: k, 10: -1,
                                                             18: q8.INT8_TERM},
                         weights=[Packed(q8.record(q))], name=gemm_name)
        y = self.op("BinaryOp", [y, self._row(scale)], params={0: 2})
        if bias is not None:
            y = self.op("BinaryOp", [y, self._row(bias)], params={0: 0})
        return self.op("Squeeze", [y], params={1: 1}, name=name)

    def _split_input(self, x: str, k: int, channels: tuple[int, ...], folded: bool) -> tuple[str, str]:
        """(rows for the int8 Gemm, the columns `channels`) of input x, made once per input and channel set (the
        code predictor's heads share theirs). The Gemm's rows: with `channels` zeroed by a mask, or (folded) the
        rows themselves, where the layer before scaled those channels down (q8_split.FOLD)."""
        key = (x, channels, folded)
        if key not in self._split_inputs:
            rows = self.op("Reshape", [x], params={0: k, 1: -1})
            if folded:
                gemm_in = rows
            else:
                mask = np.ones(k, np.float32)
                mask[list(channels)] = 0
                gemm_in = self.op("BinaryOp", [rows, self._row(mask)], params={0: 2})
            self._split_inputs[key] = (gemm_in, q8_split.selection(self, rows, k, channels))
        return self._split_inputs[key]

    def promoted_linear(self, x: str, w: np.ndarray, biases: list[np.ndarray | None] | None,
                        parts: list[np.ndarray], name: str | None, full_name: str) -> str:
        """A Linear of a q8 bundle kept in float: Reshape -> InnerProduct -> Squeeze(h), the frame of q8_linear, so
        the step graphs treat it as they treat an int8 Gemm (rows stay a matrix; with the packed layout off, ncnn's
        InnerProduct computes each row on its own, so batching still changes no row). Weights fp16-stored where
        that is lossless (bf16 checkpoints: 2 bytes a weight, computed in fp32 on x86, as fp32 bundles do; the
        runtime then loads the net with fp16 storage, which changes no other layer of a q8 graph: same bits,
        tests/test_q8_check.py), else fp32 with fp16 storage off for the layer."""
        n, k = (int(d) for d in w.shape)
        self.promoted.append(full_name)
        rows = self.op("Reshape", [x], params={0: k, 1: -1})
        params: dict[int, Any] = {0: n, 1: 0, 2: n * k}
        fp16 = fp16_lossless(w)
        if fp16:
            self.fp16_layers += 1
        else:
            self.promoted_fp32.append(full_name)
            params[31] = FEATMASK_NO_FP16
        ws = [tagged(w, fp16=fp16)]
        if biases is not None and any(b is not None for b in biases):
            params[1] = 1
            ws.append(raw(np.concatenate([b if b is not None else np.zeros(p.shape[0], np.float32)
                                          for b, p in zip(biases, parts, strict=True)])))
        y = self.g.layer("InnerProduct", [rows], params=params, weights=ws)
        return self.op("Squeeze", [y], params={1: 1}, name=name)

    def _row(self, values: np.ndarray) -> str:
        """A constant (1, N) row: 2-D so that BinaryOp broadcasts it over rows even when rows == N (q8.py)."""
        return self.op("MemoryData", [], params={0: int(values.size), 1: 1}, weights=[raw(values)])

    def _q8_block_gemm(self, rows: str, w: np.ndarray, bias: np.ndarray | None, name: str | None) -> str:
        """The legacy block format (q8.py): 8-bit blocks of Q8_BLOCK values, the bias as the Gemm's constant C."""
        n, k = (int(d) for d in w.shape)
        q, scales = q8.block_quantize(w, Q8_BLOCK)
        params: dict[int, Any] = {2: 0, 3: 1, 4: 0, 5: 1, 6: 0, 7: 0, 8: n, 9: k,
                                  18: q8.block_quantize_term(Q8_BLOCK)}
        if bias is not None:
            params.update({6: 1, 10: 4})  # constant C, one value per output column
        return self.g.layer("Gemm", [rows], params=params, weights=[Packed(q8.block_record(q, scales, bias))],
                            name=name)

    def op(self, type: str, inputs: list[str], outputs: Any = 1, params: dict[int, Any] | None = None,
           weights: Sequence[Weight | Packed] = (), name: str | None = None) -> Any:
        """A layer other than a Linear: tiny work per decode step, so it runs on one thread (no OpenMP fork and
        barrier per layer; those dominate such layers and stall badly on a busy machine)."""
        params = dict(params or {})
        params[31] = FEATMASK_ONE_THREAD
        return self.g.layer(type, inputs, outputs=outputs, params=params, weights=weights, name=name)

    def rmsnorm(self, x: str, weight: np.ndarray, eps: float, name: str | None = None) -> str:
        return self.op("RMSNorm", [x], params={0: int(weight.size), 1: float(eps), 2: 1},
                       weights=[raw(weight)], name=name)

    def bias(self, name: str) -> np.ndarray | None:
        return self.w(name) if self.has(name) else None

    def heads(self, t: str, s: StackShape, n: int, norm: np.ndarray | None) -> str:
        """(n*hd,) or (L, n*hd) -> per-head RMSNorm -> ncnn Mat w=hd, h=L, c=n -> RoPE (if normed: q and k)."""
        t = self.op("Reshape", [t], params={0: s.head_dim, 1: n, 2: -1})
        if norm is not None:
            t = self.rmsnorm(t, norm, s.eps)
        t = self.op("Permute", [t], params={0: 2})
        if norm is not None:
            t = self.op("RotaryEmbed", [t, "cos", "sin"], params={0: 0})
        return t

    def folds(self, layer: int, s: StackShape) -> q8_split.LayerFolds:
        """Where decoder layer `layer`'s split Linears read outlier channels folded into the layer before them
        (q8_split.py): none but in the int8 format."""
        if self.precision != "q8" or Q8_FORMAT == "block" or not self.split:
            return q8_split.LayerFolds()
        return q8_split.layer_folds(self.split, lambda name: name not in self.promote, self.net, layer, s.hidden,
                                    s.heads, s.kv_heads, s.head_dim, s.intermediate)

    def stack(self, x: str, prefix: str, s: StackShape, mask: str | None, tag: str,
              progress: Callable[[float], None] | None = None) -> str:
        """Decoder layers `prefix`layers.{i}.* on residual stream x; returns the final-normed output."""
        qd, kd = s.heads * s.head_dim, s.kv_heads * s.head_dim
        for i in range(s.layers):
            if progress is not None:
                progress(i / s.layers)
            p = f"{prefix}layers.{i}."
            a = f"{p}self_attn."
            folds = self.folds(i, s)
            h = self.rmsnorm(x, _times(self.w(p + "input_layernorm.weight"), folds.input_norm), s.eps)
            qkv = self.linear(
                h,
                [self.w(a + "q_proj.weight"), self.w(a + "k_proj.weight"), self.w(a + "v_proj.weight")],
                [self.bias(a + "q_proj.bias"), self.bias(a + "k_proj.bias"), self.bias(a + "v_proj.bias")],
                site=f"{i}.qkv", folded=folds.reads_folded("qkv"), out_factor=folds.qkv_out,
            )
            q, k, v = self.op("Slice", [qkv], outputs=3, params={0: [qd, kd, kd], 1: -1})
            q = self.heads(q, s, s.heads, self.w(a + "q_norm.weight"))
            k = self.heads(k, s, s.kv_heads, self.w(a + "k_norm.weight"))
            v = self.heads(v, s, s.kv_heads, None)
            ins = [q, k, v] + ([mask] if mask else []) + [f"k_in_{i}", f"v_in_{i}"]
            att, _, _ = self.g.layer_outputs(  # multi-threaded: its work grows with the context
                "SDPA", ins, outputs=[f"{tag}_att_{i}", f"k_out_{i}", f"v_out_{i}"],
                params={5: 1 if mask else 0, 6: float(s.head_dim ** -0.5), 7: 1},
            )
            self.g.output(f"k_out_{i}")
            self.g.output(f"v_out_{i}")
            att = self.op("Permute", [att], params={0: 2})  # (L, n, hd)
            att = self.op("Reshape", [att], params={0: qd, 1: -1})
            att = self.op("Squeeze", [att], params={1: 1})  # one row -> vector (GEMV kernel)
            o = self.linear(att, [self.w(a + "o_proj.weight")], [self.bias(a + "o_proj.bias")], site=f"{i}.o",
                            folded=folds.reads_folded("o"))
            x = self.op("BinaryOp", [x, o], params={0: 0})

            m = f"{p}mlp."
            h = self.rmsnorm(x, _times(self.w(p + "post_attention_layernorm.weight"), folds.post_norm), s.eps)
            gu = self.linear(h, [self.w(m + "gate_proj.weight"), self.w(m + "up_proj.weight")], site=f"{i}.gate_up",
                             folded=folds.reads_folded("gate_up"), out_factor=folds.gate_up_out)
            gate, up = self.op("Slice", [gu], outputs=2, params={0: [s.intermediate, s.intermediate], 1: -1})
            gate = self.op("Swish", [gate])
            y = self.op("BinaryOp", [gate, up], params={0: 2})
            y = self.linear(y, [self.w(m + "down_proj.weight")], site=f"{i}.down", folded=folds.reads_folded("down"))
            x = self.op("BinaryOp", [x, y], params={0: 0})
        return self.rmsnorm(x, self.w(prefix + "norm.weight"), s.eps)


def _times(weight: np.ndarray, factor: np.ndarray | None) -> np.ndarray:
    """An RMSNorm's weight with a fold's factors (q8_split.LayerFolds) multiplied in; exact (powers of two)."""
    return weight if factor is None else (np.asarray(weight, np.float32) * factor).astype(np.float32)


def _declare_inputs(g: Graph, layers: int, mask: bool) -> None:
    g.input("in0")
    g.input("cos")
    g.input("sin")
    if mask:
        g.input("mask")
    for i in range(layers):
        g.input(f"k_in_{i}")
        g.input(f"v_in_{i}")


def _table(arr: np.ndarray, small: bool) -> np.ndarray:
    """fp16 tables for fp16/bf16 bundles (halves their size) unless a value would overflow."""
    if small and float(np.max(np.abs(arr))) < FP16_MAX:
        return arr.astype(np.float16)
    return arr.astype(np.float32)


def convert(ckpt: Checkpoint, writer, options) -> None:
    cfg = ckpt.talker_config
    cp_cfg = cfg.get("code_predictor_config")
    if not isinstance(cp_cfg, dict):
        raise ConvertError("config.json: talker_config has no code_predictor_config")
    t = stack_shape(cfg, "talker")
    c = stack_shape(cp_cfg, "code predictor")
    groups = int(cfg.get("num_code_groups", 16))
    vocab = int(cfg["vocab_size"])
    codebook = int(cp_cfg["vocab_size"])
    small_tables = options.precision in ("fp16", "bf16", "q8")
    smoothing = None
    if options.smoothing:
        options.report(0.0, "calibrating outlier smoothing")
        ckpt, smoothing = smooth.smoothed(ckpt, smooth.ALPHA)

    # talker stack + codec head
    options.report(0.0, "talker layers")
    g = Graph()
    _declare_inputs(g, t.layers, mask=True)
    split = options.split if options.precision == "q8" else {}
    b = _Builder(g, ckpt, options.precision, "talker", options.promote, split)
    hidden = b.stack("in0", "talker.model.", t, "mask", "t",
                     lambda f: options.report(0.6 * f, f"talker layers ({round(f * t.layers)}/{t.layers})"))
    hidden = g.layer("Noop", [hidden], name="hidden")
    g.output(hidden)
    b.linear(hidden, [ckpt.main.get("talker.codec_head.weight")], name="logits", site="head")
    writer.add_graph(TALKER_GRAPH, g)
    fp16_layers, fp32_layers, q8_layers = b.fp16_layers, b.fp32_layers + len(b.promoted_fp32), b.q8_layers
    promoted, promoted_fp32 = list(b.promoted), list(b.promoted_fp32)
    split_done = dict(b.split_done)
    del g, b

    # code predictor: projection, stack, 15 heads
    options.report(0.6, "code predictor layers")
    g = Graph()
    _declare_inputs(g, c.layers, mask=False)
    b = _Builder(g, ckpt, options.precision, "code_predictor", options.promote, split)
    x = "in0"
    proj = "talker.code_predictor.small_to_mtp_projection."
    has_proj = (proj + "weight") in ckpt.main
    if has_proj:
        x = b.linear(x, [b.w(proj + "weight")], [b.bias(proj + "bias")], site="projection")
    elif t.hidden != c.hidden:
        raise ConvertError("checkpoint has no small_to_mtp_projection although talker and code predictor widths differ")
    hidden = b.stack(x, "talker.code_predictor.model.", c, None, "c",
                     lambda f: options.report(0.6 + 0.3 * f, "code predictor layers"))
    for gi in range(groups - 1):
        b.linear(hidden, [b.w(f"talker.code_predictor.lm_head.{gi}.weight")], name=f"logits_{gi}", site=f"head.{gi}")
    writer.add_graph(CP_GRAPH, g)
    fp16_layers, fp32_layers = fp16_layers + b.fp16_layers, fp32_layers + b.fp32_layers + len(b.promoted_fp32)
    q8_layers += b.q8_layers
    promoted += b.promoted
    promoted_fp32 += b.promoted_fp32
    split_done.update(b.split_done)
    del g, b

    unknown = sorted(options.promote - set(promoted)) if options.precision == "q8" else []
    if unknown:
        raise ConvertError(f"no Linear is called {', '.join(unknown)}; cannot keep it fp32")
    unknown = sorted(set(split) - set(split_done) - set(promoted))
    if unknown:
        raise ConvertError(f"no 8-bit Linear is called {', '.join(unknown)}; cannot split its outlier channels")
    options.report(0.9, "codec embedding tables")
    writer.add_table("talker_codec_embedding", _table(ckpt.main.get("talker.model.codec_embedding.weight"), small_tables))
    cp_tables = np.stack(
        [ckpt.main.get(f"talker.code_predictor.model.codec_embedding.{gi}.weight") for gi in range(groups - 1)]
    )
    writer.add_table("cp_codec_embedding", _table(cp_tables, small_tables))

    if options.precision == "q8" and smoothing is not None:
        writer.manifest["q8_format"] = q8.FORMAT_VERSION
    writer.write_record(TalkerPart(
        talker_graph=TALKER_GRAPH, cp_graph=CP_GRAPH, talker=t, code_predictor=c,
        num_code_groups=groups, vocab_size=vocab, codebook_size=codebook, small_to_mtp_projection=has_proj,
        codec_table="talker_codec_embedding", cp_codec_table="cp_codec_embedding",
        blobs={
            "input": "in0", "cos": "cos", "sin": "sin", "mask": "mask",
            "hidden": "hidden", "logits": "logits", "cp_logits": "logits_{g}",
            "cache_in": ["k_in_{i}", "v_in_{i}"], "cache_out": ["k_out_{i}", "v_out_{i}"],
        },
        codec_eos_token_id=cfg.get("codec_eos_token_id"),
        # Linear weights stored fp16 / fp32 (see the module docstring); the runtime picks ncnn options from these
        fp16_weight_layers=fp16_layers, fp32_weight_layers=fp32_layers, q8_weight_layers=q8_layers,
        # outlier smoothing folded into the weights (smooth.py); absent in bundles converted before it
        outlier_smoothing=smoothing,
        # Linears of a q8 bundle kept float by the 8-bit check (q8_check.py; its record says why), and those of them
        # stored fp32 (the others fp16: fp16_weight_layers counts them)
        promoted_layers=tuple(promoted), promoted_fp32_layers=tuple(promoted_fp32),
        # q8 Linears whose outlier input channels are computed apart in fp32 (q8_split.py), by name
        split_channels=split_done,
    ))
    options.report(1.0, "done")
