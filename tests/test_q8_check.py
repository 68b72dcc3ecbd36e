"""The 8-bit check (engine/convert/q8_check.py, q8_layers.py, q8_recheck.py): a q8 bundle measured against the
float model on the weights it was made from, the Linears over the bound kept float, a float bundle when 8-bit cannot
get within it, the figures in the manifest (engine/runtime/q8_check_record.py), and bundles made before it offered
a check. Errors are injected into one Linear's 8-bit weights (every other Linear as converted), or come from the
outlier stress checkpoints of tools/outlier_checkpoint.py on the tiny fixtures.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from engine import Bundle, CheckRecordError, Q8CheckRecord, read_check_record
from engine.convert import convert_checkpoint, q8_check, q8_split, smooth
from engine.convert.checkpoint import Checkpoint
from engine.convert.q8_layers import expand
from engine.runtime import q8
from engine.store import ModelStore
from qwen3tts_cli.main import main as cli_main
from tests.bundles import MODELS
from tools.outlier_checkpoint import Stress, write_stress_checkpoint

MODEL = "tiny06b"
INJECTED = "talker.1.down"  # the Linear whose 8-bit weights the injection spoils
INJECTED_TENSOR = "talker.model.layers.1.mlp.down_proj.weight"


@pytest.fixture
def spoiled_int8(monkeypatch):
    """q8.quantize gives the injected Linear's weights (as the converter and the per-layer measurement both see
    them: smoothed) a coarse error: every int8 value rounded to a multiple of `step`."""

    def inject(step: int) -> None:
        ckpt = Checkpoint.open(MODELS / MODEL)
        try:
            target = smooth.smoothed(ckpt, smooth.ALPHA)[0].main.get(INJECTED_TENSOR)
        finally:
            ckpt.close()
        real = q8.quantize

        def quantize(w):
            q, scale = real(w)
            if w.shape == target.shape and np.array_equal(w, target):
                q = (np.round(q.astype(np.int32) / step) * step).clip(-127, 127).astype(np.int8)
            return q, scale

        monkeypatch.setattr(q8, "quantize", quantize)

    return inject


def record_of(path) -> Q8CheckRecord:
    record = read_check_record(Bundle.open(path).manifest)
    assert record is not None
    return record


def graph_layers(bundle: Bundle, graph: str) -> list[str]:
    return [ln.split()[0] for ln in bundle.file(f"{graph}.param").read_text().splitlines()[2:]]


def test_a_layer_over_the_bound_is_kept_fp32(tmp_path, spoiled_int8):
    spoiled_int8(48)
    dest = convert_checkpoint(MODELS / MODEL, tmp_path / "b", "q8", parts=["talker"])
    record = record_of(dest)
    assert record.talker.kl_unchecked > record.bound  # the injection put the talker over the bound
    assert record.outcome == "q8" and record.within
    assert record.promoted[0].name == INJECTED  # the largest error alone, and it is kept float
    assert all(p.kl_alone < record.promoted[0].kl_alone / 4 for p in record.promoted[1:])
    bundle = Bundle.open(dest)
    meta = bundle.part("talker")
    assert INJECTED in meta["promoted_layers"]
    assert graph_layers(bundle, meta["talker_graph"]).count("InnerProduct") == sum(
        p.name.startswith("talker.") for p in record.promoted)
    per_weight = 3 if INJECTED in meta["promoted_fp32_layers"] else 1  # fp32 or fp16 storage instead of int8
    assert record.promoted[0].extra_bytes_per_frame == per_weight * int(np.prod(
        Checkpoint.open(MODELS / MODEL).main.shape(INJECTED_TENSOR)))


def test_fp16_storage_leaves_a_q8_graph_as_it_is(tmp_path, monkeypatch):
    """Float Linears of a q8 bundle are fp16-stored where lossless and the nets then load with fp16 storage:
    on a q8 graph without them that changes no bit of the logits."""
    from engine.nets import code_predictor, talker
    from tests.test_q8_smooth import greedy

    dest = convert_checkpoint(MODELS / MODEL, tmp_path / "b", "q8", parts=["talker"], check=False)
    runs = {}
    for precision in ("fp32", "fp16"):
        monkeypatch.setattr(talker, "net_precision", lambda *a, p=precision, **k: p)
        monkeypatch.setattr(code_predictor, "net_precision", lambda *a, p=precision, **k: p)
        runs[precision] = greedy(dest, 4)
    for a, b in zip(runs["fp32"], runs["fp16"], strict=True):
        assert np.array_equal(a, b)


def test_float_linears_of_a_q8_bundle_are_fp16_where_lossless(tmp_path):
    from engine.nets.talker import X86, net_precision, talker_part

    ckpt = write_stress_checkpoint(MODELS / MODEL, tmp_path / "ckpt", Stress("preserve", 2))  # bf16 weights
    dest = convert_checkpoint(ckpt, tmp_path / "b", "q8", parts=["talker"], check=False,
                              promote=["talker.0.o", "code_predictor.head.0"])
    bundle = Bundle.open(dest)
    meta = bundle.part("talker")
    assert sorted(meta["promoted_layers"]) == ["code_predictor.head.0", "talker.0.o"]
    assert meta["promoted_fp32_layers"] == [] and meta["fp16_weight_layers"] == 2
    assert net_precision(bundle, talker_part(bundle)) == ("fp16" if X86 else "fp32")


def test_the_record_holds_what_the_bundle_it_ships_measures(tmp_path, spoiled_int8):
    """Measured again from scratch (fp32 bundle, the same prompts), the finished bundle gives the recorded
    figures: the talker part measured is the one in the bundle."""
    spoiled_int8(48)
    dest = convert_checkpoint(MODELS / MODEL, tmp_path / "q8", "q8", parts=["talker"])
    ref_dir = convert_checkpoint(MODELS / MODEL, tmp_path / "fp32", "fp32", parts=["talker"])
    ckpt = Checkpoint.open(MODELS / MODEL)
    try:
        _, prompts, pad = q8_check.calibration_prompts(ckpt)
    finally:
        ckpt.close()
    ref = q8_check.run_prompts(ref_dir, prompts, pad, q8_check.FRAMES, None, 1, lambda: None)
    got = q8_check.run_prompts(dest, prompts, pad, q8_check.FRAMES, ref, 1, lambda: None)
    figures = q8_check.compare(ref, got)
    record = record_of(dest)
    for net, acc in (("talker", record.talker), ("code_predictor", record.code_predictor)):
        assert figures[net][0] == pytest.approx(acc.kl, rel=1e-6)
        assert figures[net][1] == pytest.approx(acc.top1)
    assert record.languages == tuple(q8_check.PROMPTS) and record.seconds > 0


def test_a_bundle_that_cannot_get_within_the_bound_falls_back_to_float(tmp_path, monkeypatch):
    monkeypatch.setattr(q8_check, "BOUND", 1e-9)  # no 8-bit bundle gets there
    lines = []
    dest = convert_checkpoint(MODELS / MODEL, tmp_path / "b", "q8", parts=["talker"],
                              progress=lambda f, m: lines.append(m))
    bundle = Bundle.open(dest)
    record = record_of(dest)
    assert bundle.precision == "fp32" and record.outcome == "float" and not record.promoted
    assert record.reason and "\n" not in record.reason and record.summary().startswith("float: ")
    meta = bundle.part("talker")
    assert meta["q8_weight_layers"] == 0 and "Gemm" not in graph_layers(bundle, meta["talker_graph"])
    assert any(m.startswith("8-bit check") for m in lines)


def test_rounds_run_out_into_a_float_bundle_with_the_reason(tmp_path, monkeypatch, spoiled_int8):
    spoiled_int8(48)
    monkeypatch.setattr(q8_check, "MAX_ROUNDS", 0)
    record = record_of(convert_checkpoint(MODELS / MODEL, tmp_path / "b", "q8", parts=["talker"]))
    assert record.outcome == "float" and "still over the bound" in record.reason and record.rounds == 1


@pytest.mark.parametrize("stress", [Stress("preserve", 32), Stress("channels", 30), Stress("massive", 100)],
                         ids=lambda s: s.label)
def test_stress_checkpoints_end_within_the_bound_or_float(stress, tmp_path):
    ckpt = write_stress_checkpoint(MODELS / MODEL, tmp_path / "ckpt", stress)
    dest = convert_checkpoint(ckpt, tmp_path / "b", "q8", parts=["talker"])
    record = record_of(dest)
    if record.outcome == "q8":
        assert record.within and Bundle.open(dest).precision == "q8"
    else:
        assert Bundle.open(dest).precision == "fp32" and record.reason


def test_function_outliers_stay_8bit_by_splitting_their_channels(tmp_path):
    """4 channels per layer 100x, part of the function: before the split the check fell back to fp32 here (the
    talker's KL 7.65 as converted); the outlier channels split off bring both networks within the bound with
    every Linear 8-bit."""
    ckpt = write_stress_checkpoint(MODELS / MODEL, tmp_path / "ckpt", Stress("channels", 100))
    dest = convert_checkpoint(ckpt, tmp_path / "b", "q8", parts=["talker"])
    record = record_of(dest)
    assert record.outcome == "q8" and record.within and Bundle.open(dest).precision == "q8"
    assert record.promoted == () and record.split
    assert max(record.talker.kl_unchecked, record.code_predictor.kl_unchecked) > record.bound
    part = Bundle.open(dest).part("talker")
    assert part["promoted_layers"] == [] and sorted(part["split_channels"]) == sorted(record.split)
    assert "split in" in record.summary() and "kept float" not in record.summary()


def _candidates(ckpt) -> dict[str, tuple[int, ...]]:
    c = Checkpoint.open(ckpt)
    try:
        return q8_split.outlier_channels(smooth.calibrate(c), int(c.talker_config.get("num_code_groups", 16)))
    finally:
        c.close()


def test_the_check_splits_only_the_layers_the_bound_needs(tmp_path):
    """Every split Linear costs a few small layers per call: at a bound that part of the split reaches (100x
    channels, 5e-3: 8.2e-3 / 2.6e-2 as converted), the check splits the layers whose split removes the most KL per
    call a frame, not every Linear with outlier channels, and the bundle it ships is within that bound."""
    ckpt = write_stress_checkpoint(MODELS / MODEL, tmp_path / "ckpt", Stress("channels", 100))
    candidates = _candidates(ckpt)
    (tmp_path / "w").mkdir()
    out = q8_check.check_q8(ckpt, tmp_path / "w", lambda f, m: None, lambda: None, bound=5e-3)
    record = out.record
    assert record.outcome == "q8" and record.within and record.promoted == ()
    assert max(record.talker.kl_unchecked, record.code_predictor.kl_unchecked) > record.bound
    assert 0 < len(record.split) < len(candidates) and set(record.split) <= candidates.keys()
    assert Bundle.open(out.talker_bundle).part("talker")["split_channels"] == {
        n: list(candidates[n]) for n in record.split}


def test_fewest_splits_that_fall_short_are_followed_by_every_candidate(tmp_path, monkeypatch):
    """The choice is an estimate: when the bundle with the chosen splits still measures over the bound, the next
    round splits every Linear with outlier channels in the networks over it (the bound then holds at 2e-3)."""
    ckpt = write_stress_checkpoint(MODELS / MODEL, tmp_path / "ckpt", Stress("channels", 100))
    def least(before, after, measured, target, cost):  # the layer whose split removes the least: far too few
        return [min(cost, key=lambda k: before[k] - after[k])]

    monkeypatch.setattr(q8_check, "choose_splits", least)
    lines: list[str] = []
    (tmp_path / "w").mkdir()
    record = q8_check.check_q8(ckpt, tmp_path / "w", lambda f, m: lines.append(m), lambda: None).record
    assert record.outcome == "q8" and record.within and record.rounds == 3
    assert set(record.split) == _candidates(ckpt).keys()
    assert any("with 8 split" in line for line in lines)


def test_choose_splits_takes_most_kl_removed_per_call_first():
    before = {"talker.0": 4e-3, "talker.1": 3e-3, "code_predictor.0": 2e-3, "talker.head": 1e-3}
    after = {"talker.0": 3e-3, "talker.1": 5e-4, "code_predictor.0": 1e-4, "talker.head": 1e-3}
    cost = {"talker.0": 4, "talker.1": 4, "code_predictor.0": 60, "talker.head": 1}
    # measured 1e-2 over a sum of 1e-2: talker.1 removes 2.5e-3 for 4 calls, code_predictor.0 1.9e-3 for 60
    assert q8_check.choose_splits(before, after, 1e-2, 8e-3, cost) == ["talker.1"]
    assert q8_check.choose_splits(before, after, 1e-2, 7e-3, cost) == ["talker.1", "talker.0"]
    assert q8_check.choose_splits(before, after, 1e-2, 6e-3, cost) == ["talker.1", "talker.0", "code_predictor.0"]
    # a split that removes nothing is never chosen, even when the target is not reached
    assert q8_check.choose_splits(before, after, 1e-2, 1e-3, cost) == ["talker.1", "talker.0", "code_predictor.0"]
    assert q8_check.choose_splits(before, after, 1e-3, 2e-3, cost) == []


def test_a_plain_checkpoint_splits_nothing(tmp_path):
    """No outlier channels on the plain fixture: its checked bundle is the one converted without the check but
    with the Linears the check kept float, file for file."""
    dest = convert_checkpoint(MODELS / MODEL, tmp_path / "b", "q8", parts=["talker"])
    record = record_of(dest)
    assert record.split == () and "split" not in json.loads((dest / "manifest.json").read_text())["q8_check"]
    assert "split_channels" not in Bundle.open(dest).part("talker")
    again = convert_checkpoint(MODELS / MODEL, tmp_path / "again", "q8", parts=["talker"], check=False,
                               promote=expand(p.name for p in record.promoted))
    for name in ("talker.param", "talker.bin", "code_predictor.param", "code_predictor.bin"):
        assert (dest / name).read_bytes() == (again / name).read_bytes(), name


def test_the_per_layer_measurement_computes_the_split_as_the_graph_does(tmp_path):
    """With every Linear of a layer split as the bundle splits it, the per-layer measurement's 8-bit products are
    the graph's: one talker layer's q/k/v output from the numpy model equals the ncnn graph's to fp32 rounding."""
    from engine.convert.q8_layers import _Weights
    from engine.convert.stack_forward import rms

    ckpt_dir = write_stress_checkpoint(MODELS / MODEL, tmp_path / "ckpt", Stress("channels", 100))
    split = {"talker.0.qkv": (3, 17, 40, 41)}
    dest = convert_checkpoint(ckpt_dir, tmp_path / "b", "q8", parts=["talker"], check=False, smooth=False,
                              split=split)
    ckpt = Checkpoint.open(ckpt_dir)
    try:
        w = _Weights(ckpt)
        x = np.random.default_rng(0).standard_normal((3, w.get("talker.model.norm.weight").size)).astype(np.float32)
        h = rms(x, w.get("talker.model.layers.0.input_layernorm.weight"), 1e-6)
        names = [f"talker.model.layers.0.self_attn.{p}_proj.weight" for p in "qkv"]
        want = w.int8(h, names, split["talker.0.qkv"])
        plain = w.int8(h, names)
    finally:
        ckpt.close()
    import ncnn

    from engine.runtime.bundle import make_net_options
    from engine.runtime.step_graph import step_param_text

    bundle = Bundle.open(dest)
    net = ncnn.Net()
    make_net_options(net, "fp32", 1)
    net.opt.use_packing_layout = False
    assert net.load_param_mem(step_param_text(bundle.file("talker.param").read_text())[0]) == 0
    assert net.load_model(str(bundle.file("talker.bin"))) == 0
    qkv = next(ln.split()[4 + int(ln.split()[2])] for ln in bundle.file("talker.param").read_text().splitlines()
               if ln.startswith("Squeeze "))  # every q8 Linear ends in one: the first is layer 0's q/k/v
    ex = net.create_extractor()
    ex.input("in0", ncnn.Mat(np.ascontiguousarray(x)).clone())
    ret, mat = ex.extract(qkv)
    assert ret == 0
    got = np.array(mat).reshape(want.shape)
    scale = np.abs(want).max()
    assert np.abs(got - want).max() <= 1e-5 * scale < np.abs(plain - want).max()


def test_whole_layer_names_expand_to_their_four_linears():
    assert expand(["talker.5", "talker.head", "code_predictor.1.o", "code_predictor.head.3"]) == {
        "talker.5.qkv", "talker.5.o", "talker.5.gate_up", "talker.5.down", "talker.head", "code_predictor.1.o",
        "code_predictor.head.3"}


def test_choose_promotions_takes_the_fewest_largest_first():
    kl = {"talker.0.qkv": 8e-3, "talker.0.o": 1e-3, "talker.1.down": 5e-4, "talker.head": 5e-4}
    # measured 1e-2 over a per-layer sum of 1e-2: dropping the 8e-3 one leaves an estimated 2e-3
    assert q8_check.choose_promotions(kl, 1e-2, 2.1e-3, frozenset()) == ["talker.0.qkv"]
    assert q8_check.choose_promotions(kl, 1e-2, 1.1e-3, frozenset()) == ["talker.0.qkv", "talker.0.o"]
    # a second round: what is measured now is put down to the Linears still 8-bit
    assert q8_check.choose_promotions(kl, 3e-3, 1e-3, frozenset({"talker.0.qkv"})) == ["talker.0.o", "talker.1.down"]
    assert q8_check.choose_promotions(kl, 1e-2, 2e-3, frozenset(kl)) == []


# ------------------------------------------------------------------------------------------- the record


def good_record() -> dict:
    return {"version": 1, "bound": 2e-3,
            "talker": {"kl": 8e-4, "top1": 0.97, "kl_unchecked": 4e-3, "top1_unchecked": 0.8},
            "code_predictor": {"kl": 1e-3, "top1": 0.96, "kl_unchecked": 1e-3, "top1_unchecked": 0.96},
            "promoted": [{"name": "talker.3.down", "kl_alone": 2e-3, "extra_bytes_per_frame": 9437184}],
            "promoted_share": 0.02, "outcome": "q8", "reason": "", "rounds": 2, "seconds": 301.5,
            "languages": ["en", "zh"], "frames": 16}


def test_the_record_round_trips_and_reads_as_one_phrase():
    record = Q8CheckRecord.from_json(good_record())
    assert record.to_json() == good_record()
    assert record.summary() == ("8-bit, checked: KL 8.0e-04 / 1.0e-03 (talker / code predictor), "
                                "1 kept float")
    split = good_record() | {"split": ["talker.0.qkv", "code_predictor.head.3"]}
    record = Q8CheckRecord.from_json(split)
    assert record.to_json() == split and record.split == ("talker.0.qkv", "code_predictor.head.3")
    assert record.summary().endswith("(talker / code predictor), outlier channels split in 2, 1 kept float")


def _damaged(path: str, value):
    data = good_record()
    keys = path.split(".")
    target = data
    for k in keys[:-1]:
        target = target[int(k)] if isinstance(target, list) else target[k]
    if value is KeyError:
        del target[keys[-1]]
    else:
        target[keys[-1]] = value
    return data


DAMAGE = [("talker.kl", "0.001"), ("talker.kl", float("nan")), ("talker.kl", -1.0), ("talker.kl", True),
          ("talker.top1", 1.5), ("code_predictor", [1, 2]), ("code_predictor.kl_unchecked", KeyError),
          ("outcome", "maybe"), ("reason", "two\nlines"), ("version", 9), ("rounds", 0), ("frames", "16"),
          ("promoted", {"a": 1}), ("promoted.0.name", "../etc"), ("promoted.0.extra_bytes_per_frame", -5),
          ("languages", "en"), ("bound", None), ("seconds", KeyError), ("split", "talker.0.qkv"),
          ("split", ["../etc"]), ("split", [3])]


@pytest.mark.parametrize("path,value", DAMAGE, ids=[f"{p}={v!r}" for p, v in DAMAGE])
def test_a_damaged_record_is_refused_with_one_line(path, value):
    with pytest.raises(CheckRecordError) as err:
        read_check_record({"q8_check": _damaged(path, value)})
    assert "\n" not in str(err.value) and "8-bit check record" in str(err.value)


@pytest.mark.parametrize("record", [None, [], "text", 5])
def test_a_record_that_is_not_a_table_is_refused(record):
    with pytest.raises(CheckRecordError):
        read_check_record({"q8_check": record})


# ------------------------------------------------------------------------------------------- listings, old bundles


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("QWEN3TTS_MODELS_DIR", str(tmp_path / "models"))
    (tmp_path / "models").mkdir()
    return ModelStore()


def old_q8_bundle(store: ModelStore, name: str = "old"):
    """An 8-bit bundle as converted before the check: no record."""
    dest = convert_checkpoint(MODELS / MODEL, store.root / name, "q8", check=False)
    (dest / "source.json").write_text(json.dumps({"repo_id": "Qwen/old"}), encoding="utf-8")
    return dest


def run(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        code = cli_main(list(argv))
    except SystemExit as e:
        code = int(e.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_an_old_bundle_is_offered_a_check_and_the_check_records_it(store, capsys):
    path = old_q8_bundle(store)
    model = store.get("old")
    assert model.check_offered and model.accuracy == "8-bit, not checked"
    assert "qwen3tts models check old" in model.note
    code, out, err = run(capsys, "models", "list")
    assert code == 0 and out.startswith("old  q8 (8-bit, not checked)  ") and "models check old" in err

    code, out, err = run(capsys, "models", "check", "old", "--checkpoint", str(MODELS / MODEL))
    assert code == 0, err
    record = record_of(path)
    assert "checked old" in err and record.summary() in err
    assert json.loads((path / "source.json").read_text())["repo_id"] == "Qwen/old"  # kept
    model = store.get("old")
    assert not model.check_offered and model.accuracy == record.summary()
    code, out, _ = run(capsys, "models", "list")
    assert out.startswith(f"old  {Bundle.open(path).precision} ({record.summary()})  ")
    if record.outcome == "q8":  # the bundle still loads and holds the Linears the record names
        promoted = expand(p.name for p in record.promoted)
        assert sorted(Bundle.open(path).part("talker")["promoted_layers"]) == sorted(promoted)


def test_checking_an_old_bundle_within_the_bound_changes_only_its_manifest(store, capsys, monkeypatch):
    monkeypatch.setattr(q8_check, "BOUND", 1.0)  # anything 8-bit is within
    path = old_q8_bundle(store)
    before = {p.name: p.read_bytes() for p in path.iterdir() if p.is_file() and p.name != "manifest.json"}
    code, _, err = run(capsys, "models", "check", "old", "--checkpoint", str(MODELS / MODEL))
    assert code == 0, err
    assert {p.name: p.read_bytes() for p in path.iterdir() if p.is_file() and p.name != "manifest.json"} == before
    record = record_of(path)
    assert record.rounds == 1 and not record.promoted and record.outcome == "q8"


def test_checking_against_another_checkpoint_is_refused_with_one_line(store, capsys):
    path = old_q8_bundle(store)
    before = (path / "manifest.json").read_bytes()
    code, _, err = run(capsys, "models", "check", "old", "--checkpoint", str(MODELS / "tiny17b"))
    assert code != 0 and "not the checkpoint" in err and len(err.strip().splitlines()) == 1
    assert (path / "manifest.json").read_bytes() == before
    assert not [p for p in store.root.iterdir() if p.name.startswith(".")]  # no work folder left


def test_checking_needs_the_checkpoint(store, capsys):
    old_q8_bundle(store)
    code, _, err = run(capsys, "models", "check", "old")
    assert code != 0 and "--checkpoint" in err and len(err.strip().splitlines()) == 1


def test_a_damaged_record_in_an_installed_bundle_is_listed_not_a_traceback(store, capsys):
    path = old_q8_bundle(store)
    manifest = json.loads((path / "manifest.json").read_text())
    manifest["q8_check"] = _damaged("talker.kl", "lots")
    (path / "manifest.json").write_text(json.dumps(manifest))
    model = store.get("old")
    assert model.check_offered and model.accuracy == "8-bit check record damaged" and "talker.kl" in model.note
    code, out, err = run(capsys, "models", "list")
    assert code == 0 and out.startswith("old  q8 (8-bit check record damaged)") and "Traceback" not in err
    Bundle.open(path)  # the bundle itself still loads: the record only describes it


def test_convert_prints_the_check(tmp_path, capsys):
    code, _, err = run(capsys, "convert", str(MODELS / MODEL), str(tmp_path / "b"), "--precision", "q8")
    assert code == 0, err
    record = record_of(tmp_path / "b")
    assert f"8-bit check ({record.seconds:.0f} s): {record.summary()}" in err
    assert err.count("kept float: ") == len(record.promoted)


def test_a_fresh_q8_conversion_is_not_offered_a_check(store):
    convert_checkpoint(MODELS / MODEL, store.root / "new", "q8")
    model = store.get("new")
    assert not model.check_offered and model.accuracy.startswith(("8-bit, checked: ", "float: "))
    shutil.rmtree(store.root / "new")


def test_a_bundle_from_before_smoothing_gets_a_smoothed_talker_part_when_over(store, capsys):
    """The old bundle is measured as it is; what replaces its talker part is today's conversion (smoothed). The
    tiny model's code predictor is over the bound as converted (2.2e-3), so a new talker part is made."""
    path = convert_checkpoint(MODELS / MODEL, store.root / "old", "q8", check=False, smooth=False)
    assert Bundle.open(path).part("talker")["outlier_smoothing"] is None
    code, _, err = run(capsys, "models", "check", "old", "--checkpoint", str(MODELS / MODEL))
    assert code == 0, err
    record = record_of(path)
    assert record.rounds > 1 and record.outcome == "q8" and record.within
    assert Bundle.open(path).part("talker")["outlier_smoothing"] is not None
