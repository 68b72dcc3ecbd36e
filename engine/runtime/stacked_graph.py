"""The q8 code predictor's graph: every row of a call at one position, the rows stacked as attention heads.

The code predictor's KV cache starts empty every frame and each call adds one position to every row (frames being
predicted together, one row each), so all rows of a call are at the same position: they attend in one SDPA per
layer with the rows stacked as extra heads (stacked_attention_param_text), and one extractor call per position
serves every row without a round trip through Python per layer. Rows stay independent of each other: the int8
Gemm rounds and sums each row on its own (engine/runtime/step_graph.py), and each head attends on its own.

A frame's first two positions (the talker's hidden state, then code 0's embedding) are both known before the first
call, so StackedNet.start() runs them together, 2R rows in one call: the weights of the layers are read once for
both positions instead of twice. The attention of those two positions runs outside the graph, in two calls of a
one-layer SDPA net with the graph's own parameters (position 0 alone, then position 1 over position 0's keys):
the same computation as two separate calls of the graph, so the same bits.
"""

from __future__ import annotations

from collections.abc import Sequence

import ncnn
import numpy as np

from ..errors import BundleError
from .bundle import Bundle
from .ncnn_graph import ParamLayer, layers_param_text, parse_param
from .ncnn_mats import as_mat, extract
from .openmp import team_limit
from .sequence_net import Cache, SequenceNet
from .step_graph import StepNet, attend_once, q8_format, sdpa_net, step_param_text

# ncnn's per-layer featmask (param 31), bit 7: run the layer on one thread. A copy layer (Reshape, Permute) does
# almost no work, and on two threads each one wakes the sleeping second thread (code predictor, 40 such layers
# added below, int8 Gemms on two threads: docs/performance.md "CPU speed: self-tuning and the memory floor");
# the result is the same bits.
ONE_THREAD = f"31={1 << 7}"


def stacked_attention_param_text(param_text: str, heads: int, head_dim: int) -> str:
    """Rewrite a q8 code-predictor .param for rows that are all at one position (its KV cache starts empty every
    frame, so the rows of a call always are): rows stay a matrix as in step_param_text, and each attention layer
    stays in the graph with its KV cache, the rows stacked as extra heads. Permute and Reshape do what the
    numpy around a cut-out attention did ((heads, R, head_dim) -> (R * heads, 1, head_dim) and back), so each
    head, and each row, is computed on its own; one call per position then serves every row without a round trip
    through Python per layer. The layers added here run on one thread, as the converter's own weight-free layers
    do (ONE_THREAD)."""
    out: list[ParamLayer] = []
    for line in parse_param(param_text):
        if line.type == "Squeeze":  # rows stay a matrix (see step_param_text)
            line = ParamLayer("Noop", line.name, line.inputs, line.outputs)
        if line.type == "SDPA":
            if len(line.inputs) != 5 or len(line.outputs) != 3:
                raise BundleError(f"attention layer {line.name} is not an unmasked attention with a KV cache")
            stacked = []
            for blob in line.inputs[:3]:
                out.append(ParamLayer("Permute", f"{blob}__rowsfirst", (blob,), (f"{blob}__rows",),
                                      ("0=2", ONE_THREAD)))
                out.append(ParamLayer("Reshape", f"{blob}__stack", (f"{blob}__rows",), (f"{blob}__heads",),
                                      (f"0={head_dim}", "1=1", "2=-1", ONE_THREAD)))
                stacked.append(f"{blob}__heads")
            att = line.outputs[0]
            # one thread too: at most 17 positions per frame, a second thread only adds its wake-up (full-size
            # 0.6B q8, AMD EPYC, 2 threads: SDPA 0.33 ms of a 3.4 ms call, against 0.04 ms on one thread)
            tokens = _one_thread(line.tokens)
            out.append(ParamLayer("SDPA", line.name, (*stacked, *line.inputs[3:]), (f"{att}__heads", *line.outputs[1:]),
                                  tokens))
            out.append(ParamLayer("Reshape", f"{att}__unstack", (f"{att}__heads",), (f"{att}__rows",),
                                  (f"0={head_dim}", f"1={heads}", "2=-1", ONE_THREAD)))
            out.append(ParamLayer("Permute", f"{att}__headsfirst", (f"{att}__rows",), (att,), ("0=2", ONE_THREAD)))
            continue
        out.append(line)
    return layers_param_text(out)


class StackedNet(SequenceNet):
    """The q8 code predictor's stacked graph (run(): one position of up to max_rows rows per call) with start(),
    a frame's positions 0 and 1 in one call (see the module docstring)."""

    def __init__(self, bundle: Bundle, graph: str, threads: int, precision: str, param_text: str, heads: int,
                 head_dim: int):
        """param_text: the stored graph; threads: the int8 Gemms' load-time count."""
        super().__init__(bundle, graph, threads, precision, param_text=stacked_attention_param_text(
            param_text, heads, head_dim), packing=False, max_rows=StepNet.Q8_MAX_ROWS["int8"], fixed_threads=True)
        _, sites = step_param_text(param_text)
        # each layer's stacked q, k, v and attention-output blobs (stacked_attention_param_text names them)
        self._stacked = [tuple(f"{blob}__heads" for blob in (s.q, s.k, s.v, s.out)) for s in sites]
        # start()'s attention, per layer: one net per distinct parameters, fp32 and one thread as the graph's own
        # attention layers, unpacked as the graph (the caches pass between the two unchanged)
        nets = {params: sdpa_net(bundle, graph, params, threads, packing=False)
                for params in {_one_thread(site.params) for site in sites}}
        self._site_nets = [nets[_one_thread(site.params)] for site in sites]

    def start(self, rows: np.ndarray, cos: ncnn.Mat, sin: ncnn.Mat, outputs: Sequence[str]
              ) -> tuple[list[np.ndarray], Cache]:
        """Positions 0 and 1 of R rows in one call: rows (2R, width), the R position-0 rows first, cos/sin (2R
        rows) in the same order. Returns each output's R position-1 rows and the cache after both positions (as
        run() at position 1 returns it)."""
        r = rows.shape[0] // 2
        if rows.shape[0] != 2 * r or r == 0:
            raise BundleError(f"the code predictor's start takes two rows per frame, not {rows.shape[0]}")
        ex = self.net.create_extractor()
        ex.input("in0", as_mat(rows))
        ex.input("cos", cos)
        ex.input("sin", sin)
        cache: Cache = []
        with team_limit(self._team):
            for (q, k, v, att), sdpa in zip(self._stacked, self._site_nets, strict=True):
                # (2R * heads, 1, head_dim) each, the position-0 rows' heads first
                (q0, q1), (k0, k1), (v0, v1) = (_halves(extract(ex, blob)) for blob in (q, k, v))
                att0, past = attend_once(sdpa, q0, k0, v0, None, None)
                att1, grown = attend_once(sdpa, q1, k1, v1, None, past)
                ex.input(att, as_mat(np.concatenate([np.asarray(att0), np.asarray(att1)])))
                cache.extend(grown)
            outs = [extract(ex, name).reshape(2 * r, -1)[r:] for name in outputs]
        return outs, cache


def _halves(stacked: np.ndarray) -> tuple[ncnn.Mat, ncnn.Mat]:
    half = stacked.shape[0] // 2
    return as_mat(stacked[:half]), as_mat(stacked[half:])


def _one_thread(tokens: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(t for t in tokens if not t.startswith("31=")) + (ONE_THREAD,)


def runs_stacked(bundle: Bundle, graph: str) -> bool:
    """True when the code-predictor graph runs as a StackedNet: q8 bundles of the int8 format. The older 8-bit
    block format's Gemm rounds rows in blocks, so those keep StepNet and its row limit; float graphs run as stored."""
    return _stacked_text(bundle, graph) is not None


def stacked_code_predictor_net(bundle: Bundle, graph: str, heads: int, head_dim: int, precision: str,
                               int8_threads: int | None = None) -> StackedNet | None:
    """The q8 code predictor's StackedNet, or None where it does not run stacked (runs_stacked)."""
    text = _stacked_text(bundle, graph)
    if text is None:
        return None
    return StackedNet(bundle, graph, int8_threads or StepNet.INT8_THREADS, precision, text, heads, head_dim)


def _stacked_text(bundle: Bundle, graph: str) -> str | None:
    """The stored .param of a graph that runs stacked (runs_stacked), else None."""
    if bundle.precision != "q8":
        return None
    text = bundle.file(f"{graph}.param").read_text(encoding="utf-8")
    what = f"The {graph} network of the model bundle {bundle.path}"
    return text if q8_format(step_param_text(text)[0], what) == "int8" else None
