"""Mats in and out of ncnn extractors: the helpers every decode-step net (sequence_net.py, step_graph.py) uses."""

from __future__ import annotations

import ncnn
import numpy as np

from .errors import BundleError


def as_mat(arr: np.ndarray) -> ncnn.Mat:
    """An ncnn Mat owning a float32 copy of arr; one Mat can be an input of any number of extractors (ncnn
    copies a shared input before a layer writes to it in place)."""
    # ncnn.Mat(arr) borrows the numpy buffer without a reference (see the ncnn notes): keep the contiguous copy
    # in a local until clone() has copied it
    data = np.ascontiguousarray(arr, dtype=np.float32)
    return ncnn.Mat(data).clone()


def extract_mat(ex: ncnn.Extractor, name: str, raw: bool = False) -> ncnn.Mat:
    """A blob as an unpacked fp32 Mat, or with raw=True as ncnn holds it (a KV cache: opaque, fed back
    unchanged)."""
    ret, mat = ex.extract(name, 1 if raw else 0)
    if ret != 0:
        raise BundleError(f"The model graph failed to produce {name} (ncnn error {ret}).")
    return mat


def extract(ex: ncnn.Extractor, name: str) -> np.ndarray:
    """A blob as a new float32 array."""
    return np.array(extract_mat(ex, name), dtype=np.float32)
