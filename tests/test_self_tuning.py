"""The self-tuner on real networks with injected timings (engine/synthesis/self_tuning.py): what a CPU where one
int8 thread wins, one where two win, or where the networks differ gets; the chosen counts put in place (where
OpenMP teams can be limited per thread, engine/runtime/openmp.py, the int8 nets are loaded once at every core and
the thread governors start at the tuned counts; elsewhere the nets are loaded at the tuned counts); the record
reused at the next open; an explicit thread count winning; cancel midway leaving everything as it was; a damaged
record ignored with a note; and results unchanged by tuning."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from engine import Cancelled, GenerationSettings, Synthesizer, Voice, run_synthesis
from engine.nets.code_predictor import CodePredictor
from engine.nets.talker import Talker
from engine.runtime import openmp
from engine.runtime.cpu import physical_cores
from engine.runtime.step_graph import StepNet
from engine.runtime.tuning import TuningKey, load_record, record_path, thread_candidates
from engine.synthesis.self_tuning import tune_synthesizer, tuning_key
from tests.bundles import bundle_for
from tests.tuning_stand_in import BUDGET, ONE_WINS, TIME_CAP, TWO_WIN, cpu, quiet


@pytest.fixture(params=["team limits", "no team limits"])
def teams(request, monkeypatch) -> bool:
    """Both ways int8 nets are run: with per-thread OpenMP team limits (libgomp: Linux) and without (elsewhere;
    here libgomp is hidden from the engine)."""
    if request.param == "no team limits":
        monkeypatch.setattr(openmp, "_libgomp", lambda: None)
        return False
    if not openmp.limited():
        pytest.skip("libgomp is not among this process's libraries: OpenMP teams cannot be limited here")
    return True


def ncnn_threads(net) -> int:
    """The thread count the loaded ncnn net itself has (int8 Gemms keep their load-time count)."""
    return int(net.net.opt.num_threads)


def loaded_threads(synth: Synthesizer) -> tuple[int, int]:
    return ncnn_threads(synth._talker.net), ncnn_threads(synth._code_predictor.net)


def governors(synth: Synthesizer) -> tuple[int, int]:
    return synth._talker.governor.current, synth._code_predictor.governor.current


def count_loads(monkeypatch) -> list[tuple[str, int | None]]:
    """Every net loaded from now on: (part, int8 thread count)."""
    loads: list[tuple[str, int | None]] = []
    for cls, part in ((Talker, "talker"), (CodePredictor, "code predictor")):
        def load_net(self, threads, int8_threads=None, _real=cls.load_net, _part=part):
            loads.append((_part, int8_threads))
            return _real(self, threads, int8_threads)
        monkeypatch.setattr(cls, "load_net", load_net)
    return loads


def codes(synth: Synthesizer) -> np.ndarray:
    voice = Voice(xvector=np.random.default_rng(0).standard_normal(synth.hidden_size).astype(np.float32),
                  model_id=synth.model_id)
    settings = GenerationSettings(greedy=True, max_frames=6, ignore_eos=True, codes_only=True)
    return run_synthesis(synth.synthesize("Hello there.", voice, "english", settings)).codes


@pytest.mark.parametrize("timing, expected", [(ONE_WINS, (1, 1)), (TWO_WIN, (2, 2)),
                                              (cpu({1: 30, 2: 45}, {1: 90, 2: 60}), (1, 2))])
def test_the_faster_int8_thread_count_is_put_in_place(tuning_q8, tuning_cache, monkeypatch, teams, timing, expected):
    synth = Synthesizer(tuning_q8)
    cores = synth.threads
    assert synth.tuning_needed and synth.tuning is None
    assert loaded_threads(synth) == ((cores, cores) if teams else (StepNet.INT8_THREADS,) * 2)
    before = (synth._talker.net, synth._code_predictor.net)
    loads = count_loads(monkeypatch)
    timed_at: set[tuple[str, int, int]] = set()

    def timing_seen(part, candidate, seconds):  # each count is timed on a net running at that count
        if part in ("talker", "code predictor"):
            owner = synth._talker if part == "talker" else synth._code_predictor
            timed_at.add((part, candidate, owner.net.weight_threads))
        return timing(part, candidate, seconds)

    record = tune_synthesizer(synth, timing=timing_seen, budget=BUDGET, time_cap=TIME_CAP)
    s = record.settings
    assert (s.talker_threads, s.code_predictor_threads) == expected
    counts = thread_candidates(physical_cores())
    assert {(p, c) for p, c, _ in timed_at} == {(p, c) for p in ("talker", "code predictor") for c in counts}
    assert all(c == w for _, c, w in timed_at)
    # the CPU's generation figure at the chosen counts, for the device choice's "auto"
    ms = {(1, 1): 25 + 68, (2, 2): 40 + 107, (1, 2): 30 + 60}[expected]
    assert record.device_ms == {"cpu": ms}
    assert synth.thread_counts == governors(synth) == expected
    if teams:  # one net per part, loaded at every core; its teams are limited to the governor's count
        assert loads == [] and (synth._talker.net, synth._code_predictor.net) == before
        assert loaded_threads(synth) == (cores, cores)
        assert synth._talker.governor.max_threads == synth._code_predictor.governor.max_threads == cores
    else:  # a net per count, the winners kept
        assert loads and all(n != StepNet.INT8_THREADS for _, n in loads)
        assert loaded_threads(synth) == expected
    assert not synth.tuning_needed and synth.tuning == record
    # the next open reads the record: the governors start at the tuned counts (the nets loaded at them where
    # teams cannot be limited)
    again = Synthesizer(tuning_q8)
    assert not again.tuning_needed and again.tuning == record and again.tuning_note is None
    assert again.thread_counts == governors(again) == expected
    assert loaded_threads(again) == ((cores, cores) if teams else expected)


STREAM_CONFIGS = [(1, True, 1), (1, True, 2), (2, True, 1), (2, True, 2), (2, False, 2)]  # (generation, beside, decoder)


@pytest.mark.parametrize("fastest", STREAM_CONFIGS)
def test_streaming_arrangement_follows_the_streamed_timing(tuning_q8, tuning_cache, fastest):
    """Generation's threads are timed together with the decoder's arrangement: on 2 cores a decoder beside two
    generation threads competes for them, so one generation thread beside it, or decoding after each frame, can
    win; whichever does is what a streamed synthesis uses, and what the next open reads."""
    stream = dict.fromkeys(STREAM_CONFIGS, 120)
    stream[fastest] = 90
    synth = Synthesizer(tuning_q8)
    record = tune_synthesizer(synth, timing=cpu({1: 55, 2: 40}, {1: 140, 2: 107}, stream=stream), budget=BUDGET, time_cap=TIME_CAP)
    gen, beside, decoder = fastest
    s = record.settings
    assert (s.streaming_threads, s.overlap_decode, s.decoder_threads) == fastest
    assert (s.talker_threads, s.code_predictor_threads) == (2, 2)  # generation alone: its own timing
    assert (synth.streaming_threads, synth.overlap_decode, synth.decoder_threads) == fastest
    again = Synthesizer(tuning_q8)
    assert (again.streaming_threads, again.overlap_decode, again.decoder_threads) == fastest
    assert Synthesizer(tuning_q8, threads=2).streaming_threads is None  # an explicit count applies everywhere


def test_a_streamed_synthesis_generates_on_the_streaming_count_and_others_on_all(tuning_q8, tuning_cache):
    stream = dict.fromkeys(STREAM_CONFIGS, 120)
    stream[(1, True, 1)] = 90
    synth = Synthesizer(tuning_q8, adaptive_threads=False)  # the governors' own tries would blur the counts
    tune_synthesizer(synth, timing=cpu({1: 55, 2: 40}, {1: 140, 2: 107}, stream=stream), budget=BUDGET, time_cap=TIME_CAP)
    used: list[int] = []
    for part in (synth._talker, synth._code_predictor):
        real = part.net.set_threads
        part.net.set_threads = lambda n, real=real: used.append(n) or real(n)
    voice = Voice(xvector=np.random.default_rng(0).standard_normal(synth.hidden_size).astype(np.float32),
                  model_id=synth.model_id)
    streamed = GenerationSettings(greedy=True, max_frames=4, ignore_eos=True, stream_audio=True)
    run_synthesis(synth.synthesize("Hello there.", voice, "english", streamed))
    assert used[0] == 2 and set(used[1:]) == {1}  # the prompt's prefill runs before any audio is decoded
    assert synth._talker.governor.limit is None and synth._code_predictor.governor.limit is None
    used.clear()
    codes(synth)  # not streamed: generation alone, on the tuned two
    assert used and set(used) == {2}


def test_decoder_precision_is_chosen_only_where_auto_allows_it(tuning_q8, tuning_cache):
    bf16_faster = cpu({1: 25}, {1: 68}, decode={"fp32": 40, "bf16": 25})
    auto = Synthesizer(tuning_q8, decoder_precision="auto")
    record = tune_synthesizer(auto, timing=bf16_faster, budget=BUDGET, time_cap=TIME_CAP)
    assert record.settings.decoder_bf16_faster is True
    assert auto.decoder_precision == "bf16"
    exact = Synthesizer(tuning_q8, decoder_precision="fp32")
    assert exact.tuning == record and exact.decoder_precision == "fp32"  # the user's exact decoder stays
    assert Synthesizer(tuning_q8, decoder_precision="auto").decoder_precision == "bf16"
    tune_synthesizer(auto, timing=cpu({1: 25}, {1: 68}, decode={"fp32": 25, "bf16": 40}), budget=BUDGET, time_cap=TIME_CAP)
    assert auto.decoder_precision == "fp32"


def test_an_explicit_thread_count_wins(tuning_q8, tuning_cache, teams):
    synth = Synthesizer(tuning_q8, threads=1)
    record = tune_synthesizer(synth, timing=TWO_WIN, budget=BUDGET, time_cap=TIME_CAP)
    assert (record.settings.talker_threads, record.settings.code_predictor_threads) == (2, 2)  # the machine's
    assert synth.thread_counts == governors(synth) == loaded_threads(synth) == (1, 1)
    assert Synthesizer(tuning_q8, threads=1).thread_counts == (1, 1)
    assert Synthesizer(tuning_q8).thread_counts == (2, 2)


def test_cancel_midway_leaves_everything_as_it_was(tuning_q8, tuning_cache, teams):
    synth = Synthesizer(tuning_q8)
    before = (synth.thread_counts, governors(synth), synth._talker.net, synth._code_predictor.net,
              synth.decoder_threads)
    asked = []

    def cancel():
        asked.append(1)
        return len(asked) > 5

    with pytest.raises(Cancelled):
        tune_synthesizer(synth, timing=TWO_WIN, cancel=cancel, budget=BUDGET, time_cap=TIME_CAP)
    assert (synth.thread_counts, governors(synth), synth._talker.net, synth._code_predictor.net,
            synth.decoder_threads) == before
    assert synth.tuning_needed and load_record(tuning_key(synth._bundle)).record is None
    codes(synth)  # still works


def test_tuning_changes_no_result(tuning_q8, tuning_cache, teams):
    """Codes at every core, then at the tuned one thread (the same int8 nets with their teams limited, or nets
    loaded for one thread), then at two again: the same codes (the governors held still to make sure)."""
    synth = Synthesizer(tuning_q8, adaptive_threads=False)
    before = codes(synth)
    tune_synthesizer(synth, timing=ONE_WINS, budget=BUDGET, time_cap=TIME_CAP)
    assert synth.thread_counts == (1, 1)
    np.testing.assert_array_equal(codes(synth), before)
    assert (synth._talker.net.weight_threads, synth._code_predictor.net.weight_threads) == (1, 1)
    tune_synthesizer(synth, timing=TWO_WIN, budget=BUDGET, time_cap=TIME_CAP)
    assert synth.thread_counts == (2, 2)
    np.testing.assert_array_equal(codes(synth), before)


def test_progress_rises_to_the_end(tuning_q8, tuning_cache):
    seen = []
    tune_synthesizer(Synthesizer(tuning_q8), timing=ONE_WINS, progress=lambda f, m: seen.append((f, m)),
                     budget=BUDGET, time_cap=TIME_CAP)
    fractions = [f for f, _ in seen]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0 and all(m for _, m in seen)


def test_a_damaged_record_is_ignored_with_a_note(tuning_q8, tuning_cache):
    path = record_path(tuning_key(__import__("engine").Bundle.open(tuning_q8)), tuning_cache)
    path.parent.mkdir(parents=True)
    path.write_bytes(b'{"format": "qwen3tts-tuning", "version": 1, "key": 7}')
    synth = Synthesizer(tuning_q8)
    assert synth.tuning is None and synth.tuning_needed
    assert str(path) in synth.tuning_note and "not usable" in synth.tuning_note


def test_the_key_names_this_cpu_and_the_bundle(tuning_q8):
    from engine import Bundle

    key = tuning_key(Bundle.open(tuning_q8))
    assert isinstance(key, TuningKey) and key.precision == "q8" and key.cores >= 1 and key.ncnn
    assert "talker" in key.model and key.device == "cpu"
    assert tuning_key(Bundle.open(bundle_for("tiny06b", "fp32"))).digest() != key.digest()


def test_a_tuning_made_on_a_busy_machine_is_redone_when_it_is_quiet(tuning_q8, tuning_cache, teams, monkeypatch):
    quiet(monkeypatch, load=9.0)  # other programs held the cores while it was measured
    record = tune_synthesizer(Synthesizer(tuning_q8), timing=ONE_WINS, budget=BUDGET, time_cap=TIME_CAP)
    assert record.busy and "busy" in record.summary()
    still_busy = Synthesizer(tuning_q8)
    assert still_busy.tuning == record and not still_busy.tuning_needed  # used while the machine stays busy
    assert still_busy.thread_counts == (1, 1)
    quiet(monkeypatch)
    later = Synthesizer(tuning_q8)
    assert later.tuning == record and later.tuning_needed  # its counts apply until the new tuning
    assert later.thread_counts == (1, 1)
    tune_synthesizer(later, timing=TWO_WIN, budget=BUDGET, time_cap=TIME_CAP)
    assert not later.tuning_needed and not later.tuning.busy and later.thread_counts == (2, 2)
    assert not Synthesizer(tuning_q8).tuning_needed


def _a_gpu() -> None:
    from engine.runtime.device import scan_gpus

    if not scan_gpus().gpus:
        pytest.skip("no Vulkan device here (CI installs lavapipe: mesa-vulkan-drivers, libvulkan1)")


@pytest.mark.parametrize("gpu_ms, on_gpu", [(50.0, True), (500.0, False)])
def test_auto_uses_a_gpu_only_where_the_tuning_measured_it_faster(tuning_cache, monkeypatch, gpu_ms, on_gpu):
    _a_gpu()
    import engine.runtime.device as dev

    # CI's GPU is lavapipe, which the tuner never times (and a record with a figure for it is refused): here it
    # poses as a hardware GPU
    scan = dev.scan_gpus()
    monkeypatch.setattr(dev, "_scan", [replace(scan, gpus=tuple(replace(g, kind="integrated") for g in scan.gpus))])
    bundle = bundle_for("tiny06b", "fp32")
    timing = cpu({1: 30, 2: 45}, {1: 60, 2: 90})  # the CPU: 90 ms per frame

    def with_gpu(part, candidate, seconds):
        return gpu_ms / 1000 if part == "gpu" else timing(part, candidate, seconds)

    record = tune_synthesizer(Synthesizer(bundle, device="cpu"), timing=with_gpu, budget=BUDGET, time_cap=TIME_CAP)
    assert record.device_ms == {"cpu": 90.0, "gpu:0": gpu_ms}
    assert record.settings.gpu_faster is on_gpu
    assert ("gpu:0 faster than the CPU" in record.summary()) is on_gpu
    chosen = [f.value for f in record.figures if f.setting == "device" and f.chosen]
    assert chosen == (["gpu:0 (" + chosen[0].split("(", 1)[1]] if on_gpu else ["cpu"])
    # the next open with the default device ("auto") follows the measurement
    again = Synthesizer(bundle)
    assert again.device.on_gpu is on_gpu and (again.device.name == "gpu:0") is on_gpu


def test_a_software_gpu_is_not_timed(tuning_cache):
    _a_gpu()
    record = tune_synthesizer(Synthesizer(bundle_for("tiny06b", "fp32"), device="cpu"),
                              timing=cpu({1: 30, 2: 45}, {1: 60, 2: 90}), budget=BUDGET, time_cap=TIME_CAP)
    assert list(record.device_ms) == ["cpu"] and record.settings.gpu_faster is None
    assert any(f.setting == "device" and "not timed" in f.part for f in record.figures)
    assert not Synthesizer(bundle_for("tiny06b", "fp32")).device.on_gpu
