"""Damaged and forged tuning records: every field is checked against what the tuner can write, and a record that
fails is ignored with one line and replaced by the next tuning, never a traceback, never a wrong device.

The cases came from hand-edited records: a device named "gpu:x" (a traceback on every synth, batch and bench),
"gpu:-1" (silently the last GPU), a GPU verdict without a GPU figure (bench crashed in the summary), thread counts
of 10^9 and 10^400, a load average of 999 (a re-tune on every open), a figure sending "auto" to a software GPU.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, fields

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import engine.runtime.device as dev
from engine.runtime.bundle import Bundle
from engine.runtime.device import GpuDevice, GpuScan, resolve_device
from engine.runtime.tuning import (
    TUNER_VERSION,
    CandidateFigure,
    TunedSettings,
    TuningKey,
    TuningRecord,
    load_record,
    record_path,
    save_record,
)
from engine.synthesis.self_tuning import thread_plan, tuning_key
from tests.bundles import bundle_for

from .conftest import REF, run_cli

KEY = TuningKey(cpu="Test CPU 9000", cores=2, logical=2, ncnn="1.0.20261020", model="talker 28x1024",
                precision="fp32", format="1/fp32")
HARDWARE = GpuDevice(0, "Test GPU", "discrete", 0x1002, 1 << 22, 1 << 22, 8192)
SOFTWARE = GpuDevice(1, "llvmpipe (LLVM 19.1.7, 256 bits)", "software (runs on the CPU)", 0x10005, 1, 1 << 22, 2048)


def good() -> dict:
    """A record as the tuner writes it on a computer with one hardware GPU (slower than the CPU here)."""
    return json.loads(json.dumps(TuningRecord(KEY, TunedSettings(talker_threads=2, code_predictor_threads=1, decoder_threads=1,
                                           overlap_decode=True, decoder_bf16_faster=None, gpu_faster=False,
                                           streaming_threads=1),
                        (CandidateFigure("talker threads", "2", "talker step", 40.5, 6, True),
                         CandidateFigure("talker threads", "1", "talker step", math.inf, 0, False)),
                        9.5, "2026-12-01T23:00:00Z", "0.50 0.40 0.30", {"cpu": 120.5, "gpu:0": 300.0}).to_json()))


@pytest.fixture(autouse=True)
def two_gpus(monkeypatch):
    """This computer's GPUs as ncnn would list them: a hardware one and lavapipe."""
    monkeypatch.setattr(dev, "_scan", [GpuScan((HARDWARE, SOFTWARE), default_index=0)])


def changed(part: str | None, **values) -> dict:
    data = good()
    (data if part is None else data[part]).update(values)
    return data


def refused(tmp_path, data, key: TuningKey = KEY) -> str:
    """The note load_record gives for `data` stored under `key` (the test fails if it is accepted)."""
    path = record_path(key, tmp_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    found = load_record(key, tmp_path)
    assert found.record is None, f"accepted: {data}"
    assert found.note and "\n" not in found.note and str(path) in found.note and "tuned again" in found.note
    assert len(found.note) < 400 + len(str(path)), found.note
    return found.note


def test_the_good_record_loads(tmp_path):
    record = TuningRecord.from_json(good())
    assert save_record(record, tmp_path) is None
    assert load_record(KEY, tmp_path).record == record


# the cases of the report, each by name
CASES = {
    "gpu:x": (changed(None, device_ms={"cpu": 100.0, "gpu:x": 50.0}), "'gpu:x', which is not a device"),
    "gpu:-1": (changed(None, device_ms={"cpu": 100.0, "gpu:-1": 50.0}), "'gpu:-1', which is not a device"),
    "gpu:01": (changed(None, device_ms={"cpu": 100.0, "gpu:01": 50.0}), "'gpu:01', which is not a device"),
    "a GPU this computer lacks": (changed(None, device_ms={"cpu": 100.0, "gpu:7": 500.0}),
                                  "gpu:7, a GPU this computer does not have"),
    "gpu_faster without a GPU figure": (changed("settings", gpu_faster=True) | {"device_ms": {"cpu": 100.0}},
                                        "GPU verdict has no GPU figure"),
    "gpu_faster without any figure": (changed("settings", gpu_faster=True) | {"device_ms": {}},
                                      "GPU verdict has no GPU figure"),
    "GPU figures without a verdict": (changed("settings", gpu_faster=None), "GPU figures but no GPU verdict"),
    "a verdict its figures contradict": (changed("settings", gpu_faster=True), "contradicts its figures"),
    "no CPU figure": (changed(None, device_ms={"gpu:0": 50.0}), "no CPU figure"),
    "forged figure for a software GPU": (
        changed("settings", gpu_faster=True) | {"device_ms": {"cpu": 100.0, "gpu:1": 5.0}},
        "gpu:1 (llvmpipe (LLVM 19.1.7, 256 bits)), a software GPU the tuner never times"),
    "10^9 talker threads": (changed("settings", talker_threads=10**9),
                            "talker threads (1000000000) is not a count the tuner tries on 2 cores (1, 2)"),
    "10^400 decoder threads": (changed("settings", decoder_threads=10**400),
                               "decoder threads (a 401-digit number) is not a count"),
    "3 threads on 2 cores": (changed("settings", code_predictor_threads=3), "code predictor threads (3)"),
    "a negative streaming count": (changed("settings", streaming_threads=-2), "streaming threads (-2)"),
    "load 999": (changed(None, load_average="999.00 999.00 999.00"), "more than 2 CPUs could have had"),
    "a load that is not load_average()'s": (changed(None, load_average="0.5"), "is not one this app writes"),
    "a load of NaN": (changed(None, load_average="nan nan nan"), "is not one this app writes"),
    "a NaN device figure": (changed(None, device_ms={"cpu": math.nan}), "is not a time"),
    "an infinite device figure": (changed(None, device_ms={"cpu": math.inf}), "is not a time"),
    "10^400 ms": (changed(None, device_ms={"cpu": 10**400}), "is not a time"),
    "a negative tuning time": (changed(None, seconds=-1.0), "tuning time (-1.0 s)"),
    "a 10^400 s tuning time": (changed(None, seconds=10**400), "tuning time (a 401-digit number s)"),
    "a made-up time stamp": (changed(None, measured="yesterday"), "time stamp ('yesterday') is not readable"),
    "1000 cores": (changed("key", cores=1000), "core counts"),
    "no cores": (changed("key", cores=0, logical=0), "core counts"),
    "a 1000-character CPU name": (changed("key", cpu="x" * 1000), "key's cpu is longer than"),
    "another tuner in the key": (changed("key", tuner=TUNER_VERSION + 1), "another version of the tuner"),
    "a figure of 10^400 samples": (changed(None, figures=[{**good()["figures"][0], "samples": 10**400}]),
                                   "counts a 401-digit number samples"),
    "a negative figure": (changed(None, figures=[{**good()["figures"][0], "median_ms": -5}]), "is not a time"),
    "too many figures": (changed(None, figures=[good()["figures"][0]] * 300), "at most 256"),
}


@pytest.mark.parametrize("case", CASES)
def test_a_damaged_record_is_refused_with_a_note(tmp_path, case):
    data, words = CASES[case]
    note = refused(tmp_path, data, TuningKey(**data["key"]) if case.startswith(("1000 cores", "no cores")) else KEY)
    assert words in note
    with pytest.raises(ValueError):
        TuningRecord.from_json(data)
    record = TuningRecord.from_json(good())  # the next tuning replaces it
    assert save_record(record, tmp_path) is None and load_record(KEY, tmp_path).record == record


# A value this tuner could not write for every field of the record: a field added without a check fails here.
BAD_VALUES: dict[tuple[type, str], object] = {
    (TuningKey, "cpu"): "x" * 600, (TuningKey, "cores"): 3, (TuningKey, "logical"): 10**6,
    (TuningKey, "ncnn"): "1" * 600, (TuningKey, "model"): "m" * 600, (TuningKey, "precision"): "q" * 600,
    (TuningKey, "format"): "f" * 600, (TuningKey, "device"): "d" * 600, (TuningKey, "tuner"): TUNER_VERSION - 1,
    (TunedSettings, "talker_threads"): 4, (TunedSettings, "code_predictor_threads"): 0,
    (TunedSettings, "decoder_threads"): 10**9, (TunedSettings, "overlap_decode"): None,
    (TunedSettings, "decoder_bf16_faster"): "yes", (TunedSettings, "gpu_faster"): None,
    (TunedSettings, "streaming_threads"): 5, (TunedSettings, "spin_count"): 10**10,
    (CandidateFigure, "setting"): "s" * 600, (CandidateFigure, "value"): "v" * 600,
    (CandidateFigure, "part"): "p" * 600, (CandidateFigure, "median_ms"): -1.0,
    (CandidateFigure, "samples"): -1, (CandidateFigure, "chosen"): 1,
    (TuningRecord, "key"): [], (TuningRecord, "settings"): "fast", (TuningRecord, "figures"): {},
    (TuningRecord, "seconds"): math.nan, (TuningRecord, "measured"): "now",
    (TuningRecord, "load_average"): "0.10 0.10 900.00", (TuningRecord, "device_ms"): {"cpu": 1.0, "gpu:0": -1.0},
}


def test_every_field_of_a_record_is_checked(tmp_path):
    listed = {(cls, f.name) for cls in (TuningKey, TunedSettings, CandidateFigure, TuningRecord) for f in fields(cls)}
    assert listed == set(BAD_VALUES), f"fields without a bad value here: {listed - set(BAD_VALUES)}"
    for (cls, name), value in BAD_VALUES.items():
        data = good()
        where = {TuningKey: data["key"], TunedSettings: data["settings"], CandidateFigure: data["figures"][0],
                 TuningRecord: data}[cls]
        where[name] = value
        with pytest.raises(ValueError):
            TuningRecord.from_json(data)
        refused(tmp_path, data)


def test_a_bad_device_in_a_record_costs_no_run(tmp_path, capsys, monkeypatch):
    """The CLI with a record naming "gpu:x": one note, the CPU, exit 0 (was a ValueError traceback every run)."""
    monkeypatch.setenv("QWEN3TTS_CACHE_DIR", str(tmp_path / "cache"))
    bundle = bundle_for("tiny06b", "fp32")
    key = tuning_key(Bundle.open(bundle))
    data = good() | {"key": asdict(key), "device_ms": {"cpu": 100.0, "gpu:x": 5.0}}
    data["settings"] |= {"talker_threads": 1, "code_predictor_threads": 1, "decoder_threads": 1,
                         "streaming_threads": 1, "gpu_faster": True}
    path = record_path(key, tmp_path / "cache")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(data))
    code, err = run_cli(capsys, "synth", "--model", bundle, "--text", "Hello.", "-o", tmp_path / "a.wav",
                        "--greedy", "--max-frames", "2", "--language", "english", "--ref", REF, "--x-vector-only",
                        "--threads", "1")
    assert code == 0 and "Traceback" not in err, err
    notes = [line for line in err.splitlines() if "tuning record" in line]
    assert len(notes) == 1 and "'gpu:x', which is not a device" in notes[0], err


def test_the_spin_count_is_read_before_ncnn_from_a_record_with_gpu_figures(tmp_path):
    """The spin count is read from the records before ncnn is imported (libgomp reads it once, at load): checking
    a record's GPU names there would import ncnn first and leave the count unset."""
    import subprocess
    import sys

    from engine.runtime.cpu import cpu_model, ncnn_version, physical_cores, usable_cpus
    from tests.faults.conftest import ROOT

    key = TuningKey(cpu=cpu_model(), cores=physical_cores(), logical=usable_cpus(), ncnn=ncnn_version(),
                    model="m", precision="fp32", format="f")
    data = good() | {"key": asdict(key), "device_ms": {"cpu": 120.5, "gpu:0": 300.0}}
    data["settings"] |= {"talker_threads": 1, "code_predictor_threads": 1, "decoder_threads": 1,
                         "streaming_threads": 1, "gpu_faster": False, "spin_count": 12345}
    TuningRecord.from_json(data)  # a record the app would load (here: GPU 0 is a hardware GPU)
    path = record_path(key, tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(data))
    script = (
        "import os, sys\n"
        "seen = {}\n"
        "class Watch:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'ncnn':\n"
        "            seen.setdefault('spin', os.environ.get('GOMP_SPINCOUNT'))\n"
        "sys.meta_path.insert(0, Watch())\n"
        "import engine\n"
        "from engine.runtime.cpu import spin_setting\n"
        "print(seen.get('spin'), spin_setting().count)\n")
    env = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
    env |= {"QWEN3TTS_CACHE_DIR": str(tmp_path), "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["12345", "12345"], r.stdout


# -------------------------------------------------------------------------------------------------- any record

_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                                 max_size=3), max_leaves=6)
_counts = st.one_of(st.sampled_from([1, 2]), st.integers(-3, 5), st.just(10**9), st.just(10**400), _json)
_ms = st.one_of(st.floats(), st.integers(min_value=-10, max_value=10**400), _json)


@st.composite
def records(draw) -> dict:
    """A record whose every field is drawn from values the tuner writes and values it never would."""
    data = good()
    settings_ = data["settings"]
    for name in ("talker_threads", "code_predictor_threads", "decoder_threads", "streaming_threads"):
        if draw(st.booleans()):
            settings_[name] = draw(_counts)
    for name in ("overlap_decode", "decoder_bf16_faster", "gpu_faster"):
        if draw(st.booleans()):
            settings_[name] = draw(st.one_of(st.none(), st.booleans(), _json))
    if draw(st.booleans()):
        names = st.sampled_from(["cpu", "gpu:0", "gpu:1", "gpu:2", "gpu:-1", "gpu:x", ""]) | st.text(max_size=6)
        data["device_ms"] = draw(st.dictionaries(names, _ms, max_size=4) | _json)
    if draw(st.booleans()):
        data["load_average"] = draw(st.sampled_from(["", "n/a", "0.10 0.20 0.30", "999.00 1.00 1.00", "1 2 3"])
                                    | st.text(max_size=20) | _json)
    if draw(st.booleans()):
        data["seconds"] = draw(_ms)
    if draw(st.booleans()):
        data["figures"] = draw(st.lists(st.fixed_dictionaries({
            "setting": st.text(max_size=5), "value": st.text(max_size=5), "part": st.text(max_size=5),
            "median_ms": _ms, "samples": _counts, "chosen": st.booleans() | _json}), max_size=3) | _json)
    if draw(st.booleans()):
        key = data["key"]
        key[draw(st.sampled_from(sorted(key)))] = draw(_counts | _json)
    if draw(st.integers(0, 9)) == 0:
        data = draw(_json)
    return data


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=records())
def test_any_record_loads_or_is_refused_with_a_note(tmp_path, data):
    path = record_path(KEY, tmp_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    found = load_record(KEY, tmp_path)  # never raises
    assert (found.record is None) != (found.note is None)
    if found.note is not None:
        assert "\n" not in found.note and "tuned again" in found.note
        return
    record = found.record
    # what reads a record works on whatever loaded
    record.summary()
    record.worth_retuning("0.10 0.10 0.10")
    plan = thread_plan(record, None, KEY.cores)
    assert 1 <= plan.decoder <= KEY.cores
    device = resolve_device("auto", "fp32", record.device_ms)
    assert device.gpu is None or not device.gpu.software
    assert save_record(record, tmp_path) is None and load_record(KEY, tmp_path).record == record
