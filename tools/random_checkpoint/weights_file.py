"""Tensor values, seeded per tensor name, and the streaming safetensors writer (bounded memory at full size)."""

from __future__ import annotations

import json
import os
import struct
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from .tensor_specs import TensorSpec

ST_DTYPES = {"fp32": ("F32", 4), "bf16": ("BF16", 2)}
_CHUNK = 1 << 22  # elements generated at a time: bounded memory for the 311 M-element text table
_TABLE_SEED = 0x51A7  # the shared pool of standard-normal draws (see _normal_table)


def _rng(seed: int, name: str) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(name.encode())])


def _normal_table() -> np.ndarray:
    """65536 fixed standard-normal draws. Big tensors pick from it with 16 random bits per element: one gather
    instead of a normal sample and a bf16 rounding per element (5x faster; full-size presets write in seconds)."""
    return np.random.default_rng(_TABLE_SEED).standard_normal(1 << 16, dtype=np.float32)


def tensor_chunks(spec: TensorSpec, seed: int, dtype: str = "fp32", table: np.ndarray | None = None
                  ) -> Iterator[np.ndarray]:
    """The tensor's values in row-major chunks, as float32 or bf16 bits (uint16) for dtype "bf16".

    Deterministic per (seed, name); the bf16 chunks are exactly the float32 ones rounded to nearest even."""
    n = spec.numel
    if spec.init in ("normal", "norm"):
        base = _normal_table() if table is None else table
        vals = base * np.float32(0.1) + np.float32(1.0) if spec.init == "norm" else base * np.float32(spec.a * spec.gain)
        lookup = _to_bf16(vals) if dtype == "bf16" else vals
        bits = np.random.SFC64(np.random.SeedSequence([seed, zlib.crc32(spec.name.encode())]))
        cols = n // spec.shape[0]
        done = 0
        while done < n:
            k = min(_CHUNK, n - done)
            idx = bits.random_raw((k + 3) // 4).view(np.uint16)[:k]
            out = lookup[idx]
            for row, g in spec.rows:  # a few rows with their own gain (e.g. the talker's EOS row)
                lo, hi = max(row * cols - done, 0), min((row + 1) * cols - done, k)
                if lo < hi:
                    v = vals[idx[lo:hi]] * np.float32(g)
                    out[lo:hi] = _to_bf16(v) if dtype == "bf16" else v
            yield out
            done += k
        return
    rng = _rng(seed, spec.name)
    if spec.init in ("ones", "const"):
        v = np.full(n, 1.0 if spec.init == "ones" else spec.a, np.float32)
    elif spec.init in ("usage", "uniform"):
        low, high = (0.5, 2.0) if spec.init == "usage" else (float(spec.a), float(spec.b))
        v = (low + (high - low) * rng.random(n, dtype=np.float32)).astype(np.float32)
    elif spec.init == "codesum":
        # embedding_sum = codebook vector * usage, so that sum / usage is a N(0, std) row
        usage = tensor_values(TensorSpec(spec.pair, (spec.shape[0],), "usage"), seed)
        v = rng.standard_normal(n, dtype=np.float32) * np.float32(spec.a)
        v = (v.reshape(spec.shape[0], -1) * usage[:, None]).reshape(-1)
    else:
        raise ValueError(f"unknown init {spec.init!r} for {spec.name}")
    yield _to_bf16(v) if dtype == "bf16" else v


def tensor_values(spec: TensorSpec, seed: int) -> np.ndarray:
    """The whole tensor as float32, in its shape (for small tensors and tests)."""
    return np.concatenate(list(tensor_chunks(spec, seed))).reshape(spec.shape)


def _to_bf16(v: np.ndarray) -> np.ndarray:
    """Round float32 to bfloat16 (nearest even), returned as uint16 bits."""
    u = v.view(np.uint32)
    return ((u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)).astype(np.uint16)


def safetensors_header(specs: list[TensorSpec], dtype: str) -> bytes:
    """The exact header the writer produces: 8-byte length + JSON padded with spaces to 8 bytes."""
    st, size = ST_DTYPES[dtype]
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    off = 0
    for s in specs:
        nbytes = s.numel * size
        header[s.name] = {"dtype": st, "shape": list(s.shape), "data_offsets": [off, off + nbytes]}
        off += nbytes
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    return struct.pack("<Q", len(raw)) + raw


def write_safetensors(path: Path, specs: list[TensorSpec], dtype: str, seed: int,
                      progress: Callable[[float], None] | None = None) -> None:
    """Stream every tensor to `path` (atomically: temp file + rename)."""
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise ValueError("duplicate tensor names")
    total = sum(s.numel for s in specs) or 1
    done = 0
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(safetensors_header(specs, dtype))
            table = _normal_table()
            for s in specs:
                for chunk in tensor_chunks(s, seed, dtype, table):
                    f.write(np.ascontiguousarray(chunk).data)
                    done += chunk.size
                    if progress is not None:
                        progress(done / total)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
