"""The self-tuner's logic with injected timings (engine/runtime/tuning.py): which candidate wins on CPUs we never
see, how it alternates, stops and cancels, and the stored record (a damaged or foreign file is ignored with a
note)."""

from __future__ import annotations

import json
import os
import random
from dataclasses import replace

import pytest

from engine.errors import Cancelled
from engine.runtime.tuning import (
    MAX_RECORD_BYTES,
    CandidateFigure,
    TunedSettings,
    TuningKey,
    TuningRecord,
    alternate,
    load_record,
    pick,
    record_path,
    save_record,
    thread_candidates,
)

KEY = TuningKey(cpu="Test CPU 9000", cores=2, logical=2, ncnn="1.0.20261020", model="talker 28x1024",
                precision="q8", format="1/int8")


def machine(ms: dict, noise: float = 0.0, spikes: float = 0.0, seed: int = 0):
    """A fake CPU: measure(candidate) -> {part: seconds} from per-candidate, per-part milliseconds, with relative
    jitter `noise` and a share `spikes` of measurements three times slower (another program took the core)."""
    rng = random.Random(seed)
    calls = []

    def measure(c):
        calls.append(c)
        out = {}
        for part, base in ms[c].items():
            v = base * (1 + rng.uniform(-noise, noise))
            if rng.random() < spikes:
                v *= 3
            out[part] = v / 1000
        return out

    measure.calls = calls
    return measure


def tune_threads(ms, **kw):
    samples = alternate([1, 2], machine(ms, **kw), min_rounds=6, max_rounds=6)
    return pick(samples, "talker"), pick(samples, "code predictor")


def test_one_thread_wins_where_its_gemms_are_faster():
    # the AMD EPYC figures: one frame 93 ms on one int8 thread, 161 on two
    assert tune_threads({1: {"talker": 25, "code predictor": 68}, 2: {"talker": 44, "code predictor": 117}}) == (1, 1)


def test_two_threads_win_where_one_core_is_bandwidth_starved():
    # the Intel Xeon figures: talker 52-58 vs 39-40 ms, code predictor 128-150 vs 106-108
    assert tune_threads({1: {"talker": 55, "code predictor": 140}, 2: {"talker": 40, "code predictor": 107}}) == (2, 2)


def test_each_network_gets_its_own_winner():
    assert tune_threads({1: {"talker": 30, "code predictor": 90}, 2: {"talker": 45, "code predictor": 60}}) == (1, 2)


def test_a_tie_goes_to_the_first_listed_candidate():
    # within 3 %: fewer threads (listed first) win, leaving a core to the decoder
    samples = alternate([1, 2], machine({1: {"talker": 50.0}, 2: {"talker": 49.0}}), max_rounds=4)
    assert pick(samples, "talker") == 1
    samples = alternate([1, 2], machine({1: {"talker": 50.0}, 2: {"talker": 47.0}}), max_rounds=4)
    assert pick(samples, "talker") == 2


def test_noisy_timings_still_find_the_faster_count():
    wins = 0
    for seed in range(20):
        samples = alternate([1, 2], machine({1: {"talker": 100}, 2: {"talker": 80}}, noise=0.15, spikes=0.2,
                                            seed=seed), max_rounds=7)
        wins += pick(samples, "talker") == 2
    assert wins >= 19  # a 20 % gap survives 15 % jitter and one spike in five


def test_rounds_alternate_so_a_machine_getting_busier_favours_no_one():
    clock = iter(range(100))
    drifting = {}

    def measure(c):  # equal candidates on a machine slowing down by 1 % per measurement
        t = next(clock)
        drifting.setdefault(c, []).append(t)
        return {"step": 1.0 + 0.01 * t}

    samples = alternate(["a", "b"], measure, max_rounds=4)
    assert drifting == {"a": [0, 3, 4, 7], "b": [1, 2, 5, 6]}
    assert samples["a"]["step"] == pytest.approx([1.00, 1.03, 1.04, 1.07])
    assert pick(samples, "step", margin=0.0) == "a"  # equal medians: the first listed


def test_stops_at_the_deadline_after_the_minimum_rounds():
    now = [0.0]

    def measure(c):
        now[0] += 1.0  # each measurement takes one second
        return {"x": 1.0}

    samples = alternate([1, 2, 3], measure, min_rounds=2, max_rounds=10, deadline=7.5, clock=lambda: now[0])
    # round 1 ends at 3 s, round 2 at 6 s; a third would end at 9 s > 7.5 s: stop
    assert [len(s["x"]) for s in samples.values()] == [2, 2, 2]
    now[0] = 0.0
    samples = alternate([1, 2, 3], measure, min_rounds=2, max_rounds=10, deadline=1.0, clock=lambda: now[0])
    assert [len(s["x"]) for s in samples.values()] == [2, 2, 2]  # the minimum even past the deadline
    now[0] = 0.0
    samples = alternate([1, 2, 3], measure, min_rounds=2, max_rounds=3, deadline=100.0, clock=lambda: now[0])
    assert [len(s["x"]) for s in samples.values()] == [3, 3, 3]


def test_cancel_stops_between_measurements():
    measure = machine({1: {"x": 1}, 2: {"x": 2}})
    asked = []

    def cancel():
        asked.append(1)
        return len(asked) > 3

    with pytest.raises(Cancelled):
        alternate([1, 2], measure, max_rounds=8, cancel=cancel)
    assert len(measure.calls) == 3  # nothing measured after the cancel


def test_a_candidate_never_measured_never_wins():
    assert pick({1: {"x": []}, 2: {"x": [0.5]}}, "x") == 2
    assert pick({1: {"x": [float("nan")]}, 2: {"x": [0.7]}}, "x") == 2


def test_thread_candidates():
    assert thread_candidates(1) == [1]
    assert thread_candidates(2) == [1, 2]
    assert thread_candidates(4) == [1, 2, 4]
    assert thread_candidates(16) == [1, 2, 8, 16]
    assert thread_candidates(0) == [1]


# -------------------------------------------------------------------------------------------------- the record

RECORD = TuningRecord(KEY, TunedSettings(talker_threads=2, code_predictor_threads=1, decoder_threads=1, streaming_threads=1,
                                         overlap_decode=True, decoder_bf16_faster=False, spin_count=10000),
                      (CandidateFigure("talker threads", "2", "talker step", 40.5, 6, True),), 9.5,
                      "2026-12-01T23:00:00Z", "0.50 0.40 0.30", {"cpu": 120.5})


def test_record_round_trip_and_key_digest(tmp_path):
    assert save_record(RECORD, tmp_path) is None
    found = load_record(KEY, tmp_path)
    assert found.record == RECORD and found.note is None
    other = replace(KEY, cpu="Another CPU")
    assert other.digest() != KEY.digest()
    assert load_record(other, tmp_path).record is None  # a new CPU tunes again
    for changed in (replace(KEY, ncnn="1.0.2027"), replace(KEY, precision="fp32"), replace(KEY, format="1/block"),
                    replace(KEY, cores=4), replace(KEY, device="cpu+gpu0:llvmpipe"), replace(KEY, tuner=99)):
        assert changed.digest() != KEY.digest()


def test_missing_file_is_no_record_and_no_note(tmp_path):
    assert load_record(KEY, tmp_path) == load_record(KEY, tmp_path / "nowhere")
    assert load_record(KEY, tmp_path).record is None and load_record(KEY, tmp_path).note is None


def _write(tmp_path, data: bytes):
    p = record_path(KEY, tmp_path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data)
    return p


GOOD = json.dumps(RECORD.to_json()).encode()


@pytest.mark.parametrize("data, reason", [
    (b"", "Expecting value"),
    (GOOD[: len(GOOD) // 2], "line 1 column"),
    (b"\xff\xfe\x00garbage", "codec"),
    (b"[1, 2, 3]", "not a tuning record"),
    (json.dumps({**RECORD.to_json(), "version": 0}).encode(), "another version"),
    (json.dumps({**RECORD.to_json(), "settings": {**RECORD.to_json()["settings"], "talker_threads": "2"}}).encode(),
     "str for 'talker_threads'"),
    (json.dumps({**RECORD.to_json(), "settings": {**RECORD.to_json()["settings"], "decoder_threads": True}}).encode(),
     "bool for 'decoder_threads'"),
    (json.dumps({**RECORD.to_json(), "settings": {**RECORD.to_json()["settings"], "decoder_threads": 0}}).encode(),
     "decoder threads (0) is not a count the tuner tries on 2 cores (1, 2)"),
    (json.dumps({**RECORD.to_json(), "settings": {**RECORD.to_json()["settings"], "streaming_threads": 0}}).encode(),
     "streaming threads (0) is not a count"),
    (json.dumps({**RECORD.to_json(), "settings": {**RECORD.to_json()["settings"], "streaming_threads": "1"}}).encode(),
     "str for 'streaming_threads'"),
    (json.dumps({**RECORD.to_json(), "settings": {**RECORD.to_json()["settings"], "spin_count": -1}}).encode(),
     "spin count (-1) is outside"),
    (json.dumps({**RECORD.to_json(), "settings": {**RECORD.to_json()["settings"], "spin_count": 10**12}}).encode(),
     "is outside"),
    (json.dumps({**RECORD.to_json(), "settings": {**RECORD.to_json()["settings"], "spin_count": "1000"}}).encode(),
     "str for 'spin_count'"),
    (json.dumps({**RECORD.to_json(), "settings": {**RECORD.to_json()["settings"], "spin_count": True}}).encode(),
     "bool for 'spin_count'"),
    (json.dumps({**RECORD.to_json(), "settings": {**RECORD.to_json()["settings"], "spin_count": 1000.0}}).encode(),
     "float for 'spin_count'"),
    (json.dumps({**RECORD.to_json(), "settings": None}).encode(), "settings is not a table"),
    (json.dumps({**RECORD.to_json(), "figures": {"a": 1}}).encode(), "figures are not a list"),
    (json.dumps({**RECORD.to_json(), "device_ms": {"cpu": "fast"}}).encode(), "per-device figures"),
    (json.dumps({**RECORD.to_json(), "key": {**RECORD.to_json()["key"], "cpu": "Someone else's CPU"}}).encode(),
     "another computer"),
    (b"[" * 100000, "larger than"),
    (b" " * (MAX_RECORD_BYTES + 1), "larger than"),
])
def test_a_damaged_or_foreign_record_is_ignored_with_a_note(tmp_path, data, reason):
    p = _write(tmp_path, data)
    found = load_record(KEY, tmp_path)
    assert found.record is None
    assert str(p) in found.note and reason in found.note and "\n" not in found.note
    assert save_record(RECORD, tmp_path) is None  # the next tuning replaces it
    assert load_record(KEY, tmp_path).record == RECORD


def test_deeply_nested_record_is_ignored(tmp_path):
    _write(tmp_path, json.dumps({**RECORD.to_json(), "device_ms": {"a": None}}).replace('null', "[" * 3000 + "]" * 3000)
           .encode())
    assert load_record(KEY, tmp_path).record is None


def test_a_fifo_or_a_folder_in_its_place_is_ignored_without_hanging(tmp_path):
    p = record_path(KEY, tmp_path)
    p.parent.mkdir(parents=True)
    os.mkfifo(p)
    found = load_record(KEY, tmp_path)
    assert found.record is None and "not a regular file" in found.note
    p.unlink()
    p.mkdir()
    found = load_record(KEY, tmp_path)
    assert found.record is None and "folder" in found.note
    p.rmdir()
    p.symlink_to(p)
    found = load_record(KEY, tmp_path)
    assert found.record is None and "symbolic link" in found.note  # never followed, looping or not


def test_a_record_that_cannot_be_stored_is_a_note(tmp_path):
    (tmp_path / "tuning").write_text("a file where the folder should be")
    note = save_record(RECORD, tmp_path)
    assert note is not None and "could not be stored" in note and "\n" not in note


def test_summary_names_the_choices():
    line = RECORD.summary()
    assert "talker 2" in line and "code predictor 1 thread;" in line and "decoder 1 thread beside" in line
    assert "fp32 as fast" in line and "OpenMP spin count 10000" in line
    assert "spin" not in replace(RECORD, settings=replace(RECORD.settings, spin_count=None)).summary()


def test_summary_says_when_the_machine_was_busy():
    assert "busy" not in RECORD.summary()  # load 0.50 on 2 CPUs
    busy = replace(RECORD, load_average="5.10 4.00 3.00")
    assert busy.busy and "measured while the machine was busy, load 5.10" in busy.summary()
    assert not replace(RECORD, load_average="n/a").busy


def test_a_busy_tuning_is_worth_redoing_only_on_a_quiet_machine():
    busy = replace(RECORD, load_average="5.10 4.00 3.00")
    assert busy.worth_retuning("0.40 1.00 2.00") and not busy.worth_retuning("3.50 3.00 3.00")
    assert not RECORD.worth_retuning("0.10 0.10 0.10")  # measured quiet: kept
    assert not busy.worth_retuning("n/a")  # no load figure (Windows): kept


def test_the_hard_stop_leaves_out_a_measurement_that_would_end_past_it():
    now = [0.0]

    def measure(c):
        now[0] += 3.0
        return {"t": 0.01 * c}

    samples = alternate([1, 2, 3], measure, min_rounds=2, hard_deadline=7.0, clock=lambda: now[0])
    assert [c for c, parts in samples.items() if parts] == [1, 2] and now[0] == 6.0  # a third would end at 9
    assert pick(samples, "t") == 1
