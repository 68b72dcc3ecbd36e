"""How far generation is from the memory-bandwidth floor: the weight bytes a call reads, and the machine's read
bandwidth.

Generating a frame is bound by reading weights (batch-1 matrix-vector products: each weight is used once per
call). The floor on any machine is therefore bytes read per frame / memory read bandwidth, and `qwen3tts bench`
prints the share of it reached. Bytes are counted from the graph itself: the weight layers an extract needs
(ncnn computes only the layers its outputs depend on), each at the size it has in memory at run time (int8, or
2 bytes where ncnn keeps fp16/bf16 storage, else 4). The bandwidth is numpy's max() over float32 arrays several
times the size of the last-level cache, one reader and one per core (numpy's reductions release the GIL), best of
a few passes. max(), not sum(): numpy's pairwise sum is arithmetic-bound (AMD EPYC, one core: 29 GB/s on a 4 MB
array that stays in cache, 11 GB/s from memory while max() read 78 and 20 GB/s), so a sum understates the
bandwidth and overstates the share reached.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .ncnn_graph import ParamLayer, parse_param

MIN_BANDWIDTH_BYTES = 512 << 20  # arrays at least this large and 4x the last-level cache (300 MB on some Xeons)
MAX_BANDWIDTH_BYTES = 1536 << 20


FEATMASK_NO_FP16 = 1 << 1  # ncnn per-layer featmask bit (param 31): this layer keeps fp32 weights


def layer_weight_bytes(layer: ParamLayer, float_bytes: int) -> int:
    """Bytes of weights one layer reads per call: matrix layers at int8 (1 byte) or `float_bytes` (4 where the
    layer's featmask keeps it fp32), their constant tables (MemoryData: the int8 layers' channel scales, biases)
    at 4."""
    p = layer.params
    fp32 = int(p.get("31", "0")) & FEATMASK_NO_FP16
    if layer.type == "Gemm" and p.get("5", "0") == "1":  # constant B: a weight matrix N x K
        return int(p.get("8", 0)) * int(p.get("9", 0)) * (1 if p.get("18", "0") != "0" else 4 if fp32 else float_bytes)
    if layer.type == "InnerProduct":
        return int(p.get("2", 0)) * (1 if p.get("8", "0") != "0" else 4 if fp32 else float_bytes)
    if layer.type == "MemoryData":
        return 4 * math.prod(max(1, int(p.get(k, 0))) for k in ("0", "1", "2", "11"))
    return 0


def weights_read(param_text: str, outputs: Iterable[str], float_bytes: int, beside: Iterable[str] = ()) -> int:
    """Bytes of weights an extract of `outputs` reads from the graph in `param_text` (every layer they depend on,
    once). beside: leave out the layers an extract of these needs too (what `outputs` alone add: a head's own
    layers beside the other heads, whatever they are called and however the head is stored)."""
    layers = parse_param(param_text)
    shared = _needed(layers, beside)
    return sum(layer_weight_bytes(layer, float_bytes) for name, layer in _needed(layers, outputs).items()
               if name not in shared)


def _needed(layers: list[ParamLayer], outputs: Iterable[str]) -> dict[str, ParamLayer]:
    """The layers an extract of `outputs` runs (ncnn computes only what they depend on), by name."""
    producer = {blob: layer for layer in layers for blob in layer.outputs}
    needed: dict[str, ParamLayer] = {}
    todo = [b for b in outputs if b in producer]
    while todo:
        layer = producer[todo.pop()]
        if layer.name in needed:
            continue
        needed[layer.name] = layer
        todo.extend(b for b in layer.inputs if b in producer)
    return needed


@dataclass(frozen=True)
class Bandwidth:
    one_reader: float  # bytes per second
    all_readers: float
    readers: int
    array_bytes: int


def last_level_cache_bytes() -> int:
    """The largest CPU cache (Linux sysfs); 0 where it cannot be read."""
    best = 0
    for index in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            text = (index / "size").read_text().strip().upper()
        except OSError:
            continue
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        try:
            best = max(best, int(text.rstrip("KMG")) * scale)
        except ValueError:
            continue
    return best


def measure_read_bandwidth(readers: int, repeats: int = 3, total_bytes: int | None = None) -> Bandwidth:
    """Read bandwidth from one reader and from `readers` at once (numpy max() over float32 arrays that do not fit
    in the caches; best of `repeats`)."""
    readers = max(1, int(readers))
    if total_bytes is None:
        total_bytes = min(MAX_BANDWIDTH_BYTES, max(MIN_BANDWIDTH_BYTES, 4 * last_level_cache_bytes()))
    per = max(1 << 20, total_bytes // readers) // 4
    arrays = [np.ones(per, np.float32) for _ in range(readers)]  # written once: pages are mapped before timing

    def best(count: int) -> float:
        fastest = math.inf
        with ThreadPoolExecutor(max_workers=count) as pool:
            for _ in range(repeats):
                t = time.perf_counter()
                list(pool.map(np.max, arrays[:count]))
                fastest = min(fastest, time.perf_counter() - t)
        return count * per * 4 / fastest

    one = best(1)
    return Bandwidth(one, best(readers) if readers > 1 else one, readers, readers * per * 4)


def floor_and_share(weight_bytes: float, seconds: float, bandwidth: float) -> tuple[float, float]:
    """(the floor in seconds for reading weight_bytes at `bandwidth`, the share of it reached in `seconds`)."""
    floor = weight_bytes / bandwidth if bandwidth > 0 else math.nan
    return floor, (floor / seconds if seconds > 0 else math.nan)


