"""The code predictor (sub-talker): 15 codes per frame from the talker hidden state and code 0.

Position 0 is the talker hidden, position 1 is C(c0) (its logits give code 1), position g is the embedding of
code g-1 (logits give code g). Each position is one call per frame on a float bundle's stored graph
(engine/runtime/sequence_net.py). A q8 bundle makes one call for all frames being predicted together, rows stacked
as attention heads (engine/runtime/stacked_graph.py), and positions 0 and 1 share one call; bundles of the older
8-bit block format run the step graph (engine/runtime/step_graph.py). The KV cache starts empty every frame. Only
the lm_head of the current group runs (ncnn evaluates lazily).
"""

from __future__ import annotations

from collections.abc import Callable

import ncnn
import numpy as np

from ..errors import EngineError
from ..runtime.bundle import Bundle
from ..runtime.cpu_load import shared_cpu_load
from ..runtime.ncnn_mats import as_mat
from ..runtime.sequence_net import Cache, SequenceNet
from ..runtime.stacked_graph import StackedNet, stacked_code_predictor_net
from ..runtime.step_graph import StepNet
from ..runtime.thread_governor import ThreadGovernor
from .talker import RopeTable, as_rows, check_ids, decode_net, net_precision, talker_part

Choose = Callable[[np.ndarray, int], int]


class CodePredictor:
    def __init__(self, bundle: Bundle, threads: int = 2, *, compact_weights: bool = True,
                 adaptive_threads: bool = True, int8_threads: int | None = None, start_threads: int | None = None):
        """int8_threads: the load-time thread count of a q8 bundle's int8 Gemms (default StepNet.INT8_THREADS);
        start_threads: the thread governor's first count (default `threads`)."""
        part = talker_part(bundle)
        self._load = (bundle, part, compact_weights)
        spec = part.code_predictor
        self.groups = part.num_code_groups  # 16: code 0 from the talker + 15 from here
        self.codebook_size = part.codebook_size
        self.hidden_size = part.talker.hidden  # inputs and the feedback are talker width
        self.layers = spec.layers
        self.net = self.load_net(threads, int8_threads)
        self.governor = ThreadGovernor(threads, adaptive=adaptive_threads, start=start_threads,
                                       load=shared_cpu_load())
        self._codec = bundle.table(part.codec_table, in_memory=True)  # both read at every frame
        self._cp = bundle.table(part.cp_codec_table, in_memory=True)  # (groups-1, codebook, talker hidden)
        self._cp_flat = self._cp.reshape(-1, self._cp.shape[-1])  # row (g-1)*codebook + code
        rope = RopeTable(spec.head_dim, spec.rope_theta, initial=self.groups)
        self._cos = [rope.cos[p:p + 1] for p in range(self.groups)]  # positions are the same every frame
        self._sin = [rope.sin[p:p + 1] for p in range(self.groups)]
        self._rope_mats = [(as_mat(c), as_mat(s)) for c, s in zip(self._cos, self._sin, strict=True)]  # reused
        self._rope_rows = {1: self._rope_mats}  # row count -> the 16 positions' RoPE Mats for that many rows
        self._start_rope: dict[int, tuple[ncnn.Mat, ncnn.Mat]] = {}  # row count -> StackedNet.start's (cos, sin)
        self._heads = [f"logits_{g}" for g in range(self.groups - 1)]
        self._offsets = np.arange(self.groups - 1, dtype=np.int64) * self.codebook_size

    @property
    def position_rope(self) -> list[tuple]:
        """The (cos, sin) Mats of a frame's 16 positions, one row each: what each call of the graph is fed."""
        return self._rope_mats

    @property
    def codec_embedding(self) -> np.ndarray:
        """The code-0 embedding table (codebook x talker hidden): a frame's first input is its code 0's row."""
        return self._codec

    @property
    def code_embeddings(self) -> np.ndarray:
        """The tables of codes 1..15 (groups-1, codebook, talker hidden): after code g (1..14) is chosen, the next
        position's input is row code of table g-1."""
        return self._cp

    def load_net(self, threads: int, int8_threads: int | None = None) -> SequenceNet | StepNet:
        """A new net of the code predictor's graph at `threads` (a q8 bundle's int8 Gemms at int8_threads, fixed at
        load; default StepNet.INT8_THREADS)."""
        bundle, part, compact = self._load
        spec = part.code_predictor
        return (stacked_code_predictor_net(
            bundle, part.cp_graph, spec.heads, spec.head_dim,
            net_precision(bundle, part, compact), int8_threads)) or decode_net(bundle, part, part.cp_graph,
                                                                               threads, compact, int8_threads)

    def predict(self, past_hidden: np.ndarray, c0: int, choose: Choose) -> np.ndarray:
        """Codes 1..15 of the frame whose code 0 is c0; choose(logits, group) picks each code."""
        return self.predict_many(np.asarray(past_hidden, np.float32).reshape(1, -1), [c0], [choose])[0]

    def predict_many(self, past_hidden: np.ndarray, c0s, chooses: list[Choose]) -> np.ndarray:
        """predict() for R frames at once: past_hidden (R, H), c0s (R,), one choose per row -> (R, 15) codes.

        A float bundle's rows run one after another, each exactly as alone. On a q8 step graph every row is at
        the same position, so all rows attend in one SDPA per layer with the rows stacked as extra heads (row r's
        heads attend only to row r's keys: GQA maps query head r*n+h to key head r*kv+h//(n/kv)); each head is
        computed on its own, so a row's numbers do not depend on the other rows."""
        past_hidden = np.ascontiguousarray(past_hidden, dtype=np.float32)
        c0s = np.asarray(c0s, dtype=np.int64).reshape(-1)
        r = c0s.shape[0]
        if past_hidden.shape != (r, self.hidden_size) or len(chooses) != r or r == 0:
            raise EngineError(f"code predictor needs ({r}, {self.hidden_size}) hidden states and {r} choosers")
        check_ids(c0s, self._codec.shape[0], "code 0")
        self.net.set_threads(self.governor.start())
        try:
            chunk = self.net.max_rows  # rows per call that stay independent of each other
            return np.concatenate([self._predict_many(past_hidden[c:c + chunk], c0s[c:c + chunk], chooses[c:c + chunk])
                                   for c in range(0, r, chunk)])
        finally:
            self.governor.stop()

    def _predict_one(self, net: SequenceNet, past_hidden: np.ndarray, c0: int, choose: Choose) -> np.ndarray:
        """One frame on a SequenceNet: one row per call, its input the table's own row (as few numpy calls as
        possible: each costs tens of microseconds after a call has streamed the weights through the caches)."""
        codes: list[int] = []
        _, cache = net.run(past_hidden, *self._rope_mats[0], None, None, ())
        x = self._codec[c0]
        for g in range(1, self.groups):
            (logits,), cache = net.run(x, *self._rope_mats[g], None, cache, (self._heads[g - 1],))
            codes.append(self._checked(choose(logits, g), g))
            if g < self.groups - 1:
                x = self._cp[g - 1, codes[-1]]
        return np.array(codes, dtype=np.int64)

    def _checked(self, code, group: int) -> int:
        code = int(code)
        if not 0 <= code < self.codebook_size:
            raise EngineError(f"code predictor choice {code} for group {group} is out of range")
        return code

    def _predict_stacked(self, net: StackedNet, past_hidden: np.ndarray, c0s: np.ndarray,
                         chooses: list[Choose]) -> np.ndarray:
        """All rows in one call per position, positions 0 and 1 together (engine/runtime/stacked_graph.py): no
        round trip through Python per layer after the first call."""
        r = c0s.shape[0]
        if r not in self._rope_rows:
            self._rope_rows[r] = [(as_mat(np.repeat(c, r, 0)), as_mat(np.repeat(s, r, 0)))
                                  for c, s in zip(self._cos, self._sin, strict=True)]
        if r not in self._start_rope:  # positions 0 and 1 of r rows: the r position-0 rows first
            cos, sin = (as_mat(np.repeat(np.concatenate(t[:2]), r, 0)) for t in (self._cos, self._sin))
            self._start_rope[r] = cos, sin
        rope = self._rope_rows[r]
        cos, sin = self._start_rope[r]
        (logits,), cache = net.start(np.concatenate([past_hidden, self._codec[c0s]]), cos, sin, (self._heads[0],))
        picked: list[list[int]] = []  # per group, the code of each row (Python ints: no numpy call per code)
        for g in range(1, self.groups):
            logits = logits.reshape(r, -1)
            picked.append([self._checked(chooses[j](logits[j], g), g) for j in range(r)])
            if g < self.groups - 1:  # the net's reused input Mat takes the embedding rows as they are
                (logits,), cache = net.run(self._cp[g - 1][picked[-1]], *rope[g + 1], None, cache, (self._heads[g],))
        return np.array(picked, dtype=np.int64).T.copy()

    def _predict_many(self, past_hidden: np.ndarray, c0s: np.ndarray, chooses: list[Choose]) -> np.ndarray:
        net = self.net
        if isinstance(net, StackedNet):
            return self._predict_stacked(net, past_hidden, c0s, chooses)
        if isinstance(net, StepNet):
            return self._predict_step_graph(net, past_hidden, c0s, chooses)
        return np.stack([self._predict_one(net, h, int(c0), choose)
                         for h, c0, choose in zip(past_hidden, c0s, chooses, strict=True)])

    def _predict_step_graph(self, net: StepNet, past_hidden: np.ndarray, c0s: np.ndarray,
                            chooses: list[Choose]) -> np.ndarray:
        """Bundles of the older 8-bit block format: one row in one call per position, attention inside the graph;
        several rows with the attention cut out, the rows stacked as heads in its SDPA net."""
        r = c0s.shape[0]
        codes = np.empty((r, self.groups - 1), dtype=np.int64)
        layer_caches: list = [None] * len(net.sites)  # several rows: per layer, their (k, v) stacked as heads
        cache: Cache | None = None  # one row: the graph's cache list

        def attend(site, q, k, v):
            heads, m, hd = q.shape
            stacked = [a.transpose(1, 0, 2).reshape(-1, 1, hd) for a in (q, k, v)]
            att, layer_caches[site.layer] = net.attention(site, *stacked, None, layer_caches[site.layer])
            return att.reshape(m, heads, hd).transpose(1, 0, 2)

        def run(x: np.ndarray, pos: int, outputs) -> list[np.ndarray]:
            nonlocal cache
            if r == 1:  # Mats go in as they are (same numbers, no numpy round trips)
                outs, cache = net.run(x, *self._rope_mats[pos], None, cache, outputs)
                return [o.reshape(1, -1) for o in outs]
            return net.run_rows(x, np.repeat(self._cos[pos], r, 0), np.repeat(self._sin[pos], r, 0), attend, outputs)

        run(past_hidden, 0, ())
        x = as_rows(self._codec, c0s)
        for g in range(1, self.groups):
            logits = run(x, g, (self._heads[g - 1],))[0]
            for j in range(r):
                codes[j, g - 1] = self._checked(chooses[j](logits[j], g), g)
            if g < self.groups - 1:
                x = as_rows(self._cp[g - 1], codes[:, g - 1])
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
