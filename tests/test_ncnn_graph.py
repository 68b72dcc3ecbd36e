"""The graph writer produces files ncnn loads and runs with the numbers numpy gives."""

import ncnn
import numpy as np
import pytest

from engine.errors import BundleError
from engine.runtime.bundle import make_net_options
from engine.runtime.ncnn_graph import Graph, layers_param_text, parse_param, raw, tagged


def _run(tmp_path, g: Graph, feeds: dict[str, np.ndarray], out: str, precision: str = "fp32") -> np.ndarray:
    g.save(tmp_path / "n.param", tmp_path / "n.bin")
    net = ncnn.Net()
    make_net_options(net, precision, threads=1)
    assert net.load_param(str(tmp_path / "n.param")) == 0
    assert net.load_model(str(tmp_path / "n.bin")) == 0
    ex = net.create_extractor()
    for name, arr in feeds.items():
        ex.input(name, ncnn.Mat(np.ascontiguousarray(arr, dtype=np.float32)).clone())
    ret, mat = ex.extract(out)
    assert ret == 0
    return np.array(mat)


def test_inner_product_with_shared_input_gets_split(tmp_path):
    rng = np.random.default_rng(0)
    w1, b1 = rng.standard_normal((6, 4)).astype(np.float32), rng.standard_normal(6).astype(np.float32)
    w2 = rng.standard_normal((6, 4)).astype(np.float32)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    g = Graph()
    inp = g.input("in0")
    a = g.layer("InnerProduct", [inp], params={0: 6, 1: 1, 2: w1.size}, weights=[tagged(w1), raw(b1)])
    b = g.layer("InnerProduct", [inp], params={0: 6, 1: 0, 2: w2.size}, weights=[tagged(w2)])
    s = g.layer("BinaryOp", [a, b], params={0: 0}, name="out0")
    g.output(a)
    assert "Split" in g.param_text()
    got = _run(tmp_path, g, {"in0": x}, s)
    np.testing.assert_allclose(got, x @ w1.T + b1 + x @ w2.T, rtol=1e-5, atol=1e-5)


def test_fp16_weights_and_float_params(tmp_path):
    rng = np.random.default_rng(1)
    w = rng.standard_normal((5, 8)).astype(np.float32)
    x = rng.standard_normal((2, 8)).astype(np.float32)
    g = Graph()
    inp = g.input("in0")
    y = g.layer("InnerProduct", [inp], params={0: 5, 1: 0, 2: w.size}, weights=[tagged(w, fp16=True)])
    z = g.layer("BinaryOp", [y], params={0: 2, 1: 1, 2: 0.5}, name="out0")  # multiply by scalar 0.5
    got = _run(tmp_path, g, {"in0": x}, z)
    want = x @ w.astype(np.float16).astype(np.float32).T * 0.5
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    assert "2=0.5" in g.param_text()


def test_array_params_format():
    g = Graph()
    inp = g.input("in0")
    g.layer("Reshape", [inp], params={0: 4, 1: -1, 6: [1, 2]})
    assert "-23306=2,1,2" in g.param_text()


def test_param_text_reads_back_as_written():
    """parse_param, the one reader of .param text, gives back what the writer wrote: every layer, its blobs and
    its tokens (arrays included), so writing the parsed layers again gives the same text."""
    g = Graph()
    inp = g.input("in0")
    a = g.layer("Reshape", [inp], params={0: 4, 1: -1, 6: [1, 2]})
    g.layer("BinaryOp", [a, inp], params={0: 2, 1: 1, 2: 0.5}, name="out0")
    text = g.param_text()
    layers = parse_param(text)
    assert [layer.type for layer in layers] == [line.split()[0] for line in text.splitlines()[2:]]
    reshape = next(layer for layer in layers if layer.type == "Reshape")
    assert "-23306=2,1,2" in reshape.tokens and reshape.params == {"0": "4", "1": "-1"}
    assert layers_param_text(layers) == text


@pytest.mark.parametrize("text", ["", "7767518\n0 0\n", "7767517\n1 1\nInput in0 x 1 in0\n"],
                         ids=["empty", "bad magic", "bad layer line"])
def test_param_text_that_is_not_param_is_a_bundle_error(text):
    with pytest.raises(BundleError):
        parse_param(text)
