"""Talker + code predictor on ncnn against the official implementation.

References: tests/fixtures/outputs/<model>/synth_*.npz made by tests/reference/make_fixtures.py with the official
qwen-tts greedy generate (prefill rows, trailing text rows, raw first-step logits, generated codes). The official
talker logit processors are re-implemented here in a few lines (the engine's sampler is tested on its own).
"""

from __future__ import annotations

import numpy as np
import pytest

from engine.convert.checkpoint import Checkpoint
from engine.errors import EngineError
from engine.nets.code_predictor import CodePredictor
from engine.nets.talker import Talker, TalkerSequence
from engine.runtime.bundle import Bundle
from tests.bundles import MODELS, OUTPUTS, bundle_for, fixture_models

THREADS = 1  # shared machine; results do not depend on the thread count
PART = ["talker"]
TOL = 1e-4  # fp32 parity: max abs error relative to max(1, |reference|)


def _cases() -> list[tuple[str, str]]:
    return [(m, f.name) for m in fixture_models() for f in sorted((OUTPUTS / m).glob("synth_*.npz"))]


CASES = _cases()
_engines: dict[tuple[str, str, bool], tuple[Talker, CodePredictor, Bundle]] = {}


def engines(model: str, precision: str = "fp32", compact: bool = True) -> tuple[Talker, CodePredictor, Bundle]:
    """compact=False widens fp16-stored weights of an fp32 bundle to fp32 at load (the non-x86 path)."""
    key = (model, precision, compact)
    if key not in _engines:
        bundle = Bundle.open(bundle_for(model, precision, parts=PART))
        _engines[key] = (Talker(bundle, THREADS, compact_weights=compact),
                         CodePredictor(bundle, THREADS, compact_weights=compact), bundle)
    return _engines[key]


def load_case(model: str, name: str) -> dict[str, np.ndarray]:
    with np.load(OUTPUTS / model / name) as z:
        return {k: z[k] for k in z.files}


def rel_err(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.max(np.abs(got - want)) / max(1.0, float(np.max(np.abs(want)))))


def tts_pad_row(model: str) -> np.ndarray:
    """T(tts_pad) = text_projection(text_embedding[tts_pad_token_id]), in numpy from the checkpoint weights."""
    ckpt = Checkpoint.open(MODELS / model)
    try:
        get = ckpt.main.get
        e = get("talker.model.text_embedding.weight")[ckpt.config["tts_pad_token_id"]]
        h = e @ get("talker.text_projection.linear_fc1.weight").T + get("talker.text_projection.linear_fc1.bias")
        h = h / (np.float32(1) + np.exp(-h))  # SiLU
        out = h @ get("talker.text_projection.linear_fc2.weight").T + get("talker.text_projection.linear_fc2.bias")
        return out.astype(np.float32)
    finally:
        ckpt.close()


def official_processors(logits: np.ndarray, history: list[int], step: int, *, eos: int, vocab: int,
                        penalty: float) -> np.ndarray:
    """HF generate's processors for the talker: repetition penalty on code-0 history, min_new_tokens=2 (EOS masked
    for the first two steps), suppress_tokens = the top 1024 ids except EOS."""
    x = logits.astype(np.float32).copy()
    if history and penalty != 1.0:
        idx = np.unique(np.asarray(history, dtype=np.int64))
        v = x[idx]
        x[idx] = np.where(v < 0, v * np.float32(penalty), v / np.float32(penalty))
    if step < 2:
        x[eos] = -np.inf
    sup = np.arange(vocab - 1024, vocab)
    x[sup[sup != eos]] = -np.inf
    return x


def argmax_choose(logits: np.ndarray, _group: int) -> int:
    return int(np.argmax(logits))  # first index on ties, like torch.argmax


def teacher_forced_run(model: str, case: dict[str, np.ndarray], precision: str = "fp32",
                       compact: bool = True) -> dict:
    """Greedy decoding fed with the recorded frames (a mismatch cannot cascade). Returns per-frame results."""
    talker, cp, bundle = engines(model, precision, compact)
    cfg = bundle.config["talker_config"]
    eos, vocab = int(cfg["codec_eos_token_id"]), int(cfg["vocab_size"])
    penalty = float(bundle.generation_config.get("repetition_penalty", 1.05))
    codes = case["codes"].astype(np.int64)
    trailing = case["trailing"].astype(np.float32)
    tpad = tts_pad_row(model)
    max_new = int(case["max_new_tokens"])

    seq, hidden, logits = talker.start(case["prefill"])
    raw_logits = [logits]
    history: list[int] = []
    got = np.full_like(codes, -1)
    end_token = None
    for k in range(len(codes) + 1):
        c0 = int(np.argmax(official_processors(logits, history, k, eos=eos, vocab=vocab, penalty=penalty)))
        if k == len(codes):
            end_token = c0
            break
        got[k, 0] = c0
        history.append(int(codes[k, 0]))
        got[k, 1:] = cp.predict(hidden, int(codes[k, 0]), argmax_choose)
        text = trailing[k] if k < len(trailing) else tpad
        hidden, logits = talker.step(seq, cp.feedback(codes[k]) + text)
        raw_logits.append(logits)
    return dict(codes=got, end_token=end_token, eos=eos, max_new=max_new, raw_logits=raw_logits)


def test_fixtures_present():
    assert CASES, "no synth fixtures: run tests/reference/make_fixtures.py"
    assert len({m for m, _ in CASES}) >= 3, "synth fixtures for every fixture model are expected"


@pytest.mark.parametrize("model,name", CASES)
def test_first_step_logits(model, name):
    case = load_case(model, name)
    talker, _, _ = engines(model)
    _, _, logits = talker.start(case["prefill"])
    err = rel_err(logits, case["logits"][0])
    print(f"{model}/{name}: first-step logits max err {err:.2e} (relative to scale)")
    assert err <= TOL


@pytest.mark.parametrize("compact", [True, False], ids=["compact", "wide"])
@pytest.mark.parametrize("model,name", CASES)
def test_greedy_codes_match_official(model, name, compact):
    case = load_case(model, name)
    r = teacher_forced_run(model, case, compact=compact)
    want = case["codes"]
    for k, ref in enumerate(case["logits"]):  # later recorded steps (teacher-forced inputs are the official ones)
        if k < len(r["raw_logits"]):
            assert rel_err(r["raw_logits"][k], ref) <= TOL, f"logits of step {k}"
    bad = np.argwhere(r["codes"] != want)
    assert not len(bad), f"{len(bad)} of {want.size} codes differ; first at (frame, group) {tuple(bad[0])}"
    if "sampled" in case:  # every sampled code 0, including the final EOS / the dropped one at the cap
        assert r["end_token"] == int(case["sampled"][-1])
    ended_by = str(case["ended_by"])
    if ended_by == "eos":
        assert r["end_token"] == r["eos"], "the official run stopped on EOS after the last frame"
    else:
        assert ended_by == "cap" and len(want) == r["max_new"] - 1
        assert r["end_token"] != r["eos"]


def test_tts_pad_row_matches_non_streaming_trailing():
    """Non-streaming prompts carry trailing = [T(tts_pad)]: checks the numpy T(tts_pad) used above."""
    found = False
    for model, name in CASES:
        case = load_case(model, name)
        if bool(case.get("non_streaming", False)) and len(case["trailing"]) == 1:
            assert rel_err(tts_pad_row(model), case["trailing"][0]) <= 1e-5
            found = True
    assert found, "no non-streaming synth fixture (a one-row trailing case) among the committed fixtures"


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_fast_precisions_close(precision):
    """fp16/bf16 bundles run the same graphs; their logits stay near fp32 (reported, loosely bounded)."""
    assert CASES, "no synth fixtures among the committed fixtures"
    for model in sorted({m for m, _ in CASES}):
        name = next(n for m, n in CASES if m == model)
        case = load_case(model, name)
        r32 = teacher_forced_run(model, case)
        r = teacher_forced_run(model, case, precision)
        errs = [rel_err(a, b) for a, b in zip(r["raw_logits"], r32["raw_logits"], strict=True)]
        agree = float(np.mean(r["codes"] == r32["codes"]))
        print(f"{model} {precision}: talker logits max err {max(errs):.2e} vs fp32, codes agree {agree:.3f}")
        assert max(errs) < 0.1


def test_kv_cache_steps_equal_one_prefill():
    """start(a) + step(b_i) gives the same last logits as start(a ++ b); each sequence keeps its own cache."""
    model = fixture_models()[0]
    talker, _, _ = engines(model)
    rng = np.random.default_rng(3)
    rows = rng.standard_normal((9, talker.hidden_size)).astype(np.float32)
    seq, _, _ = talker.start(rows[:5])
    for r in rows[5:]:
        h1, l1 = talker.step(seq, r)
    whole, h2, l2 = talker.start(rows)
    assert seq.position == 9 and whole.position == 9
    assert rel_err(l1, l2) <= TOL and rel_err(h1, h2) <= TOL
    one, _, l3 = talker.start(rows[:1])  # a one-row prefill starts at position 0
    assert one.position == 1 and np.isfinite(l3).all()


def test_feedback_and_frame_rows_agree():
    model = fixture_models()[0]
    talker, cp, _ = engines(model)
    rng = np.random.default_rng(4)
    codes = rng.integers(0, cp.codebook_size, (6, cp.groups))
    rows = cp.frame_rows(codes)
    assert rows.shape == (6, cp.hidden_size) and rows.dtype == np.float32
    for t in range(6):
        np.testing.assert_array_equal(cp.feedback(codes[t]), rows[t])
    want = talker.codec_rows(codes[:, 0]).astype(np.float64)
    tables = engines(model)[2].table("cp_codec_embedding")
    for g in range(1, cp.groups):
        want += tables[g - 1][codes[:, g]]
    np.testing.assert_allclose(rows, want, rtol=1e-5, atol=1e-5)


def test_bad_input_raises_engine_error():
    model = fixture_models()[0]
    talker, cp, _ = engines(model)
    with pytest.raises(EngineError):
        talker.start(np.zeros((3, talker.hidden_size + 1), np.float32))
    with pytest.raises(EngineError, match="before prefill"):
        talker.step(TalkerSequence(), np.zeros(talker.hidden_size, np.float32))
    seq, _, _ = talker.start(np.zeros((3, talker.hidden_size), np.float32))
    with pytest.raises(EngineError):
        talker.step(seq, np.zeros(talker.hidden_size + 1, np.float32))
    with pytest.raises(EngineError):
        talker.codec_rows([10**6])
    with pytest.raises(EngineError):
        cp.frame_rows(np.zeros((2, 5), np.int64))
    with pytest.raises(EngineError):
        cp.feedback([0] + [cp.codebook_size] * (cp.groups - 1))
    with pytest.raises(EngineError):
        cp.predict(np.zeros(cp.hidden_size, np.float32), 0, lambda lg, g: cp.codebook_size)


def test_fp32_bundle_of_bf16_checkpoint_keeps_exact_weights(tmp_path):
    """bf16 checkpoints (the real form) get fp16-stored weights in an fp32 bundle: lossless, so the compact run
    equals the run with the weights widened to fp32 at load."""
    from tests.bundles import convert_parts
    from tools.random_checkpoint import write_random_checkpoint

    ckpt = write_random_checkpoint(tmp_path / "ckpt", "demo", seed=1, dtype="bf16")
    bundle = Bundle.open(convert_parts(ckpt, tmp_path / "bundle", "fp32", ("talker",)))
    meta = bundle.part("talker")
    assert meta["fp16_weight_layers"] > 0 and meta["fp32_weight_layers"] == 0
    rng = np.random.default_rng(5)
    results = []
    for compact in (True, False):
        talker = Talker(bundle, THREADS, compact_weights=compact)
        cp = CodePredictor(bundle, THREADS, compact_weights=compact)
        rows = rng.standard_normal((7, talker.hidden_size)).astype(np.float32) if not results else results[0][0]
        seq, h, lg = talker.start(rows[:5])
        outs = [lg]
        for r in rows[5:]:
            h, lg = talker.step(seq, r)
            outs.append(lg)
        cp_logits: list[np.ndarray] = []
        cp.predict(h, 3, lambda x, g, _o=cp_logits: (_o.append(x), int(np.argmax(x)))[1])
        results.append((rows, outs, cp_logits))
    (_, a, ca), (_, b, cb) = results
    assert max(rel_err(x, y) for x, y in zip(a, b, strict=True)) <= 1e-5
    assert max(rel_err(x, y) for x, y in zip(ca, cb, strict=True)) <= 1e-5


@pytest.mark.parametrize("model,precision", [(m, "fp32") for m in fixture_models()] + [(fixture_models()[0], "q8")])
def test_the_talker_part_is_one_typed_record_and_the_manifests_read_back_byte_identical(model, precision):
    """TalkerPart: the talker part of each fixture bundle reads into the typed record and writes back to the same
    JSON bytes (so bundles converted before it open the same); a wrong-typed or missing value is one BundleError line,
    and a bundle made before the counts and the 8-bit check's lists were recorded reads with them empty."""
    import json

    from engine.errors import BundleError
    from engine.nets.talker import talker_part
    from engine.runtime.bundle import _Part
    from engine.runtime.manifest_parts import TalkerPart

    bundle = Bundle.open(bundle_for(model, precision))
    stored = bundle.manifest["parts"]["talker"]
    part = talker_part(bundle)
    assert json.dumps(part.to_manifest()) == json.dumps(stored)
    assert part.talker.hidden == stored["talker"]["hidden"] and part.cp_codec_table == stored["tables"]["cp_codec"]
    old = {k: v for k, v in stored.items() if k not in ("fp16_weight_layers", "fp32_weight_layers", "q8_weight_layers",
                                                         "outlier_smoothing", "promoted_layers", "promoted_fp32_layers")}
    legacy = TalkerPart.from_manifest(old)
    assert legacy.promoted_layers == () and legacy.fp16_weight_layers == 0 and legacy.outlier_smoothing is None
    for key, bad, says in [("num_code_groups", "16", "'num_code_groups' is not a whole number"),
                           ("vocab_size", 0, "'vocab_size' is 0, not a positive count"),
                           ("talker", [1], "'talker' is not a table of values"),
                           ("promoted_layers", [3], "'promoted_layers' is not a list of names"),
                           ("small_to_mtp_projection", "yes", "'small_to_mtp_projection' is not true or false")]:
        with pytest.raises(BundleError, match=says) as caught:
            TalkerPart.from_manifest({**stored, key: bad})
        assert "\n" not in str(caught.value)
    with pytest.raises(BundleError, match="'rope_theta' is not a number") as caught:
        TalkerPart.from_manifest({**stored, "code_predictor": {**stored["code_predictor"], "rope_theta": None}})
    assert "its code predictor" in str(caught.value) and "\n" not in str(caught.value)
    wrapped = _Part.wrap({k: v for k, v in stored.items() if k != "cp_graph"}, "where")
    with pytest.raises(BundleError, match="'cp_graph'") as caught:
        TalkerPart.from_manifest(wrapped)
    assert "\n" not in str(caught.value)


def test_one_stack_shape_serves_the_converter_the_manifest_and_the_numpy_forward():
    """A decoder stack's shape is declared once (manifest_parts.StackShape): the converter reads it from the config
    (stack_shape), the manifest records it and the numpy forward of the smoothing and the 8-bit check runs on it;
    a config the graphs cannot run is one ConvertError line."""
    from engine.convert.stack_forward import CODE_PREDICTOR, StackForward, stack_shape
    from engine.errors import ConvertError
    from engine.nets.talker import talker_part

    model = fixture_models()[0]
    ckpt = Checkpoint.open(MODELS / model)
    cfg = ckpt.talker_config
    part = talker_part(Bundle.open(bundle_for(model, "fp32", parts=PART)))
    assert stack_shape(cfg, "talker") == part.talker
    shape = stack_shape(cfg["code_predictor_config"], "code predictor")
    assert shape == part.code_predictor
    forward = StackForward(ckpt.main.get, lambda n: n in ckpt.main, CODE_PREDICTOR, shape, 3)
    assert forward.cos.shape == (3, shape.head_dim // 2)
    ckpt.close()
    for change, says in [({"head_dim": 7}, "head_dim 7 is odd"), ({"num_key_value_heads": 3}, "not a multiple of 3"),
                         ({"num_attention_heads": 0}, "size below 1"),
                         ({"num_hidden_layers": "two"}, "missing or has a bad value"),
                         ({"hidden_act": "gelu"}, "activation 'gelu'")]:
        with pytest.raises(ConvertError, match=says) as caught:
            stack_shape({**cfg, **change}, "talker")
        assert "\n" not in str(caught.value)
