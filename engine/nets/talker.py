"""The talker: decoder stack + codec head on ncnn.

Float bundles run the stored graph one sequence per call (engine/runtime/sequence_net.py); q8 bundles run the row-stacked
step graph, one call per step for several sequences (engine/runtime/step_graph.py). Each sequence keeps its own KV cache
as ncnn Mats, extracted raw (`extract(name, 1)`) and fed back unchanged; ncnn's SDPA appends the new rows.
Positions and RoPE rows are tracked here.
"""

from __future__ import annotations

import platform

import ncnn
import numpy as np

from ..errors import EngineError
from ..runtime.bundle import Bundle
from ..runtime.cpu_load import shared_cpu_load
from ..runtime.manifest_parts import TalkerPart
from ..runtime.ncnn_mats import as_mat
from ..runtime.sequence_net import Cache, SequenceNet
from ..runtime.step_graph import StepNet
from ..runtime.thread_governor import ThreadGovernor

MASKED = np.float32(-1e9)  # additive mask value for future positions (exp underflows to exactly 0)


X86 = platform.machine().lower() in ("x86_64", "amd64", "x86", "i386", "i686")


def talker_part(bundle: Bundle) -> TalkerPart:
    """The bundle's talker part (the talker and the code predictor) as its typed record."""
    return bundle.record(TalkerPart)


def net_precision(bundle: Bundle, part: TalkerPart, compact_weights: bool = True) -> str:
    """ncnn options for the talker/code-predictor graphs.

    fp32 bundles may hold fp16-stored (lossless) weights: on x86 ncnn then keeps them fp16 in memory and still
    computes in fp32 (it never converts activations to fp16 there); elsewhere, or with compact_weights=False,
    they are widened to fp32 at load. So may the Linears a q8 bundle keeps float (engine/convert/q8_check.py):
    fp16 storage leaves its int8 Gemms and other layers as they are (same bits, tests/test_q8_check.py)."""
    if bundle.precision not in ("fp32", "q8"):
        return bundle.runtime_precision
    if compact_weights and X86 and part.fp16_weight_layers > 0:
        return "fp16"
    return "fp32"


def decode_net(bundle: Bundle, part: TalkerPart, graph: str, threads: int, compact_weights: bool,
               int8_threads: int | None = None) -> SequenceNet | StepNet:
    """The net a talker / code-predictor graph runs on: the stored graph for float bundles, the row-stacked step
    graph for q8 (see the module docstring)."""
    precision = net_precision(bundle, part, compact_weights)
    if bundle.precision == "q8":
        return StepNet(bundle, graph, threads, precision, int8_threads)
    return SequenceNet(bundle, graph, threads, precision)


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


class TalkerSequence:
    """One sequence's place in the talker: its KV cache (opaque Mats, k_out_0, v_out_0, k_out_1, ... as the graph
    gave them: engine/runtime/sequence_net.py Cache) and length."""

    def __init__(self) -> None:
        self.caches: Cache = []
        self.position = 0


class Talker:
    """Talker stack on a SequenceNet (float bundles) or a StepNet (q8).

    start() prefills one sequence alone; step_many() advances several sequences by one position (in one call on
    a StepNet, one call per sequence on a SequenceNet), each row at its own position over its own KV cache; a
    row's numbers do not depend on the other rows; step() is the one-sequence form. The talker holds no sequence:
    each KV cache is a TalkerSequence its caller owns (engine/synthesis/generation.py SequenceState)."""

    def __init__(self, bundle: Bundle, threads: int = 2, *, compact_weights: bool = True,
                 adaptive_threads: bool = True, int8_threads: int | None = None, start_threads: int | None = None):
        """int8_threads: the load-time thread count of a q8 bundle's int8 Gemms (default StepNet.INT8_THREADS);
        start_threads: the thread governor's first count (default `threads`)."""
        part = talker_part(bundle)
        self._load = (bundle, part, compact_weights)
        spec = part.talker
        self.hidden_size = spec.hidden
        self.vocab_size = part.vocab_size
        self.layers = spec.layers
        self.net = self.load_net(threads, int8_threads)
        # a float graph's single row goes in as a vector: it takes ncnn's GEMV kernel (engine/runtime/sequence_net.py)
        self._vector_rows = not isinstance(self.net, StepNet)
        self.governor = ThreadGovernor(threads, adaptive=adaptive_threads, start=start_threads,
                                       load=shared_cpu_load())
        self._codec = bundle.table(part.codec_table, in_memory=True)  # read every frame
        self._rope = RopeTable(spec.head_dim, spec.rope_theta)
        self._zeros = np.zeros((1, 1024), np.float32)
        self._rope_mats: list[tuple[ncnn.Mat, ncnn.Mat]] = []  # per position, made in blocks, shared by sequences

    def load_net(self, threads: int, int8_threads: int | None = None) -> SequenceNet | StepNet:
        """A new net of this talker's graph at `threads` (a q8 bundle's int8 Gemms at int8_threads, fixed at load;
        default StepNet.INT8_THREADS)."""
        bundle, part, compact = self._load
        return decode_net(bundle, part, part.talker_graph, threads, compact, int8_threads)

    def start(self, rows: np.ndarray) -> tuple[TalkerSequence, np.ndarray, np.ndarray]:
        """Prefill a new sequence with its prompt rows (L, H) at positions 0..L-1; returns the sequence and the
        (hidden, logits) of its last position."""
        rows = np.ascontiguousarray(rows, dtype=np.float32)
        if rows.ndim != 2 or rows.shape[1] != self.hidden_size or rows.shape[0] < 1:
            raise EngineError(f"talker prefill needs (L, {self.hidden_size}) rows, got shape {rows.shape}")
        n = rows.shape[0]
        mask = np.triu(np.full((n, n), MASKED, np.float32), 1)
        cos, sin = self._rope.rows(0, n)
        self.net.set_threads(self.governor.fixed())
        seq = TalkerSequence()
        (hidden, logits), seq.caches = self.net.run(rows[0] if n == 1 and self._vector_rows else rows, cos, sin, mask,
                                                    None, ("hidden", "logits"))
        seq.position = n
        return seq, hidden.reshape(n, -1)[-1].copy(), logits.reshape(n, -1)[-1].copy()

    def step_many(self, seqs: list[TalkerSequence], rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One new position for each sequence: rows (R, H), row j continues seqs[j]. Returns (hidden, logits),
        (R, H) and (R, V)."""
        rows = np.ascontiguousarray(rows, dtype=np.float32)
        if rows.ndim != 2 or rows.shape != (len(seqs), self.hidden_size):
            raise EngineError(f"talker step needs ({len(seqs)}, {self.hidden_size}) rows, got shape {rows.shape}")
        if not seqs or any(s.position == 0 for s in seqs):
            raise EngineError("talker step before prefill")
        self.net.set_threads(self.governor.start())
        try:
            chunk = self.net.max_rows  # rows per call that stay independent of each other
            parts = [self._step_rows(seqs[c:c + chunk], rows[c:c + chunk]) for c in range(0, len(seqs), chunk)]
        finally:
            self.governor.stop()
        if len(parts) == 1:
            return parts[0]
        return np.concatenate([h for h, _ in parts]), np.concatenate([lg for _, lg in parts])

    def _step_rows(self, seqs: list[TalkerSequence], rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        positions = [s.position for s in seqs]
        self._rope.rows(0, max(positions) + 1)  # grow the table
        if len(seqs) == 1:  # one call, attention inside the graph; Mats go in as they are
            (seq,), p = seqs, positions[0]
            (hidden, logits), seq.caches = self.net.run(rows[0] if self._vector_rows else rows,
                                                        *self._rope_mats_at(p), self._no_mask_mat(p + 1), seq.caches,
                                                        ("hidden", "logits"))
            seq.position += 1
            return hidden.reshape(1, -1), logits.reshape(1, -1)
        net = self.net
        assert isinstance(net, StepNet)  # float graphs take one row per call (max_rows)
        cos, sin = self._rope.cos[positions], self._rope.sin[positions]
        masks = {p: self._no_mask(p + 1) for p in set(positions)}

        def attend(site, q, k, v):
            out = np.zeros_like(q)
            kv = slice(2 * site.layer, 2 * site.layer + 2)  # this layer's (k, v) in a sequence's cache list
            for j, s in enumerate(seqs):
                out[:, j:j + 1], s.caches[kv] = net.attention(
                    site, q[:, j:j + 1], k[:, j:j + 1], v[:, j:j + 1], masks[s.position], tuple(s.caches[kv]))
            return out

        hidden, logits = net.run_rows(rows, cos, sin, attend, ("hidden", "logits"))
        for s in seqs:
            s.position += 1
        return hidden, logits

    def _rope_mats_at(self, position: int) -> tuple[ncnn.Mat, ncnn.Mat]:
        """The RoPE rows of one position as Mats, made a block at a time (a Mat made right after an ncnn call costs
        tens of microseconds; a block of them made together, a few each)."""
        made = len(self._rope_mats)
        if position >= made:
            end = max(2 * made, position + 1, 256)
            self._rope.rows(0, end)  # grow the table
            self._rope_mats += [(as_mat(self._rope.cos[p:p + 1]), as_mat(self._rope.sin[p:p + 1]))
                                for p in range(made, end)]
        return self._rope_mats[position]

    @staticmethod
    def _no_mask_mat(keys: int) -> ncnn.Mat:
        """_no_mask() made by ncnn itself (two calls instead of a numpy row and a copy)."""
        mask = ncnn.Mat(keys, 1)
        mask.fill(0.0)
        return mask

    def _no_mask(self, keys: int) -> np.ndarray:
        """A decode step's mask row over `keys` positions (nothing masked), from one zero row grown on demand."""
        if keys > self._zeros.shape[1]:
            self._zeros = np.zeros((1, 2 * keys), np.float32)
        return self._zeros[:, :keys]

    def step(self, seq: TalkerSequence, row: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One new position of one sequence (its KV cache continues); returns (hidden, logits)."""
        row = np.ascontiguousarray(row, dtype=np.float32).reshape(-1)
        if row.shape[0] != self.hidden_size:
            raise EngineError(f"talker step needs a ({self.hidden_size},) row, got {row.shape[0]} values")
        hidden, logits = self.step_many([seq], row[None])
        return hidden[0], logits[0]

    def codec_rows(self, ids) -> np.ndarray:
        """Rows of the talker codec_embedding (C(id)), float32 (n, H)."""
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        check_ids(ids, self._codec.shape[0], "codec")
        return as_rows(self._codec, ids)
