"""The talker: decoder stack + codec head on ncnn, one extractor call per step, KV cache kept as ncnn Mats.

The caches are extracted raw (`extract(name, 1)`: packed layout, storage precision) and fed back unchanged;
ncnn's SDPA appends the new rows. Positions and RoPE rows are tracked here.
"""

from __future__ import annotations

import platform

import ncnn
import numpy as np

from .bundle import Bundle
from .errors import BundleError, EngineError
from .thread_governor import ThreadGovernor

MASKED = np.float32(-1e9)  # additive mask value for future positions (exp underflows to exactly 0)


X86 = platform.machine().lower() in ("x86_64", "amd64", "x86", "i386", "i686")


def net_precision(bundle: Bundle, meta: dict, compact_weights: bool = True) -> str:
    """ncnn options for the talker/code-predictor graphs.

    fp32 bundles may hold fp16-stored (lossless) weights: on x86 ncnn then keeps them fp16 in memory and still
    computes in fp32 (it never converts activations to fp16 there); elsewhere, or with compact_weights=False,
    they are widened to fp32 at load."""
    if bundle.precision != "fp32":
        return bundle.runtime_precision
    if compact_weights and X86 and int(meta.get("fp16_weight_layers", 0)) > 0:
        return "fp16"
    return "fp32"


def inv_freq(head_dim: int, theta: float) -> np.ndarray:
    """1 / theta^(2i/d) in fp32, as transformers' default rope init computes it."""
    exponent = np.arange(0, head_dim, 2, dtype=np.int64).astype(np.float32) / np.float32(head_dim)
    return (np.float32(1.0) / np.power(np.float32(theta), exponent, dtype=np.float32)).astype(np.float32)


class RopeTable:
    """cos/sin rows (positions x head_dim/2) for ncnn's RotaryEmbed, grown on demand by doubling.

    Angles are fp32 products position * inv_freq (transformers' fp32 matmul); cos/sin rounded once to fp32."""

    def __init__(self, head_dim: int, theta: float, initial: int = 512):
        self.freq = inv_freq(head_dim, theta)
        self.cos = np.empty((0, head_dim // 2), np.float32)
        self.sin = np.empty((0, head_dim // 2), np.float32)
        self._grow(initial)

    def _grow(self, n: int) -> None:
        pos = np.arange(n, dtype=np.float32)
        angles = (pos[:, None] * self.freq[None, :]).astype(np.float64)
        self.cos = np.ascontiguousarray(np.cos(angles).astype(np.float32))
        self.sin = np.ascontiguousarray(np.sin(angles).astype(np.float32))

    def rows(self, start: int, count: int) -> tuple[np.ndarray, np.ndarray]:
        end = start + count
        if end > len(self.cos):
            size = max(len(self.cos), 1)
            while size < end:
                size *= 2
            self._grow(size)
        return self.cos[start:end], self.sin[start:end]


def as_rows(table: np.ndarray, ids) -> np.ndarray:
    """Rows of a (possibly fp16, memory-mapped) table as a new float32 array."""
    return np.asarray(table[ids], dtype=np.float32)


def check_ids(ids: np.ndarray, limit: int, what: str) -> None:
    if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= limit):
        raise EngineError(f"{what} id out of range: valid ids are 0..{limit - 1}")


class Talker:
    """Talker stack with KV cache. prefill() starts a new sequence at position 0; step() continues it."""

    def __init__(self, bundle: Bundle, threads: int = 2, *, compact_weights: bool = True):
        meta = bundle.part("talker")
        spec = meta["talker"]
        self.hidden_size = int(spec["hidden"])
        self.vocab_size = int(meta["vocab_size"])
        self.layers = int(spec["layers"])
        self.net = bundle.net(meta["talker_graph"], threads, net_precision(bundle, meta, compact_weights))
        self.governor = ThreadGovernor(threads)
        self._codec = np.asarray(bundle.table(meta["tables"]["codec"]))  # plain view of the mmap: fast indexing
        self._rope = RopeTable(int(spec["head_dim"]), float(spec["rope_theta"]))
        self._cache_in = [f"{kv}_in_{i}" for i in range(self.layers) for kv in ("k", "v")]
        self._cache_out = [f"{kv}_out_{i}" for i in range(self.layers) for kv in ("k", "v")]
        self._caches: list[ncnn.Mat] = []
        self._pos = 0
        self._zeros = np.zeros((1, 1024), np.float32)  # decode-step mask row (no future positions)

    @property
    def position(self) -> int:
        """Number of positions in the KV cache."""
        return self._pos

    def reset(self) -> None:
        self._caches = []
        self._pos = 0

    def prefill(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Run the prompt rows at positions 0..L-1; returns (hidden, logits) of the last position."""
        rows = np.ascontiguousarray(rows, dtype=np.float32)
        if rows.ndim != 2 or rows.shape[1] != self.hidden_size or rows.shape[0] < 1:
            raise EngineError(f"talker prefill needs (L, {self.hidden_size}) rows, got shape {rows.shape}")
        self.reset()
        n = rows.shape[0]
        mask = np.triu(np.full((n, n), MASKED, np.float32), 1)
        self.net.opt.num_threads = self.governor.fixed()
        hidden, logits = self._run(rows if n > 1 else rows[0], n, mask)
        return hidden.reshape(n, -1)[-1].copy(), logits.reshape(n, -1)[-1].copy()

    def step(self, row: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One new position (KV cache continues); returns (hidden, logits)."""
        row = np.ascontiguousarray(row, dtype=np.float32).reshape(-1)
        if row.shape[0] != self.hidden_size:
            raise EngineError(f"talker step needs a ({self.hidden_size},) row, got {row.shape[0]} values")
        if not self._caches:
            raise EngineError("talker step before prefill")
        n = self._pos + 1
        if n > self._zeros.shape[1]:
            self._zeros = np.zeros((1, 2 * n), np.float32)
        self.net.opt.num_threads = self.governor.start()
        try:
            return self._run(row, 1, self._zeros[:, :n])
        finally:
            self.governor.stop()

    def codec_rows(self, ids) -> np.ndarray:
        """Rows of the talker codec_embedding (C(id)), float32 (n, H)."""
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        check_ids(ids, self._codec.shape[0], "codec")
        return as_rows(self._codec, ids)

    def _run(self, x: np.ndarray, n: int, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        cos, sin = self._rope.rows(self._pos, n)
        ex = self.net.create_extractor()
        ex.input("in0", ncnn.Mat(x).clone())
        ex.input("cos", ncnn.Mat(cos).clone())
        ex.input("sin", ncnn.Mat(sin).clone())
        ex.input("mask", ncnn.Mat(np.ascontiguousarray(mask)).clone())
        for name, mat in zip(self._cache_in, self._caches, strict=False):
            ex.input(name, mat)
        ret_h, hidden = ex.extract("hidden")
        ret_l, logits = ex.extract("logits")
        caches = []
        for name in self._cache_out:
            ret, mat = ex.extract(name, 1)
            if ret != 0:
                raise BundleError(f"talker graph failed to produce {name} (ncnn error {ret})")
            caches.append(mat)
        if ret_h != 0 or ret_l != 0:
            raise BundleError(f"talker graph failed (ncnn error {ret_h or ret_l})")
        self._caches = caches
        self._pos += n
        return np.array(hidden, dtype=np.float32), np.array(logits, dtype=np.float32)
