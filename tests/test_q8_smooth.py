"""Outlier stress checkpoints (tools/outlier_checkpoint.py) and the outlier smoothing of q8 bundles
(engine/convert/smooth.py).

Both move power-of-two factors between a producer of activations and the Linears reading them, which is exact in
floating point: the numpy forward pass of the talker and code predictor gives bit-identical outputs, and converted
fp32 bundles give the same greedy codes with logits that differ only where the converter stores a scaled weight
below fp16's normal range (fp32 bundles store lossless weights as fp16; such values move by at most 2^-25, so the
logits move by ~1e-5 relative at most, measured; a stress that changes the function moves them by more than 1e-2).
"""

from __future__ import annotations

import numpy as np
import pytest

from engine.convert import convert_checkpoint, smooth
from engine.convert.checkpoint import Checkpoint
from engine.nets.code_predictor import CodePredictor
from engine.nets.talker import Talker
from engine.runtime.bundle import Bundle
from tests.bundles import MODELS, fixture_models
from tools.outlier_checkpoint import Stress, write_stress_checkpoint

FRAMES = 12
ROUNDING = 1e-4  # relative logit difference allowed between two fp32 bundles of the same function (see above)


def greedy(bundle_dir, frames: int = FRAMES) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Greedy codes, talker logits and code-predictor logits of the stand-in prompt of benchmarks/talker_speed.py."""
    bundle = Bundle.open(bundle_dir)
    talker, cp = Talker(bundle, 1), CodePredictor(bundle, 1)
    cb = cp.codebook_size
    seq, hidden, logits = talker.start(talker.codec_rows(np.arange(12) + cb) * 0.5)
    pad = talker.codec_rows([cb + 100])[0] * 0.5
    codes, t_logits, c_logits = [], [], []
    for _ in range(frames):
        t_logits.append(logits[:cb].copy())
        c0 = int(np.argmax(logits[:cb]))

        def choose(lg, g, out=c_logits):
            out.append(lg.copy())
            return int(np.argmax(lg))

        frame = np.concatenate([[c0], cp.predict(hidden, c0, choose)]).astype(np.int64)
        codes.append(frame)
        hidden, logits = talker.step(seq, cp.feedback(frame) + pad)
    return np.stack(codes), np.stack(t_logits), np.stack(c_logits)


def rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a - b)) / max(1.0, float(np.max(np.abs(b)))))


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("smooth")


def _stressed(work, model: str, stress: Stress):
    dest = work / f"{model}-{stress.label}"
    if not dest.exists():
        write_stress_checkpoint(MODELS / model, dest, stress)
    return dest


def _bundle(work, ckpt_dir, label: str, precision: str, smooth_on: bool):
    dest = work / f"{ckpt_dir.name}-{label}"
    if not dest.exists():
        convert_checkpoint(ckpt_dir, dest, precision, parts=["talker"], smooth=smooth_on, check=False)
    return dest


def test_preserving_stress_is_bit_exact_in_numpy(work):
    """The numpy fp32 forward of the stressed checkpoint equals the original bit for bit at every layer output
    (the final norm outputs: same maxima), while the Linear inputs now carry 32x channels."""
    model = "tiny06b"
    plain, stressed = Checkpoint.open(MODELS / model), Checkpoint.open(_stressed(work, model, Stress("preserve", 32)))
    try:
        a, b = smooth.calibrate(plain), smooth.calibrate(stressed)
    finally:
        plain.close()
        stressed.close()
    for stack in (smooth.TALKER, smooth.CODE_PREDICTOR):
        assert np.array_equal(a[(stack, -1, "final")], b[(stack, -1, "final")])
        ratio = b[(stack, 0, "attn_in")] / a[(stack, 0, "attn_in")]
        assert sorted(np.round(ratio, 6).tolist())[-4:] == [32.0] * 4  # four channels, exactly 32x
        assert np.count_nonzero(ratio != 1) == 4


@pytest.mark.parametrize("model", fixture_models())
def test_preserving_stress_keeps_fp32_codes(work, model):
    codes, t_log, c_log = greedy(_bundle(work, MODELS / model, "fp32", "fp32", False))
    s_codes, s_t, s_c = greedy(_bundle(work, _stressed(work, model, Stress("preserve", 32)), "fp32", "fp32", False))
    assert np.array_equal(s_codes, codes)
    assert rel(s_t, t_log) <= ROUNDING and rel(s_c, c_log) <= ROUNDING
    # the check can fail: the same channels scaled without compensation change the logits far beyond rounding
    _, n_t, n_c = greedy(_bundle(work, _stressed(work, model, Stress("channels", 32)), "fp32", "fp32", False))
    assert max(rel(n_t, t_log), rel(n_c, c_log)) > 100 * ROUNDING


@pytest.mark.parametrize("model", fixture_models())
def test_smoothing_is_exact_in_fp32(work, model):
    """A smoothed fp32 bundle gives the plain one's greedy codes, on the plain and on the 32x stress checkpoint
    (where smoothing moves many channels)."""
    for ckpt_dir in (MODELS / model, _stressed(work, model, Stress("preserve", 32))):
        plain = greedy(_bundle(work, ckpt_dir, "fp32", "fp32", False))
        smoothed_dir = _bundle(work, ckpt_dir, "fp32-smooth", "fp32", True)
        info = Bundle.open(smoothed_dir).part("talker")["outlier_smoothing"]
        if ckpt_dir != MODELS / model:
            assert info["channels_moved"] >= 4 * 4 * info["layers"]  # at least the stressed channels moved
        got = greedy(smoothed_dir)
        assert np.array_equal(got[0], plain[0])
        assert rel(got[1], plain[1]) <= ROUNDING and rel(got[2], plain[2]) <= ROUNDING


def test_smoothed_weights_compute_the_same_function_bit_for_bit(work):
    """In the numpy fp32 forward, the residual stream after every layer of both stacks is bit-identical with and
    without smoothing, while the smoothed Linear inputs are flatter (the 32x channels divided out)."""
    model = "tiny17b"  # talker wider than the code predictor: the projection path
    ckpt = Checkpoint.open(_stressed(work, model, Stress("preserve", 32)))
    try:
        smoothed_ckpt, info = smooth.smoothed(ckpt)
        assert info["channels_moved"] >= 4 * 4 * ckpt.talker_config["num_hidden_layers"]
        a, b = smooth.calibrate(ckpt), smooth.calibrate(smoothed_ckpt)
    finally:
        ckpt.close()
    residual = [key for key in a if key[2] == "residual"]
    assert len(residual) == sum(cfg["num_hidden_layers"] for cfg in (ckpt.talker_config,
                                                                     ckpt.talker_config["code_predictor_config"]))
    for key in residual:
        assert np.array_equal(a[key], b[key])
    for stack in (smooth.TALKER, smooth.CODE_PREDICTOR):
        site = a[(stack, 0, "attn_in")], b[(stack, 0, "attn_in")]
        spread = [float(x.max() / np.median(x)) for x in site]
        assert spread[1] < spread[0] / 4


def test_q8_smoothing_recovers_the_stress_checkpoint(work):
    """On the 32x stress checkpoint q8 without smoothing loses accuracy; with it, it is as close to fp32 as on the
    plain checkpoint (teacher-forced talker logits: within 1.5x of the plain q8 error)."""
    model = "tiny06b"
    plain_dir, stressed_dir = MODELS / model, _stressed(work, model, Stress("preserve", 32))
    ref = greedy(_bundle(work, plain_dir, "fp32", "fp32", False))
    plain_q8 = greedy(_bundle(work, plain_dir, "q8", "q8", True))
    raw = greedy(_bundle(work, stressed_dir, "q8raw", "q8", False))
    smoothed_q8 = greedy(_bundle(work, stressed_dir, "q8", "q8", True))
    err_plain, err_raw, err_smooth = (rel(r[1][:1], ref[1][:1]) for r in (plain_q8, raw, smoothed_q8))
    print(f"prefill logits vs fp32: q8 plain {err_plain:.2e}, stress raw {err_raw:.2e}, stress smoothed "
          f"{err_smooth:.2e}")
    assert err_raw > 3 * err_plain
    assert err_smooth <= 1.5 * err_plain


def test_old_q8_bundles_run_and_the_store_offers_converting_them_again(work, tmp_path):
    """A q8 bundle without smoothing (the format before it) loads and runs; the store's listing carries a
    one-line note for it, not for a new q8 bundle or a float one."""
    import shutil

    from engine.store import ModelStore

    old_dir = _bundle(work, MODELS / "tiny06b", "q8raw", "q8", False)
    old = Bundle.open(old_dir)
    assert old.part("talker")["outlier_smoothing"] is None and "q8_format" not in old.manifest
    codes, _, _ = greedy(old_dir, 2)
    assert codes.shape == (2, 16)
    new_dir = work / "tiny06b-q8checked"  # as converted today: smoothed, then the 8-bit check
    if not new_dir.exists():
        convert_checkpoint(MODELS / "tiny06b", new_dir, "q8", parts=["talker"])
    assert Bundle.open(new_dir).part("talker")["outlier_smoothing"]["method"] == "smoothquant-pow2"
    for name, src in (("old", old_dir), ("new", new_dir), ("float", _bundle(work, MODELS / "tiny06b", "fp32",
                                                                                "fp32", False))):
        shutil.copytree(src, tmp_path / name)
    notes = {m.name: m.note for m in ModelStore(tmp_path).installed()}
    assert notes["new"] == notes["float"] == ""
    assert notes["old"].startswith("8-bit bundle from before outlier smoothing") and "convert" in notes["old"]


def test_stress_refuses_inexact_preserving_factor():
    from engine.errors import EngineError

    with pytest.raises(EngineError, match="power of two"):
        Stress("preserve", 30)
    with pytest.raises(EngineError, match="unknown stress mode"):
        Stress("shift", 2)


def test_smoothed_q8_linear_holds_ncnn_to_the_numpy_model(work, tmp_path):
    """A smoothed Linear (the stress fixture's first q/k, weights as the converter stores them) run by ncnn on
    activations with the measured channel magnitudes (32x outliers, divided by the smoothing factors) equals
    engine.runtime.q8's numpy model to fp32 rounding, as tests/test_q8.py holds every q8 Linear; and in that model
    the smoothed layer's error against the float product is a fraction of the unsmoothed one's."""
    from engine.convert.talker import _Builder
    from engine.runtime import q8
    from engine.runtime.ncnn_graph import Graph
    from tests.q8_graphs import load_q8_graph, run_graph

    ckpt = Checkpoint.open(_stressed(work, "tiny06b", Stress("preserve", 32)))
    try:
        smoothed_ckpt, _ = smooth.smoothed(ckpt)
        site = smooth.calibrate(ckpt)[(smooth.TALKER, 0, "attn_in")]
        p = "talker.model.layers.0."
        s = ckpt.main.get(p + "input_layernorm.weight") / smoothed_ckpt.main.get(p + "input_layernorm.weight")
        names = [f"{p}self_attn.{n}_proj.weight" for n in "qk"]  # (v_proj's rows also carry o_proj's factors)
        w_plain = np.concatenate([ckpt.main.get(n) for n in names])
        w_smooth = np.concatenate([smoothed_ckpt.main.get(n) for n in names])
    finally:
        ckpt.close()
    assert set(np.log2(s).tolist()) - {0.0} and np.all(np.log2(s) == np.round(np.log2(s)))  # powers of two moved
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((6, site.size)) * site / 3).astype(np.float32)
    x_smooth = (x / s).astype(np.float32)
    g = Graph()
    g.input("in0")
    builder = _Builder(g, None, "q8")
    builder.linear(builder.op("BinaryOp", ["in0"], params={0: 2, 1: 1, 2: 1.0}), [w_smooth], name="out")
    got = run_graph(load_q8_graph(g, tmp_path, 1), x_smooth, "out")
    q, scale = q8.quantize(w_smooth)
    want = q8.reference_matmul(x_smooth, q, scale)
    xq, descale = q8.quantize_rows(x_smooth)
    bound = 4 * 2.0**-23 * np.abs(xq @ q.astype(np.int64).T) * descale * scale
    assert np.all(np.abs(got.reshape(want.shape) - want) <= bound)
    exact = x.astype(np.float64) @ w_plain.astype(np.float64).T
    err_smooth = np.abs(want - exact).max()
    err_plain = np.abs(q8.reference_matmul(x, *q8.quantize(w_plain)) - exact).max()
    print(f"q/k outputs, max error: smoothed {err_smooth:.3g}, unsmoothed {err_plain:.3g}")
    assert err_smooth < err_plain / 4
