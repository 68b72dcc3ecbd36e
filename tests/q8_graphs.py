"""Small ncnn graphs the converter's own code emits, loaded and run as the engine runs q8 graphs (the tests of the
8-bit Linears, their outlier split and their smoothing share these)."""

from __future__ import annotations

from pathlib import Path

import ncnn
import numpy as np

from engine.runtime.bundle import make_net_options
from engine.runtime.ncnn_graph import Graph


def load_q8_graph(g: Graph, folder: Path, threads: int) -> ncnn.Net:
    """`g` saved in `folder` and loaded as StepNet loads q8 graphs (no packing layout)."""
    g.save(folder / "t.param", folder / "t.bin")
    net = ncnn.Net()
    make_net_options(net, "fp32", threads)
    net.opt.use_packing_layout = False
    assert net.load_param(str(folder / "t.param")) == 0
    assert net.load_model(str(folder / "t.bin")) == 0
    return net


def run_graph(net: ncnn.Net, x: np.ndarray, out: str) -> np.ndarray:
    """Blob `out` with `x` as in0."""
    ex = net.create_extractor()
    ex.input("in0", ncnn.Mat(np.ascontiguousarray(x, dtype=np.float32)).clone())
    ret, mat = ex.extract(out)
    assert ret == 0
    return np.array(mat)
