"""Outlier channels split off a q8 Linear (the mixed-precision decomposition of LLM.int8(), Dettmers et al. 2022):
which input channels, and the ncnn layers that compute it.

ncnn's int8 Gemm rounds each input row with one scale set by the row's largest value (engine/runtime/q8.py), so a
few input channels 10-100x larger than the rest leave every other input a few bits. Smoothing (smooth.py) moves
such a channel into the weights when that is exact and cheap; when the channel is part of the function (its
weights are not small where its activations are large) it can only move half of it. The decomposition takes those
channels out of the 8-bit product instead:

    y = (int8Gemm(x * mask, W with the columns of `channels` zeroed) + x[channels] @ (W[:, channels] / scale)^T)
        * scale (+ bias)

the second product in fp32 (engine/runtime/q8.py split_reference_matmul models it). Layers, after the Reshape to
rows that every q8 Linear has: a BinaryOp with a constant 0/1 row (the mask; none where the channels are folded,
below); an fp32 Gemm with a one-hot constant (c x K) that picks the channels' columns (exact: one product by 1.0
and zeros); an fp32 InnerProduct of those few columns (N x c weights, divided by the channel scales) whose output
is the int8 Gemm's C input, added by the Gemm to its dequantized sum before the scale row multiplies both. A Linear
reading the same input with the same channels (the code predictor's heads) shares the mask and the pick. Every
layer treats rows one by one, so batching still changes no row (engine/runtime/step_graph.py).

Folded channels: where the layer before a split Linear can scale its outlier channels for free, they arrive
multiplied by FOLD (2^-16) instead of being masked: the RMSNorm weights before q/k/v and gate/up, the v outputs'
scale row (for o_proj's input: attention is linear in v, and a v channel reaches one output channel of each head of
its group, so only whole groups fold, value_channels), the up outputs' scale row (for down_proj's input: the SwiGLU
product is linear in up). Scaled by FOLD the channels sit far below any row's largest value, so the int8 Gemm's row
scale and sum are what the mask gives (their weight columns are zero), and the fp32 product's weights are divided
by FOLD: a power of two, so every value is the masked graph's bit for bit (tests/test_q8_split.py). A split Linear
then costs three tiny layers (ncnn's Split of its input, the pick, the product) and no mask.

Cost: per split Linear, c x (N + K) fp32 values read (c <= MAX_SPLIT) and those layers on one thread. Fewer layers
is what counts: a code-predictor step runs ~400 layers, and each costs microseconds whatever its size; the product
reads N x c fp32 weights at one thread's bandwidth (13-18 us for N = 6144, c = 8). Full-size 0.6B, 52 Linears split
(20 of them in the code predictor, 15 calls a frame), AMD EPYC 2 cores, quiet, 2 threads, median of 40 alternating
calls (benchmarks/precision_speed.py), code predictor / talker step ms a frame: Slice + Concat pick, mask and add
layer 58.6 / 21.6; one-hot pick and C 54.2 / 17.5; folded 52.7 / 17.5; plain q8 47.5 / 16.8; fp32 70.4 / 26.2.

Which channels: the calibration pass of the smoothing (smooth.calibrate, the fp32 network on the model's own
prompt rows) gives each Linear input's maximum |activation| per channel; a channel SPLIT_RATIO times the site's
median or more is an outlier, the MAX_SPLIT largest at most. Plain random checkpoints reach 2-4x at the RMSNorm
outputs and attention output (full-size 0.6B; 3.6x on the tiny fixtures) and up to 10x at the SwiGLU product
(down_proj's input, heavy-tailed); 10x-100x stress channels reach 5-290x. Splitting a channel never makes the
8-bit product worse (its part becomes exact, the rest of the row gets a finer scale), so the threshold errs on the
low side; the 8-bit check (q8_check.py) splits only the layers whose split its bound needs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from ..runtime import q8
from ..runtime.ncnn_graph import tagged
from .q8_layers import linear_name
from .stack_forward import CODE_PREDICTOR, SITE_INPUTS, TALKER

SPLIT_RATIO = 4.0  # channel max over the site's median channel max (module docstring)
MAX_SPLIT = 8  # channels per Linear; 4 systematic outlier channels of a v_proj are 8 of o_proj's input (GQA x2)
FOLD = 2.0**-16  # the factor folded channels arrive scaled by (module docstring): exact, and far below any row's max
FEATMASK_NO_FP16_ONE_THREAD = (1 << 1) | (1 << 7)  # ncnn featmask: fp32 weights, one thread (talker.py's bits)

Split = Mapping[str, tuple[int, ...]]  # Linear name (q8_layers.linear_name) -> its input channels split off
_SITE_LINEAR = {inp: site for site, inp in SITE_INPUTS.items()}


def outliers(maxima: np.ndarray) -> tuple[int, ...]:
    """The outlier channels of one Linear input, ascending (module docstring), from its per-channel maxima."""
    maxima = np.asarray(maxima, np.float64)
    positive = maxima[maxima > 0]
    if positive.size == 0:
        return ()
    limit = SPLIT_RATIO * float(np.median(positive))
    top = np.argsort(-maxima, kind="stable")[:MAX_SPLIT]
    return tuple(sorted(int(j) for j in top if maxima[j] >= limit))


def outlier_channels(stats: Mapping[tuple[str, int, str], np.ndarray], groups: int) -> dict[str, tuple[int, ...]]:
    """Every q8 Linear's outlier input channels (only Linears that have some), from smooth.calibrate's maxima.
    The final norms feed the heads: the talker's codec head, the code predictor's groups - 1 heads."""
    out: dict[str, tuple[int, ...]] = {}
    for (prefix, layer, site), maxima in stats.items():
        net = {TALKER: "talker", CODE_PREDICTOR: "code_predictor"}.get(prefix)
        if net is None or (site not in _SITE_LINEAR and site != "final"):
            continue
        channels = outliers(maxima)
        if not channels:
            continue
        if site == "final":
            names = ["talker.head"] if net == "talker" else [f"code_predictor.head.{g}" for g in range(groups - 1)]
        else:
            names = [linear_name(net, layer, _SITE_LINEAR[site])]
        out.update((name, channels) for name in names)
    return out


# ------------------------------------------------------------------------------------------- the graph


def selection(b, rows: str, k: int, channels: tuple[int, ...]) -> str:
    """rows (R, K) -> (R, c): the columns `channels`, by an fp32 Gemm with a constant one-hot B (c x K). Each output
    is one input times 1.0 plus zeros, so it is the input exactly, and every row is computed on its own."""
    pick = np.zeros((len(channels), k), np.float32)
    pick[np.arange(len(channels)), list(channels)] = 1
    return b.g.layer("Gemm", [rows], params={2: 0, 3: 1, 4: 0, 5: 1, 6: 0, 7: 0, 8: len(channels), 9: k, 10: -1,
                                             31: FEATMASK_NO_FP16_ONE_THREAD}, weights=[tagged(pick)],
                     name=f"{q8.OUTLIER_PICK}{rows}")


def outlier_weights(outlier_w: np.ndarray, scale: np.ndarray, folded: bool = False) -> np.ndarray:
    """The fp32 product's weights [N, c] divided by the int8 part's channel scales: its output is the int8 Gemm's C,
    added before the scale row multiplies the sum (q8.split_reference_matmul); divided by FOLD too where the
    channels arrive folded."""
    w = np.asarray(outlier_w, np.float32) / np.asarray(scale, np.float32)[:, None]
    return (w / np.float32(FOLD) if folded else w).astype(np.float32)


@dataclass(frozen=True)
class LayerFolds:
    """Where one decoder layer's split Linears get their outlier channels folded (module docstring): a factor per
    channel for the two RMSNorms' weights and for the qkv and gate_up Linears' outputs (None: all ones)."""

    input_norm: np.ndarray | None = None
    qkv_out: np.ndarray | None = None
    post_norm: np.ndarray | None = None
    gate_up_out: np.ndarray | None = None

    def reads_folded(self, site: str) -> bool:
        """Whether the Linear at `site` reads its rows as they come (no mask): the layer before it folds."""
        before = {"qkv": self.input_norm, "gate_up": self.post_norm, "o": self.qkv_out, "down": self.gate_up_out}
        return before[site] is not None


def layer_folds(split: Split, int8: Callable[[str], bool], net: str, layer: int, hidden: int, heads: int,
                kv_heads: int, head_dim: int, intermediate: int) -> LayerFolds:
    """The folds of decoder layer `layer` of `net`: int8(name) says whether a Linear is an int8 Gemm (not kept
    float), the only kind whose split reads folded rows or whose output scale row can fold."""
    def channels(site: str) -> tuple[int, ...]:
        name = linear_name(net, layer, site)
        return tuple(split.get(name, ())) if int8(name) else ()

    def factor(width: int, at: Iterable[int]) -> np.ndarray:
        f = np.ones(width, np.float32)
        f[list(at)] = FOLD
        return f

    qkv, gate_up, down = channels("qkv"), channels("gate_up"), channels("down")
    v = value_channels(channels("o"), heads, kv_heads, head_dim)
    attention, kv = heads * head_dim, kv_heads * head_dim
    return LayerFolds(
        input_norm=factor(hidden, qkv) if qkv else None,
        post_norm=factor(hidden, gate_up) if gate_up else None,
        qkv_out=factor(attention + 2 * kv, [attention + kv + c for c in v])
        if v is not None and int8(linear_name(net, layer, "qkv")) else None,
        gate_up_out=factor(2 * intermediate, [intermediate + c for c in down])
        if down and int8(linear_name(net, layer, "gate_up")) else None,
    )


def value_channels(channels: tuple[int, ...], heads: int, kv_heads: int, head_dim: int) -> tuple[int, ...] | None:
    """The v_proj output channels behind attention-output channels `channels` (grouped-query attention: v channel
    (g, d) reaches output channel (h, d) of every head h of group g), or None where folding them would scale
    other channels too (`channels` is not every output channel of those v channels)."""
    if not channels or heads % kv_heads:
        return None
    group = heads // kv_heads
    v = sorted({(c // head_dim) // group * head_dim + c % head_dim for c in channels})
    reached = {((c // head_dim) * group + h) * head_dim + c % head_dim for c in v for h in range(group)}
    return tuple(v) if reached == set(channels) else None
