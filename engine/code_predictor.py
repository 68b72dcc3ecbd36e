"""The code predictor (sub-talker): 15 codes per frame from the talker hidden state and code 0.

Position 0 is the talker hidden, position 1 is C(c0) (its logits give code 1), position g is the embedding of
code g-1 (logits give code g). Each position is one single-row ncnn call (GEMV kernels); the KV cache starts
empty every frame. Only the lm_head of the current group runs (ncnn evaluates lazily).
"""

from __future__ import annotations

from collections.abc import Callable

import ncnn
import numpy as np

from .bundle import Bundle
from .errors import BundleError, EngineError
from .talker import RopeTable, as_rows, check_ids, net_precision
from .thread_governor import ThreadGovernor

Choose = Callable[[np.ndarray, int], int]


class CodePredictor:
    def __init__(self, bundle: Bundle, threads: int = 2, *, compact_weights: bool = True):
        meta = bundle.part("talker")
        spec = meta["code_predictor"]
        self.groups = int(meta["num_code_groups"])  # 16: code 0 from the talker + 15 from here
        self.codebook_size = int(meta["codebook_size"])
        self.hidden_size = int(meta["talker"]["hidden"])  # inputs and the feedback are talker width
        self.layers = int(spec["layers"])
        self.net = bundle.net(meta["cp_graph"], threads, net_precision(bundle, meta, compact_weights))
        self.governor = ThreadGovernor(threads)
        # plain ndarray views of the memory-mapped tables (memmap indexing is slow)
        self._codec = np.asarray(bundle.table(meta["tables"]["codec"]))
        self._cp = np.asarray(bundle.table(meta["tables"]["cp_codec"]))  # (groups-1, codebook, talker hidden)
        self._cp_flat = self._cp.reshape(-1, self._cp.shape[-1])  # row (g-1)*codebook + code
        rope = RopeTable(int(spec["head_dim"]), float(spec["rope_theta"]), initial=self.groups)
        # positions are the same every frame: keep their cos/sin rows as ready ncnn Mats
        self._cos = [ncnn.Mat(np.ascontiguousarray(rope.cos[p:p + 1])).clone() for p in range(self.groups)]
        self._sin = [ncnn.Mat(np.ascontiguousarray(rope.sin[p:p + 1])).clone() for p in range(self.groups)]
        self._cache_in = [f"{kv}_in_{i}" for i in range(self.layers) for kv in ("k", "v")]
        self._cache_out = [f"{kv}_out_{i}" for i in range(self.layers) for kv in ("k", "v")]
        self._heads = [f"logits_{g}" for g in range(self.groups - 1)]
        self._offsets = np.arange(self.groups - 1, dtype=np.int64) * self.codebook_size

    def predict(self, past_hidden: np.ndarray, c0: int, choose: Choose) -> np.ndarray:
        """Codes 1..15 of the frame whose code 0 is c0; choose(logits, group) picks each code."""
        past_hidden = np.ascontiguousarray(past_hidden, dtype=np.float32).reshape(-1)
        if past_hidden.shape[0] != self.hidden_size:
            raise EngineError(f"code predictor needs a ({self.hidden_size},) hidden state")
        check_ids(np.asarray([c0]), self._codec.shape[0], "code 0")
        self.net.opt.num_threads = self.governor.start()
        try:
            return self._predict(past_hidden, c0, choose)
        finally:
            self.governor.stop()

    def _predict(self, past_hidden: np.ndarray, c0: int, choose: Choose) -> np.ndarray:
        codes = np.empty(self.groups - 1, dtype=np.int64)
        caches, _ = self._run(past_hidden, 0, [], None, True)
        x = as_rows(self._codec, int(c0))
        for g in range(1, self.groups):
            caches, logits = self._run(x, g, caches, self._heads[g - 1], g < self.groups - 1)
            code = int(choose(logits, g))
            if not 0 <= code < self.codebook_size:
                raise EngineError(f"code predictor choice {code} for group {g} is out of range")
            codes[g - 1] = code
            if g < self.groups - 1:
                x = as_rows(self._cp[g - 1], code)
        return codes

    def feedback(self, codes16) -> np.ndarray:
        """Talker input for a frame: C(c0) + sum_g cp_codec_embedding[g-1][c_g] (talker width, float32)."""
        codes = np.asarray(codes16, dtype=np.int64).reshape(1, -1)
        return self.frame_rows(codes)[0]

    def frame_rows(self, codes: np.ndarray) -> np.ndarray:
        """feedback() for many frames: (T, 16) codes -> (T, H) float32."""
        codes = np.asarray(codes, dtype=np.int64)
        if codes.ndim != 2 or codes.shape[1] != self.groups:
            raise EngineError(f"codes must have shape (frames, {self.groups}), got {codes.shape}")
        check_ids(codes[:, 0], self._codec.shape[0], "code 0")
        check_ids(codes[:, 1:], self.codebook_size, "code")
        rows = as_rows(self._cp_flat, codes[:, 1:] + self._offsets)  # (T, groups-1, H)
        acc = as_rows(self._codec, codes[:, 0])
        for g in range(self.groups - 1):  # sequential fp32 sum in group order, like the official sum
            acc += rows[:, g]
        return acc

    def _run(self, x: np.ndarray, pos: int, caches: list, head: str | None,
             keep_cache: bool) -> tuple[list, np.ndarray | None]:
        ex = self.net.create_extractor()
        ex.input("in0", ncnn.Mat(np.ascontiguousarray(x, dtype=np.float32)).clone())
        ex.input("cos", self._cos[pos])
        ex.input("sin", self._sin[pos])
        for name, mat in zip(self._cache_in, caches, strict=False):
            ex.input(name, mat)
        logits = None
        if head is not None:
            ret, mat = ex.extract(head)
            if ret != 0:
                raise BundleError(f"code predictor graph failed (ncnn error {ret})")
            logits = np.array(mat, dtype=np.float32)
        out = []
        for name in self._cache_out if keep_cache else ():
            ret, mat = ex.extract(name, 1)
            if ret != 0:
                raise BundleError(f"code predictor graph failed to produce {name} (ncnn error {ret})")
            out.append(mat)
        return out, logits
