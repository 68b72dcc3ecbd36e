"""Greedy synthesis against the official implementation, case by case (tests/fixtures/outputs/*/synth_*.npz).

Each case is checked in stages so a mismatch points at its cause: token ids, prefill and trailing rows, the
raw talker logits of the first steps (teacher-forced with the official codes), then the whole greedy run
with the official x-vector / reference codes injected, then the whole run again with the voice built by our
own front end from the fixture's reference audio.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest

from engine.synthesis.synthesizer import Synthesizer
from engine.types import GenerationSettings
from engine.voice import Voice
from tests.bundles import OUTPUTS, bundle_for

AUDIO = Path(__file__).resolve().parent / "fixtures" / "audio"
CASES = sorted(OUTPUTS.glob("*/synth_*.npz")) if OUTPUTS.is_dir() else []
CORE_PARTS = ("text", "talker", "codec_decoder")
FRONT_END_PARTS = ("speaker", "codec_encoder")
# With identical codes the waveform is the codec decoder's output, so it gets the decoder's own bound
# (tests/test_codec_decoder.py); docs/testing.md states the same. Worst case measured: 5.5e-6 (peaks of 1.0).
WAV_ATOL = 1e-4



def test_synth_fixtures_present():
    assert CASES, "no synth fixtures: run tests/reference/make_fixtures.py"


def case_id(path: Path) -> str:
    return f"{path.parent.name}/{path.stem}"


@functools.cache
def load_case(path: Path) -> dict:
    with np.load(path, allow_pickle=False) as z:
        d = {k: z[k] for k in z.files}
    for k in ("text", "language", "mode", "ref_audio", "ref_text", "ended_by"):
        if k in d:
            d[k] = str(d[k])
    d["non_streaming"] = bool(d["non_streaming"])
    d["max_new_tokens"] = int(d["max_new_tokens"])
    return d


@functools.cache
def synth_for(model: str, with_front_end: bool = False) -> Synthesizer:
    parts = CORE_PARTS + (FRONT_END_PARTS if with_front_end else ())
    return Synthesizer(bundle_for(model, "fp32", parts=parts), decoder_precision="fp32")  # the exact decoder


def injected_voice(synth: Synthesizer, d: dict) -> Voice:
    icl = d["mode"] == "icl"
    return Voice(xvector=d["xvector"].astype(np.float32), model_id=synth.model_id,
                 ref_codes=d["ref_codes"].astype(np.int64) if icl else None, ref_text=d["ref_text"] if icl else None)


def greedy(d: dict) -> GenerationSettings:
    return GenerationSettings(greedy=True, max_frames=d["max_new_tokens"] - 1, non_streaming_text=d["non_streaming"])


def run(synth: Synthesizer, d: dict, voice: Voice):
    events = list(synth.synthesize(d["text"], voice, d["language"], greedy(d)))
    frames = [e for e in events if hasattr(e, "index")]
    result = events[-1]
    assert [f.index for f in frames] == list(range(len(frames)))
    return result


def assert_codes(got: np.ndarray, ref: np.ndarray) -> None:
    n = min(len(got), len(ref))
    bad = np.argwhere(got[:n] != ref[:n])
    first = f"first mismatch at frame {bad[0][0]} group {bad[0][1]}" if len(bad) else "common prefix identical"
    assert got.shape == ref.shape and not len(bad), f"codes {got.shape} vs official {ref.shape}; {first}"


# ------------------------------------------------------------------------------------------------ stages


@pytest.mark.parametrize("path", CASES, ids=case_id)
def test_token_ids(path):
    d = load_case(path)
    synth = synth_for(path.parent.name)
    assert synth._tokenizer.target_ids(d["text"]) == d["input_ids"].tolist()
    if d["mode"] == "icl":
        assert synth._tokenizer.reference_ids(d["ref_text"]) == d["ref_ids"].tolist()


@pytest.mark.parametrize("path", CASES, ids=case_id)
def test_prefill_and_trailing_rows(path):
    d = load_case(path)
    synth = synth_for(path.parent.name)
    prompt = synth._build_prompt(d["text"], injected_voice(synth, d), d["language"], d["non_streaming"])
    assert_prompt_rows(prompt, d)


def assert_prompt_rows(prompt, d: dict) -> None:
    """Prefill and trailing rows equal the official ones (shapes exact, values within fp32 noise)."""
    assert prompt.prefill.shape == d["prefill"].shape
    assert prompt.trailing.shape == d["trailing"].shape
    np.testing.assert_allclose(prompt.prefill, d["prefill"], rtol=0, atol=1e-5)
    np.testing.assert_allclose(prompt.trailing, d["trailing"], rtol=0, atol=1e-5)


@pytest.mark.parametrize("path", CASES, ids=case_id)
def test_first_step_logits(path):
    """Raw talker logits of the first k steps, fed the official prefill and (teacher-forced) official codes."""
    assert_first_step_logits(synth_for(path.parent.name), load_case(path))


def assert_first_step_logits(synth: Synthesizer, d: dict) -> None:
    """Teacher-forced: the official prefill, then each official frame plus its text row; raw logits compared."""
    talker, cp = synth._talker, synth._code_predictor
    ref, codes, trailing = d["logits"], d["codes"], d["trailing"]
    seq, _, logits = talker.start(d["prefill"])
    np.testing.assert_allclose(logits, ref[0], rtol=0, atol=1e-4)
    tpad = synth._text_rows([synth._ids.tts_pad])[0]
    for k in range(1, min(len(ref), len(codes) + 1)):
        text_row = trailing[k - 1] if k - 1 < len(trailing) else tpad
        _, logits = talker.step(seq, cp.feedback(codes[k - 1]) + text_row)
        np.testing.assert_allclose(logits, ref[k], rtol=0, atol=1e-4, err_msg=f"step {k}")


@pytest.mark.parametrize("path", CASES, ids=case_id)
def test_greedy_codes_and_wav_injected_voice(path):
    d = load_case(path)
    synth = synth_for(path.parent.name)
    result = run(synth, d, injected_voice(synth, d))
    assert_codes(result.codes, d["codes"])
    assert result.ended_by == d["ended_by"]
    assert result.audio.shape == d["wav"].shape
    np.testing.assert_allclose(result.audio, d["wav"], rtol=0, atol=WAV_ATOL)


@pytest.mark.parametrize("path", CASES, ids=case_id)
def test_greedy_codes_and_wav_own_front_end(path):
    """The whole product path: reference file -> our loader, mel, x-vector (and reference codes for ICL)."""
    d = load_case(path)
    synth = synth_for(path.parent.name, with_front_end=True)
    voice = synth.create_voice(str(AUDIO / d["ref_audio"]), ref_text=d["ref_text"] if d["mode"] == "icl" else None)
    np.testing.assert_allclose(voice.xvector, d["xvector"], rtol=0, atol=1e-4)
    if d["mode"] == "icl":
        np.testing.assert_array_equal(voice.ref_codes, d["ref_codes"])
    result = run(synth, d, voice)
    assert_codes(result.codes, d["codes"])
    assert result.ended_by == d["ended_by"]
    np.testing.assert_allclose(result.audio, d["wav"], rtol=0, atol=WAV_ATOL)


@pytest.mark.parametrize("path", CASES, ids=case_id)
def test_streaming_audio_equals_final_audio(path):
    """stream_audio=True: the chunks played while generating add up to the official waveform."""
    d = load_case(path)
    synth = synth_for(path.parent.name)
    settings = greedy(d)
    settings.stream_audio = True
    events = list(synth.synthesize(d["text"], injected_voice(synth, d), d["language"], settings))
    chunks = [e for e in events if hasattr(e, "start_sample")]
    result = events[-1]
    assert_codes(result.codes, d["codes"])
    played = np.concatenate([c.samples for c in chunks]) if chunks else np.zeros(0, np.float32)
    assert [c.start_sample for c in chunks] == list(np.cumsum([0] + [len(c.samples) for c in chunks])[:-1])
    np.testing.assert_allclose(result.audio[len(result.audio) - len(played):], played, rtol=0, atol=0)
    np.testing.assert_allclose(result.audio, d["wav"], rtol=0, atol=WAV_ATOL)


def side_by_side_streamed(synth: Synthesizer, cases: list[dict], batch_size: int) -> tuple[list, dict, dict]:
    """synthesize_many over the cases with stream_audio: (the events in order, each job's chunks, its result)."""
    from engine.types import AudioChunk, SynthesisJob, SynthesisResult

    jobs = [SynthesisJob(d["text"], injected_voice(synth, d), d["language"], max_frames=d["max_new_tokens"] - 1)
            for d in cases]
    settings = greedy(cases[0])
    settings.stream_audio = True
    events = list(synth.synthesize_many(jobs, settings, batch_size=batch_size))
    assert not [e for e in events if e.error is not None]
    chunks = {i: [e.event for e in events if e.job == i and isinstance(e.event, AudioChunk)] for i in range(len(jobs))}
    results = {e.job: e.event for e in events if isinstance(e.event, SynthesisResult)}
    return events, chunks, results


@pytest.mark.parametrize("model", sorted({p.parent.name for p in CASES}))
def test_streaming_side_by_side_equals_final_audio(model):
    """Jobs side by side with stream_audio (x-vector and ICL voices, ending at different frames, more jobs than
    the batch size): each job's chunks come in order after the frames they decode and before its result, add up
    to its result's audio, and that is the official waveform, exactly as one streamed synthesis."""
    from engine.types import AudioChunk, FrameEvent

    synth = synth_for(model)
    everything = [load_case(p) for p in CASES if p.parent.name == model]
    for non_streaming in sorted({d["non_streaming"] for d in everything}):  # a run-wide setting
        cases = [d for d in everything if d["non_streaming"] == non_streaming]
        events, chunks, results = side_by_side_streamed(synth, cases, batch_size=min(3, max(1, len(cases) - 1)))
        for i, d in enumerate(cases):
            result = results[i]
            assert_codes(result.codes, d["codes"])
            played = np.concatenate([c.samples for c in chunks[i]]) if chunks[i] else np.zeros(0, np.float32)
            assert [c.start_sample for c in chunks[i]] == list(np.cumsum([0] + [len(c.samples) for c in chunks[i]])[:-1])
            np.testing.assert_allclose(result.audio[len(result.audio) - len(played):], played, rtol=0, atol=0)
            assert len(played) == len(result.codes) * 1920
            np.testing.assert_allclose(result.audio, d["wav"], rtol=0, atol=WAV_ATOL)
            frames_seen, done = 0, False
            for e in events:
                if e.job != i:
                    continue
                assert not done, f"job {i}: an event after its result"
                frames_seen += isinstance(e.event, FrameEvent)
                if isinstance(e.event, AudioChunk):  # a chunk never comes before the frames it decodes
                    assert e.event.start_sample + len(e.event.samples) <= frames_seen * 1920
                done = e.event is result


@pytest.mark.parametrize("model", sorted({p.parent.name for p in CASES})[:1])
def test_streaming_side_by_side_sends_audio_between_the_steps(model):
    """Side by side, a streamed job's first frame is decoded at once after it (its first audio), then its frames
    FRAMES_PER_PUSH at a time, each push right after the frame that completes it, the rest once it has ended: so
    its audio goes out while the other jobs are still generating, and it is the official waveform."""
    from engine.synthesis.job_audio import FRAMES_PER_PUSH
    from engine.types import AudioChunk, FrameEvent

    synth = synth_for(model)
    cases = [load_case(p) for p in CASES if p.parent.name == model]
    cases = [d for d in cases if d["non_streaming"] == cases[0]["non_streaming"]]
    events, chunks, results = side_by_side_streamed(synth, cases, batch_size=min(4, len(cases)))
    for i, d in enumerate(cases):
        np.testing.assert_allclose(results[i].audio, d["wav"], rtol=0, atol=WAV_ATOL)
        made, pushed_at = 0, []
        for prev, e in zip([None, *events], events, strict=False):
            if e.job != i:
                continue
            made += isinstance(e.event, FrameEvent)
            if isinstance(e.event, AudioChunk) and not (prev.job == i and isinstance(prev.event, AudioChunk)):
                pushed_at.append((made, prev.job == i and isinstance(prev.event, FrameEvent)))
            if isinstance(e.event, AudioChunk):
                assert e.event.start_sample + len(e.event.samples) <= made * 1920
        n = len(results[i].codes)
        want = [(k, True) for k in [1, *range(1 + FRAMES_PER_PUSH, n + 1, FRAMES_PER_PUSH)]]
        if want[-1][0] != n:
            want.append((n, False))  # the frames left, when the job has ended (after the step's frames)
        assert pushed_at == want
        assert sum(len(c.samples) for c in chunks[i]) == n * 1920
