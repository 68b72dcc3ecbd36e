"""CustomVoice and VoiceDesign synthesis against the official implementation (tests/fixtures/outputs/*/kind_*.npz,
made by tests/reference/make_fixtures.py with generate_custom_voice / generate_voice_design, greedy).

Staged like test_synth_parity: token ids (target and instruction), prefill and trailing rows (speaker row,
dialect rule, instruct rows, default text mode), raw talker logits of the first steps, then the whole greedy
run (codes identical, waveform within the decoder tolerance), with the audio decoded at the end and streamed.
"""

from __future__ import annotations

import contextlib
import functools
from pathlib import Path

import numpy as np
import pytest

from engine.synthesis.model_kind import InstructIgnoredWarning
from engine.synthesis.synthesizer import Synthesizer
from engine.types import GenerationSettings
from tests.bundles import OUTPUTS, bundle_for
from tests.test_synth_parity import assert_codes, assert_first_step_logits, assert_prompt_rows

CASES = sorted(OUTPUTS.glob("*/kind_*.npz")) if OUTPUTS.is_dir() else []
PARTS = ("text", "talker", "codec_decoder")
# the same bound as test_synth_parity's waveforms: fp32 decoder vs torch, amplitude ~0.1-1
WAV_ATOL = 1e-3


def case_id(path: Path) -> str:
    return f"{path.parent.name}/{path.stem}"


@functools.cache
def load_case(path: Path) -> dict:
    with np.load(path, allow_pickle=False) as z:
        d = {k: z[k] for k in z.files}
    for k in ("text", "language", "speaker", "instruct", "kind", "ended_by"):
        d[k] = str(d[k])
    d["non_streaming"] = bool(d["non_streaming"])
    d["max_new_tokens"] = int(d["max_new_tokens"])
    return d


@functools.cache
def synth_for(model: str) -> Synthesizer:
    return Synthesizer(bundle_for(model, "fp32", parts=PARTS), decoder_precision="fp32")  # the exact decoder


def voice_of(d: dict):
    """The voice argument as a user gives it: the speaker's name (CustomVoice) or None (VoiceDesign)."""
    return d["speaker"] or None


def dropped(synth: Synthesizer, d: dict):
    """The 0.6B CustomVoice model drops the instruct (as upstream) and says so with a warning."""
    if d["instruct"] and not synth.kind.honours_instruct:
        return pytest.warns(InstructIgnoredWarning, match="ignores style instructions")
    return contextlib.nullcontext()


def settings(d: dict, default_mode: bool) -> GenerationSettings:
    """Greedy with the fixture's frame cap; default_mode leaves the text mode to the model (the official
    wrappers' default, recorded in cases.json as default_text_mode)."""
    return GenerationSettings(greedy=True, max_frames=d["max_new_tokens"] - 1,
                              non_streaming_text=None if default_mode else d["non_streaming"])


def test_kind_fixtures_present():
    kinds = {load_case(p)["kind"] for p in CASES}
    assert kinds == {"custom_voice", "voice_design"}, "run tests/reference/make_fixtures.py"


@pytest.mark.parametrize("path", CASES, ids=case_id)
def test_token_ids(path):
    d = load_case(path)
    synth = synth_for(path.parent.name)
    assert synth._tokenizer.target_ids(d["text"]) == d["input_ids"].tolist()
    if len(d["instruct_ids"]):
        assert synth._tokenizer.instruct_ids(d["instruct"]) == d["instruct_ids"].tolist()


@pytest.mark.parametrize("path", CASES, ids=case_id)
def test_prefill_and_trailing_rows(path):
    d = load_case(path)
    synth = synth_for(path.parent.name)
    # the non-streaming cases used the wrappers' default text mode: check it is ours too, and the explicit flag
    for default_mode in ((True, False) if d["non_streaming"] else (False,)):
        with dropped(synth, d):
            prompt = synth._build_prompt(d["text"], voice_of(d), d["language"],
                                        settings(d, default_mode).non_streaming_text, instruct=d["instruct"])
        assert_prompt_rows(prompt, d)


@pytest.mark.parametrize("path", CASES, ids=case_id)
def test_first_step_logits(path):
    """Raw talker logits of the first steps, teacher-forced with the official prefill and codes."""
    assert_first_step_logits(synth_for(path.parent.name), load_case(path))


# audio streamed while generating: one case per model is enough (the stream itself is tested on Base cases)
STREAMED = [p for p in CASES if p.stem in ("kind_cv_eric_zh_dialect", "kind_cv_dylan_zh_instruct_stream",
                                           "kind_vd_zh_stream")]


@pytest.mark.parametrize("path,stream_audio", [(p, False) for p in CASES] + [(p, True) for p in STREAMED],
                         ids=lambda v: case_id(v) if isinstance(v, Path) else ("streamed" if v else "decoded"))
def test_greedy_codes_and_wav(path, stream_audio):
    d = load_case(path)
    synth = synth_for(path.parent.name)
    s = settings(d, default_mode=d["non_streaming"])
    s.stream_audio = stream_audio
    with dropped(synth, d):
        events = list(synth.synthesize(d["text"], voice_of(d), d["language"], s, instruct=d["instruct"]))
    result = events[-1]
    assert_codes(result.codes, d["codes"])
    assert result.ended_by == d["ended_by"]
    assert result.audio.shape == d["wav"].shape
    np.testing.assert_allclose(result.audio, d["wav"], rtol=0, atol=WAV_ATOL)
    if stream_audio:
        played = np.concatenate([e.samples for e in events if hasattr(e, "start_sample")])
        np.testing.assert_array_equal(played, result.audio)


@pytest.mark.parametrize("model", sorted({p.parent.name for p in CASES}))
def test_batched_greedy_codes(model):
    """synthesize_many: every case of one model side by side (speakers, instructions of different lengths, no
    speaker row) gives the official codes, grouped by text mode (a run has one)."""
    from engine import SynthesisResult
    from engine.types import SynthesisJob

    synth = synth_for(model)
    cases = [load_case(p) for p in CASES if p.parent.name == model]
    for mode in sorted({d["non_streaming"] for d in cases}):
        group = [d for d in cases if d["non_streaming"] == mode]
        jobs = [SynthesisJob(d["text"], voice_of(d), d["language"], max_frames=d["max_new_tokens"] - 1,
                             instruct=d["instruct"] or None) for d in group]
        settings = GenerationSettings(greedy=True, non_streaming_text=mode, codes_only=True)
        results = {}
        with contextlib.ExitStack() as stack:
            for d in group:
                if d["instruct"] and not synth.kind.honours_instruct:
                    stack.enter_context(pytest.warns(InstructIgnoredWarning))
                    break
            run = synth.synthesize_many(jobs, settings, batch_size=3)
        for ev in run:
            assert ev.error is None, ev.error
            if isinstance(ev.event, SynthesisResult):
                results[ev.job] = ev.event
        assert sorted(results) == list(range(len(group)))
        for i, d in enumerate(group):
            assert_codes(results[i].codes, d["codes"])
            assert results[i].ended_by == d["ended_by"]
