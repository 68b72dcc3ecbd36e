"""q8 bundles: the 8-bit block weight format, its conversion, and its accuracy against fp32.

The format is checked against engine.convert.q8's numpy model of what ncnn computes (to fp32 rounding). The
accuracy bounds on the fixture models are derived from the quantisation error of each model's own weights, not
from a run of the network: every Linear on the path is quantised in numpy and applied to random rows, giving its
relative output error e (weights and input rows both rounded to 8 bits per block); n such layers in sequence with
independent rounding move the logits by about sqrt(n) * e, and the bound allows twice that (the maximum over many
logits and positions, and RMSNorm rescaling). Any position whose fp32 top-1 margin exceeds twice the error bound
must keep its top-1 choice.
"""

from __future__ import annotations

import math

import ncnn
import numpy as np
import pytest

from engine.bundle import Bundle, make_net_options
from engine.convert import q8
from engine.convert.checkpoint import Checkpoint
from engine.convert.talker import Q8_BLOCK, _Builder
from engine.errors import ConvertError
from engine.ncnn_graph import Graph
from tests.bundles import MODELS, bundle_for, fixture_models
from tests.test_talker import CASES, engines, load_case, teacher_forced_run

SYNTH_MODELS = sorted({m for m, _ in CASES})  # the fixture models with teacher-forced synth cases

STEP = 1.0 / (2 * q8.QMAX)  # half a quantisation step, relative to the block's absmax


def test_quantize_error_within_half_a_step():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((7, 80)).astype(np.float32) * np.logspace(-4, 1, 80, dtype=np.float32)
    w[2, :32] = 0.0  # an all-zero block
    q, scales = q8.quantize(w, 32)
    assert q.dtype == np.int8 and q.shape == w.shape and scales.shape == (7, 3)
    assert int(np.abs(q.astype(np.int32)).max()) <= q8.QMAX
    back = q8.dequantize(q, scales, 32)
    for b in range(3):
        blk = slice(32 * b, min(80, 32 * b + 32))
        bound = np.abs(w[:, blk]).max(axis=1, keepdims=True) * STEP * (1 + 1e-6)
        assert np.all(np.abs(back[:, blk] - w[:, blk]) <= bound)
    assert np.all(back[2, :32] == 0)


def test_quantize_refuses_bad_weights():
    with pytest.raises(ConvertError, match="inf or nan"):
        q8.quantize(np.array([[1.0, np.inf]], np.float32), 32)
    with pytest.raises(ConvertError, match="block size"):
        q8.quantize(np.ones((2, 64), np.float32), 48)
    with pytest.raises(ConvertError, match="2-D"):
        q8.quantize(np.ones(64, np.float32), 32)


def _one_linear_net(tmp_path, k: int, n: int, bias: bool, threads: int = 2):
    """in0 -> x*1 (so ncnn hands the Gemm a packed blob, as in the real graphs) -> q8 Linear -> out."""
    rng = np.random.default_rng(k + n)
    w = (rng.standard_normal((n, k)) * rng.uniform(0.01, 1.0, (n, 1))).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32) if bias else None
    g = Graph()
    g.input("in0")
    builder = _Builder(g, None, "q8")
    x = builder.op("BinaryOp", ["in0"], params={0: 2, 1: 1, 2: 1.0})
    builder.linear(x, [w], [b], name="out")
    g.save(tmp_path / "t.param", tmp_path / "t.bin")
    net = ncnn.Net()
    make_net_options(net, "fp32", threads)
    assert net.load_param(str(tmp_path / "t.param")) == 0
    assert net.load_model(str(tmp_path / "t.bin")) == 0
    q, scales = q8.quantize(w, Q8_BLOCK)
    return net, q, scales, b


@pytest.mark.parametrize("k,n,bias", [(96, 40, False), (80, 33, True), (2048, 64, False)])
@pytest.mark.parametrize("rows", [0, 1, 3, 16])  # 0: a 1-D row (decode step)
def test_gemm_matches_numpy_model(tmp_path, k, n, bias, rows):
    net, q, scales, b = _one_linear_net(tmp_path, k, n, bias)
    rng = np.random.default_rng(rows)
    x = rng.standard_normal((max(rows, 1), k)).astype(np.float32) * rng.uniform(0.1, 10, (1, k)).astype(np.float32)
    x_in = x[0] if rows == 0 else x
    ex = net.create_extractor()
    ex.input("in0", ncnn.Mat(np.ascontiguousarray(x_in)).clone())
    ret, mat = ex.extract("out")
    assert ret == 0
    got = np.array(mat)
    assert got.shape == ((n,) if rows <= 1 else (rows, n))  # one row comes out 1-D (see q8_linear)
    want = q8.reference_matmul(x, q, scales, Q8_BLOCK) + (b if b is not None else 0)
    # int8 block products are exact; the fp32 scaling and the sum over K/block blocks round at 2^-24 each
    scale = np.abs(q8.quantize_rows(x, Q8_BLOCK)) @ np.abs(q8.dequantize(q, scales, Q8_BLOCK)).T.astype(np.float64)
    bound = (k / Q8_BLOCK + 4) * 2.0**-23 * scale + 1e-6
    assert np.all(np.abs(got.reshape(want.shape) - want) <= bound)


def _gemm_count(bundle: Bundle, graph: str) -> tuple[int, int]:
    text = (bundle.path / f"{graph}.param").read_text().splitlines()
    gemms = [line for line in text if line.startswith("Gemm ")]
    assert all(f" 18={q8.quantize_term(Q8_BLOCK)}" in line for line in gemms)
    return len(gemms), sum(line.startswith("InnerProduct ") for line in text)


@pytest.mark.parametrize("model", fixture_models())
def test_q8_bundle_stores_every_linear_as_8bit(model):
    bundle = Bundle.open(bundle_for(model, "q8", parts=["talker"]))
    meta = bundle.part("talker")
    t, c = meta["talker"], meta["code_predictor"]
    talker_gemms, talker_ip = _gemm_count(bundle, meta["talker_graph"])
    cp_gemms, cp_ip = _gemm_count(bundle, meta["cp_graph"])
    assert talker_ip == cp_ip == 0
    assert talker_gemms == 4 * t["layers"] + 1  # qkv, o, gate+up, down per layer; the codec head
    heads = meta["num_code_groups"] - 1
    assert cp_gemms == 4 * c["layers"] + heads + int(meta["small_to_mtp_projection"])
    assert meta["q8_weight_layers"] == talker_gemms + cp_gemms
    assert meta["fp16_weight_layers"] == meta["fp32_weight_layers"] == 0
    assert bundle.table(meta["tables"]["codec"]).dtype == np.float16
    assert bundle.runtime_precision == "fp32"


def _worst_layer_error(model: str, prefix: str) -> float:
    """Largest relative output error of one q8 Linear among the checkpoint's weights under `prefix`."""
    rng = np.random.default_rng(0)
    ckpt = Checkpoint.open(MODELS / model)
    try:
        worst = 0.0
        for name in ckpt.main.keys():
            if not (name.startswith(prefix) and name.endswith(".weight")):
                continue
            w = ckpt.main.get(name)
            if w.ndim != 2 or "embedding" in name or "text_projection" in name:  # not q8 (tables)
                continue
            x = rng.standard_normal((8, w.shape[1])).astype(np.float32)
            q, scales = q8.quantize(w, Q8_BLOCK)
            exact = x.astype(np.float64) @ w.astype(np.float64).T
            err = np.abs(q8.reference_matmul(x, q, scales, Q8_BLOCK) - exact).max() / np.abs(exact).max()
            worst = max(worst, float(err))
        return worst
    finally:
        ckpt.close()


def _bound(model: str, prefix: str, layers: int) -> float:
    return 2 * math.sqrt(layers) * _worst_layer_error(model, prefix)


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a - b)) / max(1.0, float(np.max(np.abs(b)))))


def _keeps_confident_choices(got: np.ndarray, want: np.ndarray, err: float) -> None:
    top2 = np.sort(want)[-2:]
    if top2[1] - top2[0] > 2 * err * max(1.0, float(np.max(np.abs(want)))):
        assert int(np.argmax(got)) == int(np.argmax(want))


@pytest.mark.parametrize("model", SYNTH_MODELS)
def test_q8_talker_logits_within_quantisation_bound(model):
    cases = [n for m, n in CASES if m == model]
    case = load_case(model, cases[0])
    r32 = teacher_forced_run(model, case)
    r8 = teacher_forced_run(model, case, "q8")
    meta = engines(model, "q8")[2].part("talker")
    bound = _bound(model, "talker.", 4 * meta["talker"]["layers"] + 1)
    errs = [_rel(a, b) for a, b in zip(r8["raw_logits"], r32["raw_logits"], strict=True)]
    print(f"{model} q8 talker logits: max err {max(errs):.2e}, bound {bound:.2e}")
    assert max(errs) <= bound
    for a, b in zip(r8["raw_logits"], r32["raw_logits"], strict=True):
        _keeps_confident_choices(a, b, bound)


@pytest.mark.parametrize("model", SYNTH_MODELS)
def test_q8_code_predictor_logits_within_quantisation_bound(model):
    cases = [n for m, n in CASES if m == model]
    case = load_case(model, cases[0])
    talker, cp32, _ = engines(model)
    _, cp8, bundle8 = engines(model, "q8")
    meta = bundle8.part("talker")
    layers = 4 * meta["code_predictor"]["layers"] + 1 + int(meta["small_to_mtp_projection"])
    bound = _bound(model, "talker.code_predictor.", layers)
    hidden, _ = talker.prefill(case["prefill"])
    worst = 0.0
    for frame in case["codes"][:4].astype(np.int64):
        seen: dict[str, list[np.ndarray]] = {"fp32": [], "q8": []}
        for label, cp in (("fp32", cp32), ("q8", cp8)):
            def forced(logits, g, out=seen[label], frame=frame):
                out.append(logits.copy())
                return int(frame[g])
            cp.predict(hidden, int(frame[0]), forced)
        for a, b in zip(seen["q8"], seen["fp32"], strict=True):
            worst = max(worst, _rel(a, b))
            _keeps_confident_choices(a, b, bound)
        hidden, _ = talker.step(cp32.feedback(frame))
    print(f"{model} q8 code predictor logits: max err {worst:.2e}, bound {bound:.2e}")
    assert worst <= bound
