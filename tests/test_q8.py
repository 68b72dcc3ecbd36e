"""q8 bundles: the int8 weight format, its conversion, rows independent of each other, and accuracy against fp32;
bundles of the older 8-bit block format still load and run.

The format is held to engine.runtime.q8's numpy model of what ncnn computes, to fp32 rounding. The accuracy bounds
on the fixture models are derived from the quantisation error of each model's own weights, not from a run of the
network: every Linear on the path is quantised in numpy and applied to random rows, giving its relative output
error e (weights and input rows both rounded to 8 bits); n such layers in sequence with independent rounding move
the logits by about sqrt(n) * e, and the bound allows twice that (the maximum over many logits and positions, and
RMSNorm rescaling). Any position whose fp32 top-1 margin exceeds twice the error bound must keep its top-1 choice.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import engine.convert.talker as talker_convert
from engine.convert.checkpoint import Checkpoint
from engine.convert.talker import Q8_BLOCK, _Builder
from engine.errors import ConvertError
from engine.nets.code_predictor import CodePredictor
from engine.nets.talker import Talker
from engine.runtime import openmp, q8
from engine.runtime.bundle import Bundle
from engine.runtime.ncnn_graph import Graph
from engine.runtime.step_graph import StepNet
from engine.runtime.thread_governor import ThreadGovernor
from tests.bundles import MODELS, bundle_for, convert_parts, fixture_models
from tests.q8_graphs import load_q8_graph, run_graph
from tests.test_talker import CASES, engines, load_case, teacher_forced_run

SYNTH_MODELS = sorted({m for m, _ in CASES})  # the fixture models with teacher-forced synth cases
HALF_STEP = 1.0 / (2 * q8.QMAX)  # half a quantisation step, relative to the absmax the scale came from
FP32_ULP = 2.0**-23


def test_quantize_error_within_half_a_step():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((7, 80)).astype(np.float32) * np.logspace(-4, 1, 80, dtype=np.float32)
    w[2] = 0.0  # an all-zero channel
    q, scale = q8.quantize(w)
    assert q.dtype == np.int8 and q.shape == w.shape and scale.shape == (7,) and scale.dtype == np.float32
    assert int(np.abs(q.astype(np.int32)).max()) == q8.QMAX  # each nonzero channel uses the full range
    back = q.astype(np.float64) * scale[:, None]
    bound = np.abs(w).max(axis=1, keepdims=True) * HALF_STEP * (1 + 1e-6)
    assert np.all(np.abs(back - w) <= bound)
    assert np.all(back[2] == 0)


def test_quantize_refuses_bad_weights():
    with pytest.raises(ConvertError, match="inf or nan"):
        q8.quantize(np.array([[1.0, np.inf]], np.float32))
    with pytest.raises(ConvertError, match="2-D"):
        q8.quantize(np.ones(64, np.float32))
    with pytest.raises(ConvertError, match="block size"):
        q8.block_quantize(np.ones((2, 64), np.float32), 48)


def test_record_layout():
    q = np.arange(-3, 3, dtype=np.int8).reshape(2, 3)
    rec = q8.record(q)
    assert rec[:4] == (q8.INT8_TAG).to_bytes(4, "little")
    assert rec[4:10] == q.tobytes() and rec[10:12] == b"\0\0"  # padded to 4 bytes
    assert np.frombuffer(rec[12:], "<f4").tolist() == [q8.WEIGHT_SCALE] and len(rec) == 16


def _one_linear_net(tmp_path, k: int, n: int, bias: bool, threads: int = 2, fmt: str = "int8"):
    """in0 -> x*1 (a layer before the Linear, as in the real graphs) -> q8 Linear -> out, emitted by the
    converter's own code."""
    rng = np.random.default_rng(k + n)
    w = (rng.standard_normal((n, k)) * rng.uniform(0.01, 1.0, (n, 1))).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32) if bias else None
    g = Graph()
    g.input("in0")
    builder = _Builder(g, None, "q8")
    x = builder.op("BinaryOp", ["in0"], params={0: 2, 1: 1, 2: 1.0})
    old = talker_convert.Q8_FORMAT
    talker_convert.Q8_FORMAT = fmt
    try:
        builder.linear(x, [w], [b], name="out")
    finally:
        talker_convert.Q8_FORMAT = old
    return load_q8_graph(g, tmp_path, threads), w, b


def _run(net, x: np.ndarray) -> np.ndarray:
    return run_graph(net, x, "out")


def _rows(rng, m: int, k: int) -> np.ndarray:
    return (rng.standard_normal((m, k)) * rng.uniform(0.1, 10, (1, k))).astype(np.float32)


# (k, n, bias): odd sizes, a bias (the 1.7B projection has one), a long K (int32 sums above 2^24 round when
# converted to fp32), and n = 5 with 5 rows (a 1-D scale row would broadcast along the rows then)
SHAPES = [(96, 40, False), (80, 33, True), (3072, 64, False), (24, 5, True)]


@pytest.mark.parametrize("k,n,bias", SHAPES)
@pytest.mark.parametrize("rows", [0, 1, 3, 5, 16])  # 0: a 1-D row
def test_int8_linear_matches_numpy_model(tmp_path, k, n, bias, rows):
    net, w, b = _one_linear_net(tmp_path, k, n, bias)
    x = _rows(np.random.default_rng(rows), max(rows, 1), k)
    if rows >= 3:
        x[1] = 0.0  # an all-zero row: ncnn's scale is inf there (0 * inf -> -127), its descale 0
    got = _run(net, x[0] if rows == 0 else x)
    assert got.shape == ((n,) if rows <= 1 else (rows, n))  # one row comes out 1-D (see q8_linear)
    q, scale = q8.quantize(w)
    want = q8.reference_matmul(x, q, scale, b)
    # the same fp32 operations in the same order; allow each of the 3 roundings (sum -> fp32, descale, channel
    # scale) and the bias add to land one ulp apart. A row rounded to int8 differently, a wrong scale or a wrong
    # broadcast moves outputs by about 1/127 of their size, far beyond this.
    xq, descale = q8.quantize_rows(x)
    mag = np.abs(xq @ q.astype(np.int64).T) * descale * scale
    bound = 4 * FP32_ULP * (mag + (np.abs(b) if b is not None else 0))
    assert np.all(np.abs(got.reshape(want.shape) - want) <= bound)


def test_int8_rounds_halves_away_from_zero(tmp_path):
    """Rows whose scaled values fall exactly on .5 (absmax 127: the scale is 1): ncnn rounds them away from zero,
    and so must the model (round-half-even would move these outputs by whole quantisation steps)."""
    k, n = 24, 5
    net, w, b = _one_linear_net(tmp_path, k, n, True)
    halves = np.arange(k - 1, dtype=np.float32) - 11.5
    x = np.stack([np.concatenate([[127.0], halves]), np.concatenate([[-127.0], -halves * 3])]).astype(np.float32)
    got = _run(net, x)
    q, scale = q8.quantize(w)
    want = q8.reference_matmul(x, q, scale, b)
    xq, descale = q8.quantize_rows(x)
    assert np.array_equal(xq[0, 1:], np.trunc(halves + np.copysign(0.5, halves)))  # the model's own rounding
    bound = 4 * FP32_ULP * (np.abs(xq @ q.astype(np.int64).T) * descale * scale + np.abs(b))
    assert np.all(np.abs(got - want) <= bound)


def test_numpy_model_is_not_float_matmul():
    """The model the previous test holds ncnn to is the int8 computation, not a float product (which the bound
    would not admit)."""
    rng = np.random.default_rng(1)
    w = rng.standard_normal((40, 96)).astype(np.float32)
    x = _rows(rng, 3, 96)
    q, scale = q8.quantize(w)
    want = q8.reference_matmul(x, q, scale)
    exact = x.astype(np.float64) @ (q.astype(np.float64) * scale[:, None]).T
    assert np.abs(want - exact).max() > 100 * 4 * FP32_ULP * np.abs(exact).max()


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("k,n,bias", [SHAPES[1], SHAPES[3], (1024, 3072, False)])
def test_int8_linear_rows_independent(tmp_path, k, n, bias, threads):
    """Each row of a 1..8-row call (and of an n-row one) is bit-identical to the row alone at one thread."""
    net, _, _ = _one_linear_net(tmp_path, k, n, bias, threads)
    (tmp_path / "alone").mkdir()
    alone_net, _, _ = _one_linear_net(tmp_path / "alone", k, n, bias, 1)
    x = _rows(np.random.default_rng(3), max(9, n), k)
    alone = [_run(alone_net, x[j:j + 1]).reshape(-1) for j in range(max(8, n))]
    for m in sorted({*range(2, 9), n}):
        got = _run(net, x[:m]).reshape(m, -1)
        for j in range(m):
            assert np.array_equal(got[j], alone[j]), f"row {j} of {m} differs from the row alone"


@pytest.mark.parametrize("rows", [1, 3])
def test_legacy_block_linear_matches_numpy_model(tmp_path, rows):
    """The block format of older bundles (still read): held to its numpy model to fp32 rounding."""
    k, n = 2048, 64
    net, w, _ = _one_linear_net(tmp_path, k, n, False, fmt="block")
    x = _rows(np.random.default_rng(rows), rows, k)
    got = _run(net, x)
    q, scales = q8.block_quantize(w, Q8_BLOCK)
    want = q8.block_reference_matmul(x, q, scales, Q8_BLOCK)
    # int8 block products are exact; the fp32 scaling and the sum over K/block blocks round at 2^-24 each
    mag = np.abs(q8.block_quantize_rows(x, Q8_BLOCK)) @ np.abs(q8.block_dequantize(q, scales, Q8_BLOCK)).T
    bound = (k / Q8_BLOCK + 4) * FP32_ULP * mag + 1e-6
    assert np.all(np.abs(got.reshape(want.shape) - want) <= bound)


def _layer_counts(bundle: Bundle, graph: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for line in (bundle.path / f"{graph}.param").read_text().splitlines()[2:]:
        counts[line.split()[0]] = counts.get(line.split()[0], 0) + 1
        if line.startswith("Gemm "):
            assert q8.quantize_term(line) == q8.INT8_TERM
    return counts


@pytest.mark.parametrize("model", fixture_models())
def test_q8_bundle_stores_every_linear_as_int8(model):
    bundle = Bundle.open(bundle_for(model, "q8", parts=["talker"]))
    meta = bundle.part("talker")
    t, c = meta["talker"], meta["code_predictor"]
    talker = _layer_counts(bundle, meta["talker_graph"])
    cp = _layer_counts(bundle, meta["cp_graph"])
    assert "InnerProduct" not in talker and "InnerProduct" not in cp
    assert talker["Gemm"] == 4 * t["layers"] + 1  # qkv, o, gate+up, down per layer; the codec head
    heads = meta["num_code_groups"] - 1
    projection = int(meta["small_to_mtp_projection"])
    assert cp["Gemm"] == 4 * c["layers"] + heads + projection
    assert talker["MemoryData"] == talker["Gemm"]  # channel scales; no bias in the talker
    assert cp["MemoryData"] == cp["Gemm"] + projection  # the projection's bias
    assert meta["q8_weight_layers"] == talker["Gemm"] + cp["Gemm"]
    assert meta["fp16_weight_layers"] == meta["fp32_weight_layers"] == 0
    assert bundle.table(meta["tables"]["codec"]).dtype == np.float16
    assert bundle.runtime_precision == "fp32"
    assert Talker(bundle, 1).net.max_rows == CodePredictor(bundle, 1).net.max_rows == 8


def _worst_layer_error(model: str, prefix: str, fmt: str = "int8") -> float:
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
            exact = x.astype(np.float64) @ w.astype(np.float64).T
            if fmt == "int8":
                got = q8.reference_matmul(x, *q8.quantize(w))
            else:
                got = q8.block_reference_matmul(x, *q8.block_quantize(w, Q8_BLOCK), Q8_BLOCK)
            worst = max(worst, float(np.abs(got - exact).max() / np.abs(exact).max()))
        return worst
    finally:
        ckpt.close()


def _bound(model: str, prefix: str, layers: int, fmt: str = "int8") -> float:
    return 2 * math.sqrt(layers) * _worst_layer_error(model, prefix, fmt)


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
    seq, hidden, _ = talker.start(case["prefill"])
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
        hidden, _ = talker.step(seq, cp32.feedback(frame))
    print(f"{model} q8 code predictor logits: max err {worst:.2e}, bound {bound:.2e}")
    assert worst <= bound


@pytest.fixture(scope="module")
def legacy_bundle(tmp_path_factory) -> Bundle:
    """A q8 bundle in the block format of bundles converted before the int8 format."""
    model = SYNTH_MODELS[0]
    old = talker_convert.Q8_FORMAT
    talker_convert.Q8_FORMAT = "block"
    try:
        path = convert_parts(MODELS / model, tmp_path_factory.mktemp("legacy") / "q8-block", "q8", ("talker",))
    finally:
        talker_convert.Q8_FORMAT = old
    return Bundle.open(path)


def test_legacy_block_bundle_still_runs(legacy_bundle):
    """Old q8 bundles load, run at most 3 rows per call (their rows stay independent that way: 5 sequences
    stepped together equal each alone) and stay within their own quantisation bound of fp32."""
    model = SYNTH_MODELS[0]
    meta = legacy_bundle.part("talker")
    text = (legacy_bundle.path / f"{meta['talker_graph']}.param").read_text()
    assert f" 18={q8.block_quantize_term(Q8_BLOCK)}" in text and " 18=1 " not in text
    talker = Talker(legacy_bundle, 2, adaptive_threads=False)
    assert talker.net.max_rows == CodePredictor(legacy_bundle, 1).net.max_rows == 3
    case = load_case(model, [n for m, n in CASES if m == model][0])
    talker32 = engines(model)[0]
    _, _, want = talker32.start(case["prefill"])
    _, _, got = talker.start(case["prefill"])
    assert _rel(got, want) <= _bound(model, "talker.", 4 * meta["talker"]["layers"] + 1, "block")
    rng = np.random.default_rng(2)
    prompts = [rng.standard_normal((3 + j, talker.hidden_size)).astype(np.float32) for j in range(5)]
    step = rng.standard_normal((5, talker.hidden_size)).astype(np.float32)
    seqs = [talker.start(p)[0] for p in prompts]
    together = talker.step_many(seqs, step)[1]
    for j, p in enumerate(prompts):
        assert np.array_equal(together[j], talker.step_many([talker.start(p)[0]], step[j:j + 1])[1][0])


@pytest.mark.parametrize("teams", [True, False], ids=["team limits", "no team limits"])
def test_int8_graphs_keep_their_load_time_threads(capfd, monkeypatch, teams):
    """ncnn's int8 Gemm fixes its thread count at load, and changing a net's opt.num_threads afterwards made ncnn
    print a "load-time value" warning per layer and call (and had no effect), so it never changes: the governor's
    count goes to the talker's attention nets and, where OpenMP teams can be limited per thread
    (engine/runtime/openmp.py), to a limit on the Gemms' teams; elsewhere the Gemms keep their load-time count."""
    if not teams:
        monkeypatch.setattr(openmp, "_libgomp", lambda: None)
    elif not openmp.limited():
        pytest.skip("libgomp is not among this process's libraries: OpenMP teams cannot be limited here")
    bundle = Bundle.open(bundle_for(SYNTH_MODELS[0], "q8", parts=["talker"]))
    talker = Talker(bundle, 2, int8_threads=2)
    cp = CodePredictor(bundle, 2, int8_threads=2)
    assert Talker(bundle, 2).net.net.opt.num_threads == StepNet.INT8_THREADS  # the count without a tuning
    rng = np.random.default_rng(0)
    capfd.readouterr()
    for threads in (2, 1, 2, 1):
        # the governors hold `threads`, so every call below sets it
        talker.governor = cp.governor = ThreadGovernor(2, adaptive=False, start=threads)
        seq = talker.start(rng.standard_normal((3, talker.hidden_size)).astype(np.float32))[0]
        hidden, _ = talker.step_many([seq], rng.standard_normal((1, talker.hidden_size)).astype(np.float32))
        cp.predict(hidden[0], 0, lambda logits, group: int(np.argmax(logits)))
        for net in (talker.net, cp.net):
            assert net.net.opt.num_threads == 2
            assert net.weight_threads == (threads if teams else 2)
            assert net.fixed_threads is not teams
        assert all(net.opt.num_threads == threads for net in talker.net._sdpa.values())
    assert "load-time value" not in capfd.readouterr().err


def test_step_graph_tells_the_q8_format_apart():
    from engine.errors import BundleError
    from engine.runtime.step_graph import q8_format

    int8 = "Gemm g1 1 1 a b 2=0 3=1 4=0 5=1 6=0 7=0 8=4 9=8 10=-1 18=1"
    block = "Gemm g2 1 1 b c 2=0 3=1 4=0 5=1 6=0 7=0 8=4 9=8 18=802"
    float_gemm = "Gemm g3 1 1 c d 2=0 3=1 4=0 5=1 6=0 7=0 8=4 9=8"
    assert q8_format("\n".join(["7767517", "1 2", int8]), "x") == "int8"
    assert q8_format("\n".join(["7767517", "1 2", block]), "x") == "block"
    assert q8_format("\n".join(["7767517", "1 2", "InnerProduct ip 1 1 a b 0=4 1=0 2=32"]), "x") is None
    for mixed in ([int8, block], [int8, float_gemm], [float_gemm]):
        with pytest.raises(BundleError, match=r"^The talker network of the model bundle B has Gemm layers this version "
                                              r"cannot run \(float ones, or two 8-bit formats mixed\); convert the "
                                              r"model again\.$"):
            q8_format("\n".join(["7767517", "2 3", *mixed]), "The talker network of the model bundle B")


def test_step_graph_is_for_q8_bundles_only():
    """Float bundles run their stored graph (engine/runtime/sequence_net.py); the step graph refuses them in one sentence."""
    from engine.errors import BundleError
    from engine.runtime.step_graph import StepNet

    bundle = Bundle.open(bundle_for("tiny06b", "fp32", parts=("talker",)))
    graph = bundle.part("talker")["talker_graph"]
    with pytest.raises(BundleError, match=r"has no 8-bit layers; float bundles run their stored graph"):
        StepNet(bundle, graph, 2, "fp32")
