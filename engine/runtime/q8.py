"""The q8 weight formats: ncnn's int8 Gemm with a scale per output channel (current), and the 8-bit block Gemm of
bundles converted before it (still read).

Current format, "int8": every Linear is ncnn's int8 Gemm (param 18 = 1, int8 weights with one scale for the
whole weight, fixed to 1.0 here) followed by a multiply by a scale per output channel (a MemoryData row and a
BinaryOp) and, when the Linear has one, its bias (the same again with an add). What the ncnn wheel
(1.0.20261020, x86; src/layer/x86/gemm_x86.cpp, gemm_int8.h) computes for each input row x, checked against
`reference_matmul` to fp32 rounding by tests/test_q8.py (bit for bit on the AVX-512 VNNI machine it was written on):
- a = max |x| over the row (all K inputs), s = fl(127 / a); x is rounded to int8 as trunc(fl(x*s) + 0.5 with
  the sign of fl(x*s)), clamped to [-127, 127];
- the int8 dot products with the int8 weights add up exactly in int32 (VNNI), so their order, the tiles, the
  thread count and the other rows change nothing;
- the sum is converted to fp32 and multiplied by fl(a * fl(1/127)) (measured: the source writes a / 127, the
  wheel's results match a multiply by the reciprocal, not the division), then by the channel scale, then the
  bias is added. (The net option use_int8_inference is not read on this path.)
So every row depends on itself only: a row of a many-row call is bit-identical to the row run alone.
.bin record of the Gemm: int8 tag 0x000D4B38, the weights [N, K] row-major as int8, padded to 4 bytes, then the
weight scale as one raw fp32. The MemoryData rows are (w=N, h=1): a 1-D one would broadcast along the rows of
the Gemm's (rows, N) output whenever rows == N (ncnn's BinaryOp matches a 1-D operand's length to h first).

Legacy format, "block" (param 18 = 800 + block code): 8-bit weights with a scale per block of 32/64/128 values,
input rows rounded to int8 per block. A row's result there depends on how many rows share a call (measured:
rows handled in 4-row blocks round differently), so StepNet gives such bundles at most 3 rows per call.
The block functions below build and model that format (benchmarks/q8_accuracy.py compares the two, tests
check old bundles still load).
"""

from __future__ import annotations

import struct

import numpy as np

from ..errors import ConvertError

QMAX = 127
INT8_TERM = 1  # Gemm param 18 (quantize_term) of the int8 format
INT8_TAG = 0x000D4B38  # ncnn ModelBin tag of an int8 weight array
WEIGHT_SCALE = 1.0  # the Gemm's own (per-tensor) weight scale; the real ones are per channel, applied after
BLOCK_CODES = {32: 0, 64: 1, 128: 2}
OUTLIER_PICK = "outlier_pick_"  # name prefix of the fp32 Gemms picking a split Linear's outlier columns
# the manifest's "q8_format" of bundles made now: 2 = int8 with outlier smoothing folded into the weights
# (engine/convert/smooth.py); bundles without the key are older (int8 unsmoothed, or the block format) and run as
# they are, with a note that converting again makes them robust to outlier activations
FORMAT_VERSION = 2


def is_outlier_pick(gemm_line: str) -> bool:
    """A Gemm line of a .param file that picks a split Linear's outlier columns out of its input rows (an fp32
    one-hot product, engine/convert/q8_split.py selection), named so."""
    words = gemm_line.split()
    return len(words) > 1 and words[1].startswith(OUTLIER_PICK)


def quantize_term(gemm_line: str) -> int | None:
    """Param 18 of a Gemm line of a .param file (None: a float Gemm)."""
    for tok in gemm_line.split()[4:]:
        if tok.startswith("18="):
            return int(tok[3:])
    return None


def format_of_term(term: int | None) -> str | None:
    """"int8", "block" or None (float) for a Gemm's param 18."""
    if not term:
        return None
    return "int8" if term == INT8_TERM else "block"


def _check(w: np.ndarray) -> np.ndarray:
    w = np.asarray(w, dtype=np.float32)
    if w.ndim != 2 or w.shape[1] < 1:
        raise ConvertError(f"q8 needs a 2-D weight [out, in]; got shape {w.shape}")
    if not np.isfinite(w).all():
        raise ConvertError("q8: a weight holds inf or nan; the checkpoint is damaged")
    return w


# ------------------------------------------------------------------------------------------- int8 (current)


def quantize(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[N, K] float weights -> (int8 [N, K], fp32 channel scales [N]); a weight is q * scale."""
    w = _check(w)
    absmax = np.abs(w).max(axis=1)
    scale = np.where(absmax > 0, absmax / np.float32(QMAX), 1).astype(np.float32)
    q = np.clip(np.rint(w / scale[:, None]), -QMAX, QMAX).astype(np.int8)
    return q, scale


def record(q: np.ndarray) -> bytes:
    """The Gemm's .bin record: tagged int8 weights padded to 4 bytes, then the fp32 weight scale."""
    payload = struct.pack("<I", INT8_TAG) + np.ascontiguousarray(q, dtype=np.int8).tobytes()
    payload += b"\0" * (-len(payload) % 4)
    return payload + struct.pack("<f", WEIGHT_SCALE)


def quantize_rows(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Input rows [M, K] as ncnn's int8 Gemm sees them: (int8 values as int64 [M, K], fp32 descale [M, 1])."""
    x = np.atleast_2d(np.asarray(x, dtype=np.float32))
    absmax = np.abs(x).max(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):  # an all-zero row: ncnn gets nan * 0 -> -127 * descale 0
        v = x * (np.float32(QMAX) / absmax)
        v = np.where(np.isnan(v), -QMAX, v)
    xq = np.clip(np.trunc(v + np.copysign(np.float32(0.5), v)), -QMAX, QMAX).astype(np.int64)
    descale = absmax * (np.float32(1) / np.float32(QMAX * WEIGHT_SCALE))
    return xq, descale.astype(np.float32)


def reference_matmul(x: np.ndarray, q: np.ndarray, scale: np.ndarray, bias: np.ndarray | None = None,
                     c: np.ndarray | None = None) -> np.ndarray:
    """numpy model of the int8 Linear, in ncnn's order of fp32 operations: rows x [M, K] -> float32 [M, N]. c: the
    Gemm's C input [M, N], added to the dequantized sum before the channel scales (split_reference_matmul)."""
    xq, descale = quantize_rows(x)
    # the int32 sums, exact in float64 (|sum| <= 127^2 K < 2^53) and through BLAS (int64 matmul is ~100x slower);
    # then to fp32, rounded to nearest as ncnn converts them
    acc = (xq.astype(np.float64) @ q.astype(np.float64).T).astype(np.float32)
    y = acc * descale  # float32 throughout: each operation rounds as ncnn's
    if c is not None:
        y = y + c
    y = y * np.asarray(scale, np.float32)
    if bias is not None:
        y = y + np.asarray(bias, np.float32)
    return y


def split_weights(w: np.ndarray, channels: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """The two parts of a Linear [N, K] whose input channels `channels` are split off (the LLM.int8()
    decomposition, engine/convert/q8_split.py): (the weights with those columns zeroed, for the int8 Gemm; the
    columns themselves [N, len(channels)], for the fp32 product)."""
    w = np.asarray(w, np.float32)
    rest = w.copy()
    rest[:, list(channels)] = 0
    return rest, np.ascontiguousarray(w[:, list(channels)])


def split_reference_matmul(x: np.ndarray, q: np.ndarray, scale: np.ndarray, bias: np.ndarray | None,
                           channels: tuple[int, ...], outlier_w: np.ndarray) -> np.ndarray:
    """numpy model of a split int8 Linear, in the graph's order: x's `channels` times outlier_w / scale in fp32
    (the Gemm's C), the int8 sum over x with `channels` zeroed dequantized plus C, times the channel scales, plus
    the bias (q, scale: quantize(split_weights(...)[0])). Zeroing the outlier inputs lets the row's 8-bit scale
    follow the other inputs; their products are exact but for fp32 rounding."""
    x = np.atleast_2d(np.asarray(x, dtype=np.float32))
    masked = x.copy()
    masked[:, list(channels)] = 0
    c = x[:, list(channels)] @ (np.asarray(outlier_w, np.float32) / np.asarray(scale, np.float32)[:, None]).T
    return reference_matmul(masked, q, scale, bias, c)


# ------------------------------------------------------------------------------------------- block (legacy)


def block_quantize_term(block: int) -> int:
    """Gemm param 18 for 8-bit weights in blocks of `block` values."""
    return 800 + BLOCK_CODES[block]


def block_quantize(w: np.ndarray, block: int) -> tuple[np.ndarray, np.ndarray]:
    """[N, K] float weights -> (int8 [N, K], fp32 scales [N, K/block]); a weight is q / scale."""
    if block not in BLOCK_CODES:
        raise ConvertError(f"q8 block size must be one of {sorted(BLOCK_CODES)}, not {block}")
    w = _check(w)
    n, k = w.shape
    blocks = _blocks(w, block)
    absmax = np.abs(blocks).max(axis=-1)
    scales = np.where(absmax > 0, np.float32(QMAX) / np.where(absmax > 0, absmax, 1), 1).astype(np.float32)
    q = np.clip(np.rint(blocks * scales[..., None]), -QMAX, QMAX).astype(np.int8)
    return q.reshape(n, -1)[:, :k], scales


def _blocks(a: np.ndarray, block: int) -> np.ndarray:
    """[rows, K] -> [rows, ceil(K/block), block], the last block zero-padded (ncnn's blocks end at K)."""
    rows, k = a.shape
    pad = -k % block
    if pad:
        a = np.concatenate([a, np.zeros((rows, pad), a.dtype)], axis=1)
    return a.reshape(rows, -1, block)


def block_dequantize(q: np.ndarray, scales: np.ndarray, block: int) -> np.ndarray:
    """The weights ncnn computes with, as float32 [N, K]."""
    n, k = q.shape
    return (_blocks(q.astype(np.float32), block) / scales[..., None]).reshape(n, -1)[:, :k]


def block_quantize_rows(x: np.ndarray, block: int) -> np.ndarray:
    """The input rows as ncnn sees them: per (row, block) scale 127/absmax, rounded half away from zero."""
    x = np.atleast_2d(np.asarray(x, dtype=np.float32))
    m, k = x.shape
    xb = _blocks(x.astype(np.float64), block)
    absmax = np.abs(xb).max(axis=-1, keepdims=True)
    s = np.where(absmax > 0, QMAX / np.where(absmax > 0, absmax, 1), 1.0)
    v = xb * s
    xq = np.clip(np.sign(v) * np.floor(np.abs(v) + 0.5), -QMAX, QMAX)
    return (xq / s).reshape(m, -1)[:, :k]


def block_reference_matmul(x: np.ndarray, q: np.ndarray, scales: np.ndarray, block: int) -> np.ndarray:
    """numpy model of the block Gemm: rows x [M, K] -> [M, N] (float64)."""
    return block_quantize_rows(x, block) @ block_dequantize(q, scales, block).astype(np.float64).T


def block_record(q: np.ndarray, scales: np.ndarray, bias: np.ndarray | None = None) -> bytes:
    """The block Gemm's .bin record: raw int8 weights padded to 4 bytes, the bias (if any) as a tagged fp32
    array, then the raw fp32 scales (ncnn reads them in this order)."""
    payload = np.ascontiguousarray(q, dtype=np.int8).tobytes()
    payload += b"\0" * (-len(payload) % 4)
    if bias is not None:
        payload += b"\0\0\0\0" + np.ascontiguousarray(bias, dtype="<f4").tobytes()
    return payload + np.ascontiguousarray(scales, dtype="<f4").tobytes()
