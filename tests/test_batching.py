"""Batched generation changes no result.

- the step-graph rewrite (engine/runtime/step_graph.py) on a hand-written .param;
- talker / code-predictor rows run together are bit-identical to the same rows run alone, for every row count
  up to the largest batch, at each fixture precision whose kernels guarantee it (float bundles: one call per
  row); a float bundle's results are the same at 1 and 2 threads (the thread governor switches between them);
- synthesize_many over the official fixture cases (x-vector and ICL voices with different reference lengths,
  jobs ending at different frames, more jobs than the batch size): greedy codes equal the official codes and
  synthesize() alone; with sampling and seeds, each job's audio equals synthesize() alone with its seed;
- cancelling one job or the whole run, and a bad job failing alone.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from engine import DEFAULT_BATCH_SIZE, Cancelled, GenerationSettings, SynthesisResult, TextError
from engine.errors import BundleError
from engine.nets.code_predictor import CodePredictor
from engine.nets.talker import Talker
from engine.runtime.bundle import Bundle
from engine.runtime.ncnn_graph import parse_param
from engine.runtime.stacked_graph import StackedNet, stacked_attention_param_text
from engine.runtime.step_graph import StepNet, step_param_text
from engine.synthesis.synthesizer import Synthesizer
from engine.types import MAX_BATCH_SIZE, SynthesisJob
from tests.bundles import OUTPUTS, bundle_for, fixture_models
from tests.test_synth_parity import injected_voice, load_case

MODELS = [m for m in ("tiny06b", "tiny17b") if m in fixture_models()]  # tiny17b: the projection with a bias


def test_step_graph_rewrite():
    param = "\n".join([
        "7767517", "9 12",
        "Input in0 0 1 in0", "Input mask 0 1 mask", "Split mask__split 1 1 mask mask__s0",
        "Input k_in_0 0 1 k_in_0", "Input v_in_0 0 1 v_in_0",
        "InnerProduct ip_1 1 1 in0 ip_1 0=8 1=1 2=32 31=2",
        "Slice s 1 3 ip_1 q k v -23300=3,4,2,2 1=-1",
        "SDPA sdpa_0 6 3 q k v mask__s0 k_in_0 v_in_0 att_0 k_out_0 v_out_0 5=1 6=0.5 7=1",
        "Squeeze sq 1 1 att_0 sq 1=1",
    ])
    text, sites = step_param_text(param)
    lines = text.splitlines()
    assert lines[0] == "7767517"
    assert [(s.q, s.k, s.v, s.out, s.params) for s in sites] == [("q", "k", "v", "att_0", ("5=1", "6=0.5", "7=1"))]
    types = [line.split()[0] for line in lines[2:]]
    assert types == ["Input", "Input", "Split", "Input", "Input", "InnerProduct", "Slice", "SDPA", "Noop"]
    assert lines[7] == "InnerProduct ip_1 1 1 in0 ip_1 0=8 1=1 2=32 31=2"  # weights and options untouched
    assert lines[9] == "SDPA sdpa_0 6 3 q k v mask__s0 k_in_0 v_in_0 att_0 k_out_0 v_out_0 5=1 6=0.5 7=1"
    layer_count, blob_count = map(int, lines[1].split())
    assert layer_count == len(lines) - 2
    assert blob_count == len({b for line in lines[2:] for b in line.split()[4 + int(line.split()[2]):][:int(line.split()[3])]})


def test_step_graph_rejects_side_blobs_outside_attention():
    """The mask and the caches are not fed when attention is cut out, so no other layer may read them."""
    param = "\n".join([
        "7767517", "4 6",
        "Input in0 0 1 in0", "Input mask 0 1 mask",
        "BinaryOp add 2 1 in0 mask sum 0=0",
        "SDPA sdpa_0 5 3 sum sum sum k_in_0 v_in_0 att_0 k_out_0 v_out_0 6=0.5 7=1",
    ])
    with pytest.raises(BundleError, match="reads a mask or cache blob"):
        step_param_text(param)


@functools.cache
def _nets(model: str, precision: str, threads: int = 2) -> tuple[Talker, CodePredictor]:
    bundle = Bundle.open(bundle_for(model, precision, parts=("talker",)))
    fixed = StepNet.INT8_THREADS
    StepNet.INT8_THREADS = threads  # q8 Gemms take their thread count at load and never run on more
    try:
        talker, cp = Talker(bundle, threads), CodePredictor(bundle, threads)
    finally:
        StepNet.INT8_THREADS = fixed
    talker.net.set_threads = cp.net.set_threads = lambda n: None  # results do not depend on it; keep runs alike
    return talker, cp


@pytest.mark.parametrize("precision,threads", [("fp32", 2), ("bf16", 2), ("q8", 1), ("q8", 2)])
@pytest.mark.parametrize("model", MODELS)
def test_rows_identical_to_alone(model, precision, threads):
    """Every row count 1..MAX_BATCH_SIZE: each sequence's talker hidden/logits over several steps and each
    frame's code-predictor logits are bit-identical to the sequence run alone (q8: in one call, at 1 and 2
    threads)."""
    talker, cp = _nets(model, precision, threads)
    if precision == "q8":
        assert talker.net.max_rows == cp.net.max_rows == MAX_BATCH_SIZE  # all rows in one call
        assert talker.net.net.opt.num_threads == cp.net.net.opt.num_threads == threads
        assert talker.net.weight_threads == cp.net.weight_threads == threads  # no team limit: all `threads` run
    rng = np.random.default_rng(7)
    h = talker.hidden_size
    n = MAX_BATCH_SIZE
    prompts = [rng.standard_normal((length, h)).astype(np.float32) for length in rng.integers(3, 24, n)]
    steps = rng.standard_normal((n, 4, h)).astype(np.float32)
    hidden = rng.standard_normal((n, h)).astype(np.float32)
    c0 = rng.integers(0, cp.codebook_size, n)

    def talker_run(ids):
        seqs, outs = [], []
        for j in ids:
            seq, hid, logits = talker.start(prompts[j])
            seqs.append(seq)
            outs.append([(hid, logits)])
        for s in range(steps.shape[1]):
            hid, logits = talker.step_many(seqs, steps[ids, s])
            for k in range(len(ids)):
                outs[k].append((hid[k], logits[k]))
        return outs

    def cp_run(ids):
        logs = [[] for _ in ids]
        chooses = [lambda lg, g, k=k: (logs[k].append(np.array(lg)), int(np.argmax(lg)))[1] for k in range(len(ids))]
        return cp.predict_many(hidden[ids], c0[ids], chooses), logs

    alone_t = [talker_run([j])[0] for j in range(n)]
    alone_c = [cp_run([j]) for j in range(n)]
    for r in range(2, n + 1):
        ids = list(range(r))
        for j, out in zip(ids, talker_run(ids), strict=True):
            for (a, b), (c, d) in zip(out, alone_t[j], strict=True):
                assert np.array_equal(a, c) and np.array_equal(b, d), f"talker row {j} of {r} differs"
        codes, logs = cp_run(ids)
        for j in ids:
            assert np.array_equal(codes[j], alone_c[j][0][0]), f"code predictor row {j} of {r}: codes differ"
            assert all(np.array_equal(x, y) for x, y in zip(logs[j], alone_c[j][1][0], strict=True))


@pytest.mark.parametrize("model", MODELS)
def test_q8_code_predictor_attention_inside_equals_the_cut_out_attention(model, monkeypatch):
    """The q8 code predictor's graph with attention inside (rows stacked as heads by Permute/Reshape; positions 0
    and 1 in one call, their attention in two calls of an SDPA net) gives every logit bit-identical to the step
    graph with attention cut out and run per call in its own SDPA net, for one row and for several rows."""
    from engine.nets import code_predictor

    bundle = Bundle.open(bundle_for(model, "q8", parts=["talker"]))
    inside = CodePredictor(bundle, 1)
    assert isinstance(inside.net, StackedNet) and inside.net.max_rows == MAX_BATCH_SIZE
    monkeypatch.setattr(code_predictor, "stacked_code_predictor_net", lambda *a: None)
    cut_out = CodePredictor(bundle, 1)
    assert isinstance(cut_out.net, StepNet)
    rng = np.random.default_rng(3)
    for rows in (1, 3, MAX_BATCH_SIZE):
        hidden = rng.standard_normal((rows, inside.hidden_size)).astype(np.float32)
        c0 = rng.integers(0, inside.codebook_size, rows)
        runs = []
        for cp in (inside, cut_out):
            logs: list = []
            chooses = [lambda lg, g, k=k, logs=logs: (logs.append((k, g, np.array(lg))), int(np.argmax(lg)))[1]
                       for k in range(rows)]
            runs.append((cp.predict_many(hidden, c0, chooses), logs))
        (codes_a, logs_a), (codes_b, logs_b) = runs
        assert np.array_equal(codes_a, codes_b)
        assert len(logs_a) == len(logs_b) == rows * (inside.groups - 1)
        for (ka, ga, a), (kb, gb, b) in zip(logs_a, logs_b, strict=True):
            assert (ka, ga) == (kb, gb) and np.array_equal(a, b), f"rows {rows}: row {ka} group {ga} differs"


@pytest.mark.parametrize("model", MODELS)
def test_q8_code_predictor_weight_free_layers_run_on_one_thread(model):
    """In the q8 code predictor's graph with attention inside, every layer that only moves or combines values
    (Reshape, Permute, the elementwise layers, norms, rotary) carries ncnn's one-thread featmask, the layers that
    stack rows as heads included: on two threads each would otherwise wake the second thread for almost no work.
    Only the weight layers (Gemm), the attention itself and the graph's plumbing (Input, Split, Noop) may use
    every thread."""
    bundle = Bundle.open(bundle_for(model, "q8", parts=["talker"]))
    meta = bundle.part("talker")
    spec = meta["code_predictor"]
    text = bundle.file(f"{meta['cp_graph']}.param").read_text(encoding="utf-8")
    layers = parse_param(stacked_attention_param_text(text, spec["heads"], spec["head_dim"]))
    stacking = [layer.name for layer in layers
                if layer.name.endswith(("__rowsfirst", "__stack", "__unstack", "__headsfirst"))]
    assert len(stacking) == 8 * int(spec["layers"])  # q, k, v in and the output back, each a Permute and a Reshape
    many = {layer.name for layer in layers if layer.params.get("31", "0") != str(1 << 7)}
    assert {layer.type for layer in layers if layer.name in many} <= {"Gemm", "SDPA", "Input", "Split", "Noop"}
    assert not many & set(stacking)


@pytest.mark.parametrize("model", MODELS)
def test_float_results_same_at_any_thread_count(model):
    """The thread governor may run a sequence's calls at 1 or 2 threads, batched or alone: a float bundle's
    talker steps and code-predictor logits must be bit-identical either way."""
    bundle = Bundle.open(bundle_for(model, "fp32", parts=("talker",)))
    talker, cp = Talker(bundle, 2, adaptive_threads=False), CodePredictor(bundle, 2, adaptive_threads=False)
    rng = np.random.default_rng(3)
    prompt = rng.standard_normal((9, talker.hidden_size)).astype(np.float32)
    steps = rng.standard_normal((3, talker.hidden_size)).astype(np.float32)

    def run(threads):
        talker.governor.current = cp.governor.current = threads  # the count their next calls run at
        seq, hidden, logits = talker.start(prompt)
        outs = [(hidden, logits)] + [talker.step(seq, s) for s in steps]
        logs = []
        cp.predict(outs[-1][0], 5, lambda lg, g: (logs.append(np.array(lg)), int(np.argmax(lg)))[1])
        return [a for pair in outs for a in pair] + logs

    one, two = run(1), run(2)
    assert all(np.array_equal(a, b) for a, b in zip(one, two, strict=True))


# ------------------------------------------------------------------------------------------------ synthesis


@functools.cache
def _synth(model: str, precision: str = "fp32") -> Synthesizer:
    return Synthesizer(bundle_for(model, precision, parts=("text", "talker", "codec_decoder")), threads=2)


def _cases(model: str) -> list[dict]:
    """The model's streaming-text cases (non_streaming_text is a run-wide setting)."""
    cases = [load_case(p) for p in sorted((OUTPUTS / model).glob("synth_*.npz"))]
    return [d for d in cases if not d["non_streaming"]]


def _results(run, on_frame=None) -> tuple[dict[int, SynthesisResult], dict[int, list[int]], dict[int, Exception]]:
    """Each job's result, frame indices and error; on_frame(job, index) sees every frame as it comes."""
    results, frames, errors = {}, {}, {}
    for ev in run:
        assert (ev.event is None) != (ev.error is None)
        if ev.error is not None:
            errors[ev.job] = ev.error
        elif isinstance(ev.event, SynthesisResult):
            results[ev.job] = ev.event
        else:
            frames.setdefault(ev.job, []).append(ev.event.index)
            if on_frame is not None:
                on_frame(ev.job, ev.event.index)
    return results, frames, errors


@pytest.mark.parametrize("model", MODELS)
def test_greedy_batch_equals_official_and_alone(model):
    synth = _synth(model)
    cases = _cases(model)
    assert len(cases) > 3, "need more jobs than the batch size"
    jobs = [SynthesisJob(d["text"], injected_voice(synth, d), d["language"], max_frames=d["max_new_tokens"] - 1)
            for d in cases]
    assert len({len(d["codes"]) for d in cases}) > 1, "jobs should end at different frames"
    results, frames, errors = _results(synth.synthesize_many(jobs, GenerationSettings(greedy=True), batch_size=3))
    assert not errors
    for i, d in enumerate(cases):
        got = results[i]
        assert np.array_equal(got.codes, d["codes"]), f"job {i}: codes differ from the official run"
        assert got.ended_by == d["ended_by"]
        assert frames[i] == list(range(len(d["codes"])))
        alone = list(synth.synthesize(jobs[i].text, jobs[i].voice, jobs[i].language,
                                      GenerationSettings(greedy=True, max_frames=jobs[i].max_frames)))[-1]
        assert np.array_equal(got.audio, alone.audio), f"job {i}: audio differs from the job alone"


@pytest.mark.parametrize("precision", ["fp32", "q8"])
def test_sampled_batch_equals_alone(precision):
    """Sampling with a seed per job (and a shared one): each job's codes and audio equal the job alone. Jobs end
    at different frames, so q8 sequences move between shared steps and steps alone with the caches they have."""
    synth = _synth(MODELS[0], precision)
    cases = _cases(MODELS[0])[:5]
    caps = [6, 30, 12, 25, 9]
    jobs = [SynthesisJob(d["text"], injected_voice(synth, d), d["language"], max_frames=cap,
                         seed=None if i == 2 else 100 + i) for i, (d, cap) in enumerate(zip(cases, caps, strict=True))]
    settings = GenerationSettings(seed=42)
    results, _, errors = _results(synth.synthesize_many(jobs, settings, batch_size=2))
    assert not errors
    for i, job in enumerate(jobs):
        seed = job.seed if job.seed is not None else settings.seed
        alone = list(synth.synthesize(job.text, job.voice, job.language, GenerationSettings(seed=seed, max_frames=job.max_frames)))[-1]
        assert results[i].seed == seed
        assert np.array_equal(results[i].codes, alone.codes), f"job {i}: codes differ"
        assert np.array_equal(results[i].audio, alone.audio), f"job {i}: audio differs"


STREAM_ATOL = 1e-4  # a streamed decode against another grouping of the same frames (tests/test_codec_decoder.py)


@pytest.mark.parametrize("precision", ["fp32", "q8"])
def test_sampled_streamed_batch_equals_alone_streamed(precision):
    """stream_audio side by side, sampled with a seed per job: each job's codes equal the job streamed alone, its
    chunks follow one another and add up to its result's audio, and that audio is the job's streamed alone (the
    frames a decoder push takes differ with timing: equal within the streaming decoder's bound)."""
    from engine import AudioChunk

    synth = _synth(MODELS[0], precision)
    cases = _cases(MODELS[0])[:5]
    caps = [6, 30, 12, 25, 9]
    jobs = [SynthesisJob(d["text"], injected_voice(synth, d), d["language"], max_frames=cap, seed=100 + i)
            for i, (d, cap) in enumerate(zip(cases, caps, strict=True))]
    events = list(synth.synthesize_many(jobs, GenerationSettings(stream_audio=True), batch_size=2))
    assert not [e for e in events if e.error is not None]
    for i, job in enumerate(jobs):
        mine = [e.event for e in events if e.job == i]
        chunks = [e for e in mine if isinstance(e, AudioChunk)]
        result = mine[-1]
        assert isinstance(result, SynthesisResult)
        alone = list(synth.synthesize(job.text, job.voice, job.language,
                                      GenerationSettings(seed=job.seed, max_frames=job.max_frames, stream_audio=True)))
        assert np.array_equal(result.codes, alone[-1].codes), f"job {i}: codes differ"
        assert [c.start_sample for c in chunks] == list(np.cumsum([0] + [len(c.samples) for c in chunks])[:-1])
        assert np.array_equal(np.concatenate([c.samples for c in chunks]), result.audio)
        np.testing.assert_allclose(result.audio, alone[-1].audio, rtol=0, atol=STREAM_ATOL)
        assert 0 < result.timings.first_audio <= result.timings.total


def test_a_cancelled_streamed_job_stops_and_the_others_stream_on():
    synth = _synth(MODELS[0])
    cases = _cases(MODELS[0])[:3]
    jobs = [SynthesisJob(d["text"], injected_voice(synth, d), d["language"], max_frames=12, seed=5 + i)
            for i, d in enumerate(cases)]
    run = synth.synthesize_many(jobs, GenerationSettings(stream_audio=True), batch_size=3)
    events = []
    for e in run:
        events.append(e)
        if e.job == 1 and e.event is not None and getattr(e.event, "index", None) == 2:
            run.cancel(1)
    cut = next(k for k, e in enumerate(events) if e.error is not None)
    assert events[cut].job == 1 and isinstance(events[cut].error, Cancelled)
    assert not [e for e in events[cut + 1:] if e.job == 1]
    for i in (0, 2):
        result = [e.event for e in events if e.job == i][-1]
        alone = list(synth.synthesize(jobs[i].text, jobs[i].voice, jobs[i].language,
                                      GenerationSettings(seed=5 + i, max_frames=12, stream_audio=True)))[-1]
        assert np.array_equal(result.codes, alone.codes)
        np.testing.assert_allclose(result.audio, alone.audio, rtol=0, atol=STREAM_ATOL)


def test_cancel_one_job_and_bad_job():
    synth = _synth(MODELS[0])
    cases = _cases(MODELS[0])[:3]
    jobs = [SynthesisJob(d["text"], injected_voice(synth, d), d["language"], max_frames=20) for d in cases]
    jobs.insert(1, SynthesisJob("   ", jobs[0].voice))  # empty text fails on its own
    run = synth.synthesize_many(jobs, GenerationSettings(greedy=True, codes_only=True), batch_size=4)
    results, frames, errors = _results(run, lambda job, index: run.cancel(2) if (job, index) == (2, 1) else None)
    assert isinstance(errors[1], TextError)
    assert isinstance(errors[2], Cancelled) and frames[2] == [0, 1]
    for i in (0, 3):
        alone = list(synth.synthesize(jobs[i].text, jobs[i].voice, jobs[i].language,
                                      GenerationSettings(greedy=True, max_frames=20, codes_only=True)))[-1]
        assert np.array_equal(results[i].codes, alone.codes)


def test_close_cancels_all_and_bad_batch_size():
    synth = _synth(MODELS[0])
    d = _cases(MODELS[0])[0]
    jobs = [SynthesisJob(d["text"], injected_voice(synth, d), d["language"], max_frames=50)] * 3
    run = synth.synthesize_many(jobs, GenerationSettings(greedy=True, codes_only=True), batch_size=2)
    first = next(run)
    assert first.event is not None and first.event.index == 0
    run.close()
    with pytest.raises(StopIteration):
        next(run)
    for bad in (0, MAX_BATCH_SIZE + 1, 2.5):
        with pytest.raises(TextError, match="Batch size"):
            synth.synthesize_many(jobs, batch_size=bad)


@pytest.mark.parametrize("model", ["tinycv17b", "tinycv06b", "tinyvd17b"])
def test_speakers_and_designed_voices_batch_equal_official(model):
    """CustomVoice speakers and VoiceDesign descriptions (per-job instruct) batched: the official greedy codes."""
    from tests.test_kinds_parity import load_case as load_kind
    from tests.test_kinds_parity import synth_for as kind_synth

    assert model in fixture_models(), f"the committed fixture model {model} is missing"
    cases = [load_kind(p) for p in sorted((OUTPUTS / model).glob("kind_*.npz"))]
    synth = kind_synth(model)
    for non_streaming in sorted({d["non_streaming"] for d in cases}):
        group = [d for d in cases if d["non_streaming"] == non_streaming]
        jobs = [SynthesisJob(d["text"], d["speaker"] or None, d["language"], max_frames=d["max_new_tokens"] - 1,
                             instruct=d["instruct"] or None) for d in group]
        settings = GenerationSettings(greedy=True, non_streaming_text=non_streaming, codes_only=True)
        results, _, errors = _results(synth.synthesize_many(jobs, settings, batch_size=2))
        assert not errors
        for i, d in enumerate(group):
            assert np.array_equal(results[i].codes, d["codes"]), f"{model} case {i}: codes differ from official"


@pytest.mark.parametrize("precision,expected", [("fp32", 1), ("q8", DEFAULT_BATCH_SIZE)])
def test_suggested_batch_size_follows_the_kernels(precision, expected):
    """q8 steps serve every row in one weight pass, so several jobs side by side pay off; float bundles run one
    sequence per call, so the suggestion is 1 (no faster together, and the first job would end later). Without a
    batch size synthesize_many uses the suggestion: the first `expected` jobs start before any ends."""
    synth = Synthesizer(bundle_for(MODELS[0], precision, parts=("text", "talker", "codec_decoder")), threads=2)
    assert synth.suggested_batch_size == expected
    # weight layers on the threads asked for (q8's int8 Gemms are loaded at that count)
    assert synth.thread_counts == (2, 2)
    d = _cases(MODELS[0])[0]
    jobs = [SynthesisJob(d["text"], injected_voice(synth, d), d["language"], max_frames=3)] * (expected + 1)
    started: set[int] = set()
    for ev in synth.synthesize_many(jobs, GenerationSettings(greedy=True, codes_only=True)):
        if isinstance(ev.event, SynthesisResult):
            break
        started.add(ev.job)
    assert started == set(range(expected))
