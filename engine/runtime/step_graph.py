"""The row-stacked step graph of q8 bundles: a talker or code-predictor .param rewritten at load time so that one
extractor call runs any number of rows (several sequences, or a prompt) through every weight layer at once. Float
bundles run their stored graph instead, one sequence per call (engine/runtime/sequence_net.py; engine/nets/talker.py
decode_net chooses).

Batching must not change any result, so a row's numbers may not depend on the other rows of its call:
- every Linear of a q8 bundle is ncnn's int8 Gemm (engine/runtime/q8.py): it rounds each input row to int8 on its
  own and sums the int8 products exactly, so rows are independent whatever the row count, tiles and threads. The
  8-bit block Gemm of older q8 bundles rounds rows in its 4-row blocks differently from rows handled one at a time
  (measured: rows 0-3 of a 4..15-row call differ from the same rows alone at full size, rows of a 1..3-row call
  never do), so those take at most 3 rows per call;
- rows stay a matrix (Squeeze becomes Noop) and the packed layout is off, so the layers between the Gemms see one
  row at a time;
- attention stays in the graph with its mask and KV-cache inputs. One sequence's call (run(): a prefill or a
  decode step) runs it there, over that sequence's cache. A call of several sequences cuts it: the caller extracts
  each layer's q, k, v, runs each sequence's attention over its own cache in a separate one-layer SDPA net
  (`sdpa_param_text`, same parameters, so caches pass between the two ways) and feeds the result in as the
  attention layer's output blob, which ncnn then takes as computed: the in-graph attention layer never runs.

The code predictor of a q8 bundle stacks its rows as attention heads instead (engine/runtime/stacked_graph.py): all
its rows are at one position, so they attend in one SDPA per layer.

The weights in the .bin are untouched and shared: only weight-free layers change, so one loaded net serves every
row count, and bundles need no re-conversion.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import ncnn
import numpy as np

from ..errors import BundleError
from . import q8
from .bundle import Bundle, make_net_options
from .device import gpu_load
from .ncnn_graph import ParamLayer, layers_param_text, parse_param
from .ncnn_mats import as_mat, extract, extract_mat, extract_raw
from .openmp import team_limit
from .sequence_net import SequenceNet


@dataclass(frozen=True)
class AttentionSite:
    """One attention layer of a step graph: extract q, k, v and feed `out` to run it outside the graph."""

    layer: int
    q: str
    k: str
    v: str
    out: str
    params: tuple[str, ...]  # the SDPA layer's k=v tokens (mask flag, scale, kv-cache mode)


def step_param_text(param_text: str) -> tuple[str, list[AttentionSite]]:
    """Rewrite a talker / code-predictor .param (see the module docstring). Returns the new text and the
    attention sites in layer order."""
    side_blobs: set[str] = set()  # the mask and the caches, and their Split copies: read by attention alone
    out: list[ParamLayer] = []
    sites: list[AttentionSite] = []
    for line in parse_param(param_text):
        if line.type == "Input" and (line.name == "mask" or line.name.startswith(("k_in_", "v_in_"))):
            side_blobs.update(line.outputs)
        elif line.type == "Split" and line.inputs[0] in side_blobs:
            side_blobs.update(line.outputs)
        elif line.type == "SDPA":
            if len(line.inputs) not in (5, 6) or len(line.outputs) != 3:
                raise BundleError(f"attention layer {line.name} has no KV-cache inputs and outputs")
            q, k, v = line.inputs[:3]
            sites.append(AttentionSite(len(sites), q, k, v, line.outputs[0], line.tokens))
        else:
            if line.type == "Squeeze":  # rows stay a matrix: a 1-row vector would take the GEMV kernel
                line = ParamLayer("Noop", line.name, line.inputs, line.outputs)
            if any(b in side_blobs for b in line.inputs):
                raise BundleError(f"layer {line.name} reads a mask or cache blob outside attention")
        out.append(line)
    if not sites:
        raise BundleError("the graph has no attention layers to batch")
    return layers_param_text(out), sites


def sdpa_param_text(params: tuple[str, ...]) -> str:
    """A one-layer net running an attention layer (its k=v tokens `params`) outside its graph, with its KV cache:
    inputs q, k, v, (mask,) k_in, v_in; outputs att, k_out, v_out."""
    masked = dict(tok.split("=", 1) for tok in params).get("5", "0") == "1"
    names = ["q", "k", "v"] + (["mask"] if masked else []) + ["k_in", "v_in"]
    layers = [ParamLayer("Input", n, (), (n,)) for n in names]
    layers.append(ParamLayer("SDPA", "sdpa", tuple(names), ("att", "k_out", "v_out"), params))
    return layers_param_text(layers)


Attend = Callable[[AttentionSite, np.ndarray, np.ndarray, np.ndarray], np.ndarray]


class StepNet(SequenceNet):
    """A loaded step graph plus one SDPA net per distinct attention layout.

    run() is one sequence's call as on any SequenceNet (a prefill with its causal mask, or a decode step), the
    attention inside the graph over the sequence's cache. run_rows() takes R rows of several sequences and hands
    each attention site's q, k, v ((heads, R, head_dim) float32) to `attend`, which returns the attention output in
    the same layout (attention() runs one sequence's in an SDPA net). Callers pass at most `max_rows` rows per call
    (the module docstring says why older q8 bundles take fewer)."""

    Q8_MAX_ROWS = {"int8": 8, "block": 3}  # int8: the largest batch (engine/types.py MAX_BATCH_SIZE)
    # ncnn's int8 Gemm fixes its thread count when the net loads (a later opt.num_threads only prints a warning
    # per layer per call). Where teams can be limited per thread (libgomp, engine/runtime/openmp.py) int8 graphs
    # load at every core and the governor runs them on fewer; elsewhere they load at the count measured for this
    # computer (engine/synthesis/self_tuning.py) and only their attention nets follow the governor. This is the
    # count before a tuning exists there; neither count is right everywhere: full-size 0.6B q8, 2 cores, one
    # frame took 93 ms on one thread against 161 on two on an AMD EPYC with sleeping OpenMP threads, while on an
    # Intel Xeon (Sapphire Rapids class) generation took 191-224 ms/frame on one against 145-148 on two. One
    # thread is kept as the untuned default because it also suffers least when other programs hold the cores.
    INT8_THREADS = 1

    def __init__(self, bundle: Bundle, graph: str, threads: int, precision: str, int8_threads: int | None = None):
        """int8_threads: the thread count int8 Gemms are loaded with (default INT8_THREADS; the self-tuner
        measures it per machine)."""
        text = bundle.file(f"{graph}.param").read_text(encoding="utf-8")
        step_text, self.sites = step_param_text(text)
        what = f"The {graph} network of the model bundle {bundle.path}"
        weight_format = q8_format(step_text, what)
        if weight_format is None:
            raise BundleError(f"{what} has no 8-bit layers; float bundles run their stored graph (SequenceNet).")
        int8 = weight_format == "int8"
        super().__init__(bundle, graph, (int8_threads or self.INT8_THREADS) if int8 else threads, precision,
                         param_text=step_text, packing=False, max_rows=self.Q8_MAX_ROWS[weight_format],
                         fixed_threads=int8)
        self._sdpa = {params: sdpa_net(bundle, graph, params, threads) for params in {s.params for s in self.sites}}

    def set_threads(self, threads: int) -> None:
        """Thread count of the next calls (engine/runtime/thread_governor.py picks it) for the weight layers
        (WeightThreads; the 8-bit block Gemm of older bundles reads it at every call, with identical results at 1
        and 2 threads) and the attention nets."""
        super().set_threads(threads)
        for net in self._sdpa.values():
            net.opt.num_threads = threads

    def run_rows(self, rows: np.ndarray, cos: np.ndarray, sin: np.ndarray, attend: Attend,
                 outputs: Sequence[str]) -> list[np.ndarray]:
        """Rows (R, width) of several sequences at RoPE rows cos/sin (R, head_dim/2) -> each output blob's first R
        rows. The attention output fed in as the attention layer's output blob stands for that layer: ncnn never
        runs it. (One sequence's call, run(), runs it inside the graph over the sequence's cache: full-size 0.6B q8
        talker step, 2 threads, AMD EPYC, 16.2 ms against 18.3 this way; docs/performance.md "Talker attention
        inside the step graph".)"""
        r = rows.shape[0]
        ex = self.net.create_extractor()
        ex.input("in0", as_mat(rows))
        ex.input("cos", as_mat(cos))
        ex.input("sin", as_mat(sin))
        with team_limit(self._team):
            for site in self.sites:
                q, k, v = (extract(ex, b) for b in (site.q, site.k, site.v))
                ex.input(site.out, as_mat(attend(site, q, k, v)))
            return [extract(ex, name).reshape(r, -1) for name in outputs]

    def attention(self, site: AttentionSite, q: np.ndarray, k: np.ndarray, v: np.ndarray,
                  mask: np.ndarray | None, cache: tuple[ncnn.Mat, ncnn.Mat] | None
                  ) -> tuple[np.ndarray, tuple[ncnn.Mat, ncnn.Mat]]:
        """One sequence's attention (heads, rows, head_dim) over its cache of this layer (None: empty); returns the
        output and the grown cache (opaque Mats, to be fed back unchanged)."""
        att, grown = attend_once(self._sdpa[site.params], as_mat(q), as_mat(k), as_mat(v),
                                 None if mask is None else as_mat(mask), cache)
        return np.array(att, dtype=np.float32), grown


def sdpa_net(bundle: Bundle, graph: str, params: tuple[str, ...], threads: int, packing: bool = True) -> ncnn.Net:
    """A loaded one-layer SDPA net (sdpa_param_text) with the attention parameters `params`, on the bundle's
    device, fp32."""
    net = ncnn.Net()
    make_net_options(net, "fp32", threads, bundle.device)
    net.opt.use_packing_layout = packing
    text = sdpa_param_text(params)
    with gpu_load(bundle.device, f"{graph} attention"):
        if net.load_param_mem(text) != 0 or net.load_model(ncnn.DataReaderFromEmpty()) != 0:
            raise BundleError(f"model bundle {bundle.path}: the attention net for {graph} failed to load")
    return net


_KV_OUT = ["k_out", "v_out"]


def attend_once(sdpa: ncnn.Net, q: ncnn.Mat, k: ncnn.Mat, v: ncnn.Mat, mask: ncnn.Mat | None,
                cache: tuple[ncnn.Mat, ncnn.Mat] | None) -> tuple[ncnn.Mat, tuple[ncnn.Mat, ncnn.Mat]]:
    """One call of a one-layer SDPA net (sdpa_param_text): the attention output and the grown cache."""
    ex = sdpa.create_extractor()
    ex.input("q", q)
    ex.input("k", k)
    ex.input("v", v)
    if mask is not None:
        ex.input("mask", mask)
    if cache is not None:
        ex.input("k_in", cache[0])
        ex.input("v_in", cache[1])
    att = extract_mat(ex, "att")
    k_out, v_out = extract_raw(ex, _KV_OUT)
    return att, (k_out, v_out)


def q8_format(step_text: str, what: str) -> str | None:
    """"int8" or "block" for a graph of q8 Gemms (q8.py), None for a float graph. The fp32 Gemms that pick a split
    Linear's outlier columns (q8.is_outlier_pick) hold no weights of their own and are not counted."""
    formats = {q8.format_of_term(q8.quantize_term(line)) for line in step_text.splitlines()
               if line.startswith("Gemm ") and not q8.is_outlier_pick(line)}
    if None in formats or len(formats) > 1:
        raise BundleError(f"{what} has Gemm layers this version cannot run (float ones, or two 8-bit formats "
                          "mixed); convert the model again.")
    return formats.pop() if formats else None
