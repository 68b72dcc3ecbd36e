"""Mats in and out of ncnn extractors: the functions every decode-step net (sequence_net.py, step_graph.py) uses."""

from __future__ import annotations

import ncnn
import numpy as np

from ..errors import BundleError


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


def extract_raw(ex: ncnn.Extractor, names: list[str]) -> list[ncnn.Mat]:
    """extract_mat(raw=True) for many blobs (KV caches) in one Python call: tens of them per decode call."""
    mats = []
    for name in names:
        ret, mat = ex.extract(name, 1)
        if ret != 0:
            raise BundleError(f"The model graph failed to produce {name} (ncnn error {ret}).")
        mats.append(mat)
    return mats


def extract(ex: ncnn.Extractor, name: str) -> np.ndarray:
    """A blob as a float32 array: a view of the extracted Mat (which the array keeps alive), not a copy."""
    arr = np.asarray(extract_mat(ex, name))
    return arr if arr.dtype == np.float32 else arr.astype(np.float32)


class InputRow:
    """One input Mat of a fixed shape, reused for every decode step: copying a row into it is one numpy call where
    as_mat() makes three (each costs tens of microseconds right after an ncnn call has evicted the caches).

    Reuse is safe: while an extractor holds it the Mat has a second reference, so ncnn copies it before a layer
    writes to it in place, and no output blob of the decode graphs shares its memory (they are new Mats)."""

    def __init__(self, shape: tuple[int, ...]):
        self.shape = tuple(shape)
        self.mat = as_mat(np.zeros(shape, np.float32))
        self._view = np.asarray(self.mat)  # the Mat's own memory

    def set(self, row: np.ndarray) -> ncnn.Mat:
        np.copyto(self._view, row)
        return self.mat
