"""A float bundle's talker or code-predictor graph run as stored: one sequence per call, attention and its KV
cache inside the graph.

Why not the row-stacked step graph (engine/runtime/step_graph.py) that q8 bundles use: fed one decode row as a vector,
every Linear takes ncnn's GEMV kernel, which splits the outputs between the threads; the 2-D kernel the step
graph needs for row-exact batches splits rows, so a single sequence ran on one core (full-size 0.6B, 2 threads,
alternating in one process: talker step 34 vs 47 ms, code-predictor frame 104 vs 130 ms). And with attention
inside the graph a call is one extractor and two extracts per cache, not a round trip through Python per layer.

Rows of a batch therefore run one after another, each call exactly as the sequence alone: batching a float bundle
changes no result and saves no weight reads (engine/synthesis/generation.py still interleaves the sequences).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeAlias

import ncnn
import numpy as np

from ..errors import BundleError
from .bundle import Bundle
from .ncnn_graph import ParamLayer, layers_param_text, parse_param
from .ncnn_mats import InputRow, as_mat, extract, extract_raw
from .openmp import limited, team_limit

Input: TypeAlias = np.ndarray | ncnn.Mat
Cache = list[ncnn.Mat]  # k_out_0, v_out_0, k_out_1, ... as extracted raw (opaque), fed back unchanged


class WeightThreads:
    """The thread count of a net's weight layers, shared by SequenceNet and StepNet (engine/runtime/step_graph.py).
    Float graphs follow ncnn's opt.num_threads at every call; int8 graphs keep the count their Gemms were loaded with
    (`_loaded_threads`) and run on fewer by limiting the OpenMP teams of their calls (`_team`,
    engine/runtime/openmp.py), never on more. Results do not depend on the count (the GEMV kernel adds each output
    in one order on one thread, the int8 Gemm sums exactly; checked on the full-size graphs)."""

    net: ncnn.Net
    _loaded_threads: int | None  # int8 Gemms: their load-time count; None for float graphs
    _team: int | None  # fewer threads than loaded for the next calls

    @property
    def weight_threads(self) -> int:
        """Threads the weight layers run on now."""
        if self._loaded_threads is None:
            return int(self.net.opt.num_threads)
        return self._team or self._loaded_threads

    @property
    def fixed_threads(self) -> bool:
        """True when the weight layers keep their load-time thread count (int8 Gemms where teams cannot be
        limited per thread)."""
        return self._loaded_threads is not None and not limited()

    def can_run_at(self, threads: int) -> bool:
        """True when set_threads(threads) takes effect: always for float graphs; int8 graphs up to their load-time
        count where teams can be limited, else only at it."""
        return (self._loaded_threads is None or threads == self._loaded_threads
                or (limited() and threads <= self._loaded_threads))

    def threads_at(self, threads: int) -> int:
        """The threads the weight layers run on after set_threads(threads)."""
        return threads if self.can_run_at(threads) else self.weight_threads

    def set_threads(self, threads: int) -> None:
        """Thread count of the weight layers' next calls (engine/runtime/thread_governor.py picks it)."""
        if self._loaded_threads is None:
            self.net.opt.num_threads = threads
        else:
            self._team = threads if limited() and threads < self._loaded_threads else None


class SequenceNet(WeightThreads):
    """The stored graph (inputs in0, cos, sin, [mask], k_in_i/v_in_i; outputs as named, k_out_i/v_out_i), or a
    rewrite of it over the same weights: the q8 step graph (engine/runtime/step_graph.py StepNet) and the code
    predictor's stacked graph (engine/runtime/stacked_graph.py StackedNet) build on it."""

    def __init__(self, bundle: Bundle, graph: str, threads: int, precision: str, *, param_text: str | None = None,
                 packing: bool = True, max_rows: int = 1, fixed_threads: bool = False):
        """The stored graph, or param_text over its weights (engine/runtime/step_graph.py stacked_attention_param_text: q8
        code predictor, `max_rows` rows per call at one position; fixed_threads for int8 Gemms, whose thread
        count is fixed when the net loads)."""
        text = param_text or bundle.file(f"{graph}.param").read_text(encoding="utf-8")
        layers = sum(1 for line in text.splitlines() if line.startswith("SDPA "))
        if layers == 0:
            raise BundleError(f"Model bundle {bundle.path}: {graph} has no attention layers.")
        # ncnn has no Vulkan Squeeze: on a GPU each one would send its blob to the CPU and back with a queue wait,
        # 28 times per talker step and 80 per code-predictor frame at 0.6B; there rows stay a matrix instead
        self._rows_2d = bundle.device.on_gpu and param_text is None and any(
            line.startswith("Squeeze ") for line in text.splitlines())
        if self._rows_2d:
            param_text = squeeze_free_param_text(text)
        self.net = bundle.net(graph, threads, precision, param_text=param_text, packing=packing)
        self.max_rows = max_rows  # rows (sequences) per decode call: float graphs one, see the module docstring
        self._loaded_threads = threads if fixed_threads else None  # int8 Gemms: their load-time count
        self._team: int | None = None  # fewer threads than loaded for the next calls (engine/runtime/openmp.py)
        self._cache_in = [f"{kv}_in_{i}" for i in range(layers) for kv in ("k", "v")]
        self._cache_out = [f"{kv}_out_{i}" for i in range(layers) for kv in ("k", "v")]
        self._row: InputRow | None = None  # a decode step's input, reused

    def run(self, x: np.ndarray, cos: Input, sin: Input, mask: Input | None, cache: Cache | None,
            outputs: Sequence[str]) -> tuple[list[np.ndarray], Cache]:
        """One call: x is one row (W,) (a decode step) or several (L, W) (a prefill) at RoPE rows cos/sin
        (L, head_dim/2; arrays, or Mats from as_mat() when they are used again); mask (L, past + L; array or Mat) is additive
        (None for a graph without a mask input). Returns the named outputs and the grown cache."""
        vector = self._rows_2d and x.ndim == 1
        if vector:  # one row as a 1-row matrix, its outputs back to vectors (see __init__)
            x = x.reshape(1, -1)
        ex = self.net.create_extractor()
        if self._row is None or self._row.shape != x.shape:  # a new shape: a prefill, or the first step
            self._row = InputRow(x.shape)
        ex.input("in0", self._row.set(x))
        ex.input("cos", cos if isinstance(cos, ncnn.Mat) else as_mat(cos))
        ex.input("sin", sin if isinstance(sin, ncnn.Mat) else as_mat(sin))
        if mask is not None:
            ex.input("mask", mask if isinstance(mask, ncnn.Mat) else as_mat(mask))
        if cache is not None:
            for name, mat in zip(self._cache_in, cache, strict=True):
                ex.input(name, mat)
        with team_limit(self._team):
            outs = [extract(ex, name) for name in outputs]
            grown = extract_raw(ex, self._cache_out)
        if vector:
            outs = [o.reshape(-1) for o in outs]
        return outs, grown


def squeeze_free_param_text(text: str) -> str:
    """The .param with each Squeeze made a Noop (same blobs, no parameters): a one-row input then stays a 1-row
    matrix through the layers, as a prefill's rows do."""
    return layers_param_text([ParamLayer("Noop", layer.name, layer.inputs, layer.outputs)
                              if layer.type == "Squeeze" else layer for layer in parse_param(text)])
