"""Outlier channels split off q8 Linears (engine/convert/q8_split.py): the ncnn layers compute what
engine.runtime.q8's numpy model of the decomposition computes, rows stay independent, the channels are found from
the calibration maxima, and the manifest records them (a damaged record refused: tests/faults)."""

from __future__ import annotations

import numpy as np
import pytest

from engine.convert import convert_checkpoint, q8_split, smooth
from engine.convert.checkpoint import Checkpoint
from engine.convert.talker import _Builder
from engine.runtime import q8
from engine.runtime.bundle import Bundle
from engine.runtime.ncnn_graph import Graph
from tests.bundles import MODELS
from tests.q8_graphs import load_q8_graph, run_graph
from tools.outlier_checkpoint import Stress, write_stress_checkpoint

FP32_ULP = 2.0**-23
MODEL = "tiny06b"


def _split_net(tmp_path, k: int, n: int, bias: bool, channels: tuple[int, ...], threads: int = 2, heads: int = 1):
    """in0 -> x*1 -> `heads` split q8 Linears reading it (out0, out1, ...), emitted by the converter's own code."""
    rng = np.random.default_rng(k + n + len(channels))
    ws = [(rng.standard_normal((n, k)) * rng.uniform(0.01, 1.0, (n, 1))).astype(np.float32) for _ in range(heads)]
    b = rng.standard_normal(n).astype(np.float32) if bias else None
    g = Graph()
    g.input("in0")
    builder = _Builder(g, None, "q8")
    x = builder.op("BinaryOp", ["in0"], params={0: 2, 1: 1, 2: 1.0})
    for i, w in enumerate(ws):
        builder.q8_linear(x, w, [b], [w], f"out{i}", channels)
    return load_q8_graph(g, tmp_path, threads), ws, b


def _run(net, x: np.ndarray, out: str = "out0") -> np.ndarray:
    return run_graph(net, x, out)


def _outlier_rows(rng, m: int, k: int, channels: tuple[int, ...], factor: float = 100.0) -> np.ndarray:
    x = rng.standard_normal((m, k)).astype(np.float32)
    x[:, list(channels)] *= factor
    return x


def _bound(x, w, b, channels):
    """Each of the int8 part's roundings (sum -> fp32, descale, channel scale), the bias add, the c-term fp32
    product (any summation order, of weights divided by the channel scale) and its add may land one ulp apart
    each."""
    rest, outlier_w = q8.split_weights(w, channels)
    q, scale = q8.quantize(rest)
    masked = x.copy()
    masked[:, list(channels)] = 0
    xq, descale = q8.quantize_rows(masked)
    mag = np.abs(xq @ q.astype(np.int64).T) * descale * scale + (np.abs(b) if b is not None else 0)
    outlier = np.abs(x[:, list(channels)]) @ np.abs(outlier_w).T
    return 6 * FP32_ULP * (mag + (len(channels) + 1) * outlier)


# (k, n, bias, channels): one channel, channels at both ends and side by side (a Slice takes no empty piece), a
# long K, n = 5 with 5 rows (the broadcast of a 1-row constant)
SHAPES = [(96, 40, False, (3,)), (80, 33, True, (0, 1, 17, 79)), (3072, 64, False, (5, 100, 2000, 2001, 3071)),
          (24, 5, True, (7, 8, 9, 10, 11, 12, 13, 23))]


@pytest.mark.parametrize("k,n,bias,channels", SHAPES)
@pytest.mark.parametrize("rows", [0, 1, 3, 5])  # 0: a 1-D row
def test_split_linear_matches_numpy_model(tmp_path, k, n, bias, channels, rows):
    net, (w,), b = _split_net(tmp_path, k, n, bias, channels)
    x = _outlier_rows(np.random.default_rng(rows), max(rows, 1), k, channels)
    got = _run(net, x[0] if rows == 0 else x)
    assert got.shape == ((n,) if rows <= 1 else (rows, n))
    rest, outlier_w = q8.split_weights(w, channels)
    want = q8.split_reference_matmul(x, *q8.quantize(rest), b, channels, outlier_w)
    assert np.all(np.abs(got.reshape(want.shape) - want) <= _bound(x, w, b, channels))


def test_the_split_is_what_makes_outlier_rows_accurate(tmp_path):
    """The model the previous test holds ncnn to is the decomposition, not the plain int8 product: on rows with
    100x channels the plain product's error is many times the split one's."""
    k, n, channels = 256, 64, (10, 77, 200)
    net, (w,), b = _split_net(tmp_path, k, n, True, channels)
    x = _outlier_rows(np.random.default_rng(5), 4, k, channels)
    exact = x.astype(np.float64) @ w.astype(np.float64).T + b
    split = _run(net, x) - exact
    plain = q8.reference_matmul(x, *q8.quantize(w), b) - exact
    assert np.sqrt(np.mean(plain**2)) > 10 * np.sqrt(np.mean(split**2))


@pytest.mark.parametrize("threads", [1, 2])
def test_split_linear_rows_independent(tmp_path, threads):
    """Each row of a 2..8-row call is bit-identical to the row alone at one thread (StepNet batches rows)."""
    k, n, channels = 80, 33, (0, 1, 17, 79)
    net, _, _ = _split_net(tmp_path, k, n, True, channels, threads)
    (tmp_path / "alone").mkdir()
    alone_net, _, _ = _split_net(tmp_path / "alone", k, n, True, channels, 1)
    x = _outlier_rows(np.random.default_rng(3), 8, k, channels)
    alone = [_run(alone_net, x[j:j + 1]).reshape(-1) for j in range(8)]
    for m in range(2, 9):
        got = _run(net, x[:m]).reshape(m, -1)
        for j in range(m):
            assert np.array_equal(got[j], alone[j]), f"row {j} of {m} differs from the row alone"


def test_linears_reading_one_input_share_its_selection(tmp_path):
    net, ws, b = _split_net(tmp_path, 64, 16, False, (2, 40), heads=3)
    text = (tmp_path / "t.param").read_text()
    gemms = [line for line in text.splitlines() if line.startswith("Gemm ")]
    assert sum(" 18=1" in line for line in gemms) == 3 and len(gemms) == 4  # three 8-bit, one selection
    assert text.count("InnerProduct ") == 3
    x = _outlier_rows(np.random.default_rng(0), 2, 64, (2, 40))
    for i, w in enumerate(ws):
        rest, outlier_w = q8.split_weights(w, (2, 40))
        want = q8.split_reference_matmul(x, *q8.quantize(rest), None, (2, 40), outlier_w)
        assert np.all(np.abs(_run(net, x, f"out{i}") - want) <= _bound(x, w, None, (2, 40)))


# ------------------------------------------------------------------------------------------- which channels


def test_outliers_are_channels_far_above_the_median():
    maxima = np.ones(64)
    maxima[[5, 9, 60]] = [30.0, 4.0, 3.9]
    assert q8_split.outliers(maxima) == (5, 9)
    maxima[:20] = 50.0  # more than MAX_SPLIT: the largest ones
    assert len(q8_split.outliers(maxima)) == q8_split.MAX_SPLIT
    assert q8_split.outliers(np.zeros(8)) == ()


def _stats(path):
    ckpt = Checkpoint.open(path)
    try:
        return smooth.calibrate(ckpt), int(ckpt.talker_config.get("num_code_groups", 16))
    finally:
        ckpt.close()


def test_the_plain_fixture_has_no_outlier_channels():
    assert q8_split.outlier_channels(*_stats(MODELS / MODEL)) == {}


def test_stress_channels_are_found_in_every_linear(tmp_path):
    stress = Stress("channels", 10)
    ckpt = write_stress_checkpoint(MODELS / MODEL, tmp_path / "ckpt", stress)
    found = q8_split.outlier_channels(*_stats(ckpt))
    cfg = Checkpoint.open(MODELS / MODEL).talker_config
    hidden = np.random.default_rng([stress.seed, 0]).choice(int(cfg["hidden_size"]), stress.channels, replace=False)
    for layer in range(int(cfg["num_hidden_layers"])):
        for site in ("qkv", "gate_up"):  # the RMSNorm outputs: the same channels in every layer
            assert set(found[f"talker.{layer}.{site}"]) >= set(int(c) for c in hidden)
        assert f"talker.{layer}.o" in found and f"talker.{layer}.down" in found
    assert "talker.head" not in found  # the final norm is not stressed


def test_a_split_bundle_records_its_channels_and_a_plain_one_none(tmp_path):
    split = {"talker.0.qkv": [3, 1], "code_predictor.1.down": [0, 127]}
    dest = convert_checkpoint(MODELS / MODEL, tmp_path / "b", "q8", parts=["talker"], check=False, split=split)
    part = Bundle.open(dest).part("talker")
    assert part["split_channels"] == {"talker.0.qkv": [1, 3], "code_predictor.1.down": [0, 127]}
    plain = convert_checkpoint(MODELS / MODEL, tmp_path / "p", "q8", parts=["talker"], check=False)
    assert "split_channels" not in Bundle.open(plain).part("talker")


def test_splitting_a_linear_that_is_not_there_is_refused(tmp_path):
    from engine.errors import ConvertError

    with pytest.raises(ConvertError, match="talker.9.qkv"):
        convert_checkpoint(MODELS / MODEL, tmp_path / "b", "q8", parts=["talker"], check=False,
                           split={"talker.9.qkv": [1]})


# ------------------------------------------------------------------------------------------- folded channels


def _talker_and_code_predictor_outputs(bundle_dir):
    """Hidden states and logits of a prefill and two steps, and the code predictor's logits for each frame."""
    from engine.nets.code_predictor import CodePredictor
    from engine.nets.talker import Talker

    bundle = Bundle.open(bundle_dir)
    talker, cp = Talker(bundle, 2, adaptive_threads=False), CodePredictor(bundle, 2, adaptive_threads=False)
    rows = np.random.default_rng(7).standard_normal((6, talker.hidden_size)).astype(np.float32)
    seq, hidden, logits = talker.start(rows[:4])
    out = [hidden, logits]
    def choose(logits, group):
        out.append(np.array(logits))
        return int(np.argmax(logits))

    for row in rows[4:]:
        hidden, logits = talker.step(seq, row)
        out += [hidden, logits]
        cp.predict(hidden, 3, choose)
    return out


def test_folded_channels_compute_bit_for_bit_what_the_mask_computes(tmp_path, monkeypatch):
    """Split Linears whose outlier channels arrive folded (the RMSNorms' weights, the v and up outputs' scale rows
    scaled by FOLD; q8_split.py) give exactly what the masked ones give: the talker's prefill and steps and the code
    predictor's logits, every Linear of both nets' layer 0 split and the talker's head too (a head keeps its mask).
    And the folded bundle runs no mask for them."""
    from engine.convert.talker import _Builder

    ckpt = write_stress_checkpoint(MODELS / MODEL, tmp_path / "ckpt", Stress("channels", 30))
    cfg = Checkpoint.open(MODELS / MODEL).talker_config
    heads, kv, hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    group = heads // kv
    o = tuple(sorted((v // hd * group + h) * hd + v % hd for v in (1, 40) for h in range(group)))
    assert q8_split.value_channels(o, heads, kv, hd) == (1, 40)
    split = {f"{net}.0.{site}": ch for net in ("talker", "code_predictor")
             for site, ch in (("qkv", (3, 17)), ("o", o), ("gate_up", (5,)), ("down", (4, 9, 100)))}
    split["talker.head"] = (2, 6)
    folded = convert_checkpoint(ckpt, tmp_path / "folded", "q8", parts=["talker"], check=False, split=split)
    monkeypatch.setattr(_Builder, "folds", lambda self, layer, s: q8_split.LayerFolds())
    masked = convert_checkpoint(ckpt, tmp_path / "masked", "q8", parts=["talker"], check=False, split=split)
    monkeypatch.undo()
    for got, want in zip(_talker_and_code_predictor_outputs(folded), _talker_and_code_predictor_outputs(masked),
                         strict=True):
        assert np.array_equal(got, want)
    for graph in ("talker.param", "code_predictor.param"):
        binary_ops = [(tmp_path / b / graph).read_text().count("BinaryOp ") for b in ("folded", "masked")]
        assert binary_ops[1] - binary_ops[0] == 4  # one mask less for each of layer 0's four split Linears


def test_attention_output_channels_fold_only_whole_value_channels():
    """v channel (g, d) reaches output channel (h, d) of every head h of group g: a set of output channels folds
    only when it is every output channel of its v channels."""
    heads, kv, hd = 4, 2, 8
    assert q8_split.value_channels((3, 11), heads, kv, hd) == (3,)  # heads 0 and 1 share v head 0
    assert q8_split.value_channels((3,), heads, kv, hd) is None  # head 1's (1, 3) would be scaled too
    assert q8_split.value_channels((19, 27, 3, 11), heads, kv, hd) == (3, 11)
    assert q8_split.value_channels((), heads, kv, hd) is None


def test_a_split_bundle_batches_rows_as_it_runs_them_alone(tmp_path):
    """Side-by-side requests share each step: with folded and masked splits, picks and C inputs in the graphs,
    every row of a 2..MAX_BATCH_SIZE-row talker step and code-predictor frame is bit-identical to the row alone."""
    from engine.nets.code_predictor import CodePredictor
    from engine.nets.talker import Talker
    from engine.types import MAX_BATCH_SIZE

    ckpt = write_stress_checkpoint(MODELS / MODEL, tmp_path / "ckpt", Stress("channels", 30))
    found = q8_split.outlier_channels(*_stats(ckpt))
    assert any(name.endswith(".o") for name in found) and "talker.head" not in found
    found["talker.head"] = (2, 6)  # a head's split keeps its mask
    bundle = Bundle.open(convert_checkpoint(ckpt, tmp_path / "b", "q8", parts=["talker"], check=False, split=found))
    talker, cp = Talker(bundle, 2, adaptive_threads=False), CodePredictor(bundle, 2, adaptive_threads=False)
    rng = np.random.default_rng(3)
    n, h = MAX_BATCH_SIZE, talker.hidden_size
    prompts = [rng.standard_normal((4, h)).astype(np.float32) for _ in range(n)]
    steps = rng.standard_normal((n, 2, h)).astype(np.float32)

    def run(ids):
        seqs = [talker.start(prompts[j])[0] for j in ids]
        out = [[] for _ in ids]
        for s in range(steps.shape[1]):
            hid, logits = talker.step_many(seqs, steps[ids, s])
            logs: list[list[np.ndarray]] = [[] for _ in ids]
            chooses = [lambda lg, g, k=k, logs=logs: (logs[k].append(np.array(lg)), int(np.argmax(lg)))[1]
                       for k in range(len(ids))]
            codes = cp.predict_many(hid, [int(np.argmax(lg[:cp.codebook_size])) for lg in logits], chooses)
            for k in range(len(ids)):
                out[k] += [hid[k], logits[k], codes[k], *logs[k]]
        return out

    alone = [run([j])[0] for j in range(n)]
    for r in range(2, n + 1):
        for j, got in enumerate(run(list(range(r)))):
            assert all(np.array_equal(a, b) for a, b in zip(got, alone[j], strict=True)), f"row {j} of {r}"
