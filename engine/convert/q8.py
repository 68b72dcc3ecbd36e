"""The q8 weight format: ncnn Gemm with 8-bit block-quantised weights (Gemm param 18 = 800 + block code).

What the ncnn wheel (1.0.20261020, x86) expects and computes, established by feeding it hand-made weights and
checked against `reference_matmul` to fp32 rounding (tests/test_q8.py):
- .bin record: the int8 weights [N, K] row-major as raw bytes (no type tag), padded to 4 bytes; the bias
  (constant C, one per output) as a tagged fp32 array when there is one; the per-block scales [N, K/block] as
  raw fp32. The weight of a block is q / scale.
- The input rows are quantised too, on the fly: each block of `block` values of a row gets its own scale
  127/absmax and is rounded to int8; the block dot products run in int8 and are scaled back in fp32.
- Block code: 0 = 32, 1 = 64, 2 = 128 values; a last partial block ends at K. The input must be 2-D (K, rows) unpacked: a 1-D input under
  ncnn's packing layout gives wrong rows, so the emitter reshapes to 2-D first.
"""

from __future__ import annotations

import numpy as np

from ..errors import ConvertError

BLOCK_CODES = {32: 0, 64: 1, 128: 2}
QMAX = 127


def quantize_term(block: int) -> int:
    """Gemm param 18 for 8-bit weights in blocks of `block` values."""
    return 800 + BLOCK_CODES[block]


def quantize(w: np.ndarray, block: int) -> tuple[np.ndarray, np.ndarray]:
    """[N, K] float weights -> (int8 [N, K], fp32 scales [N, K/block]); a weight is q / scale."""
    w = np.asarray(w, dtype=np.float32)
    if block not in BLOCK_CODES:
        raise ConvertError(f"q8 block size must be one of {sorted(BLOCK_CODES)}, not {block}")
    if w.ndim != 2 or w.shape[1] < 1:
        raise ConvertError(f"q8 needs a 2-D weight [out, in]; got shape {w.shape}")
    if not np.isfinite(w).all():
        raise ConvertError("q8: a weight holds inf or nan; the checkpoint is damaged")
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


def dequantize(q: np.ndarray, scales: np.ndarray, block: int) -> np.ndarray:
    """The weights ncnn computes with, as float32 [N, K]."""
    n, k = q.shape
    return (_blocks(q.astype(np.float32), block) / scales[..., None]).reshape(n, -1)[:, :k]


def quantize_rows(x: np.ndarray, block: int) -> np.ndarray:
    """The input rows as ncnn sees them: per (row, block) scale 127/absmax, rounded half away from zero."""
    x = np.atleast_2d(np.asarray(x, dtype=np.float32))
    m, k = x.shape
    xb = _blocks(x.astype(np.float64), block)
    absmax = np.abs(xb).max(axis=-1, keepdims=True)
    s = np.where(absmax > 0, QMAX / np.where(absmax > 0, absmax, 1), 1.0)
    v = xb * s
    xq = np.clip(np.sign(v) * np.floor(np.abs(v) + 0.5), -QMAX, QMAX)
    return (xq / s).reshape(m, -1)[:, :k]


def reference_matmul(x: np.ndarray, q: np.ndarray, scales: np.ndarray, block: int) -> np.ndarray:
    """numpy model of the q8 Gemm: rows x [M, K] -> [M, N] (float64)."""
    return quantize_rows(x, block) @ dequantize(q, scales, block).astype(np.float64).T


def record(q: np.ndarray, scales: np.ndarray, bias: np.ndarray | None = None) -> bytes:
    """The layer's .bin record: raw int8 weights padded to 4 bytes, the bias (if any) as a tagged fp32 array,
    then the raw fp32 scales (ncnn reads them in this order)."""
    payload = np.ascontiguousarray(q, dtype=np.int8).tobytes()
    payload += b"\0" * (-len(payload) % 4)
    if bias is not None:
        payload += b"\0\0\0\0" + np.ascontiguousarray(bias, dtype="<f4").tobytes()
    return payload + np.ascontiguousarray(scales, dtype="<f4").tobytes()
