"""engine.sampling against the Hugging Face logits processors the official generate uses (live oracle tier)."""

import numpy as np
import pytest
import torch  # noqa: E402  (missing in the reference environment: a collection error, never a skip)

pytestmark = pytest.mark.reference

from transformers.generation.logits_process import (  # noqa: E402
    LogitsProcessorList,
    MinNewTokensLengthLogitsProcessor,
    RepetitionPenaltyLogitsProcessor,
    SuppressTokensLogitsProcessor,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from engine.synthesis.sampling import Sampler, SamplingConfig, warp  # noqa: E402

VOCAB, EOS = 3072, 2150


def hf_processors(penalty: float) -> LogitsProcessorList:
    """What Qwen3TTSForConditionalGeneration.generate passes to the talker's HF generate, in HF's order."""
    suppress = [i for i in range(VOCAB - 1024, VOCAB) if i != EOS]
    return LogitsProcessorList([
        RepetitionPenaltyLogitsProcessor(penalty=penalty),
        MinNewTokensLengthLogitsProcessor(0, 2, torch.tensor([EOS])),
        SuppressTokensLogitsProcessor(suppress),
    ])


@pytest.mark.parametrize("step", [0, 1, 2, 7])
@pytest.mark.parametrize("penalty", [1.05, 1.3])
def test_talker_processing_is_bit_identical(step, penalty):
    rng = np.random.default_rng(step * 10 + int(penalty * 100))
    logits = (rng.standard_normal(VOCAB) * 4).astype(np.float32)
    history = rng.integers(0, 2048, size=step).tolist()
    if step:
        logits[history[0]] = -abs(logits[history[0]])  # a negative penalised logit too
    ours = Sampler(SamplingConfig(False, 0.9, 50, 1.0, penalty, False, 0.9, 50, 1.0, EOS, VOCAB), 0)
    got = ours.talker_scores(logits, history, step)
    ids = torch.tensor([history], dtype=torch.long).reshape(1, -1)
    ref = hf_processors(penalty)(ids, torch.from_numpy(logits.copy())[None])[0].numpy()
    np.testing.assert_array_equal(got, ref)
    assert int(np.argmax(got)) == int(torch.argmax(torch.from_numpy(ref)))


@pytest.mark.parametrize("temperature,top_k,top_p", [(0.9, 50, 1.0), (0.7, 10, 0.8), (1.0, 0, 0.5), (1.3, 3, 0.95)])
def test_warpers_keep_the_same_tokens(temperature, top_k, top_p):
    rng = np.random.default_rng(int(temperature * 10) + top_k)
    scores = np.round(rng.standard_normal(2048) * 3, 1).astype(np.float32)  # rounding makes ties
    got = warp(scores.copy(), temperature, top_k, top_p)
    procs = []
    if temperature != 1.0:
        procs.append(TemperatureLogitsWarper(temperature))
    if top_k:
        procs.append(TopKLogitsWarper(top_k=top_k, min_tokens_to_keep=1))
    if top_p < 1.0:
        procs.append(TopPLogitsWarper(top_p=top_p, min_tokens_to_keep=1))
    ref = LogitsProcessorList(procs)(torch.zeros(1, 0, dtype=torch.long), torch.from_numpy(scores.copy())[None])[0]
    ref = ref.numpy()
    np.testing.assert_array_equal(np.isfinite(got), np.isfinite(ref))
    np.testing.assert_allclose(got[np.isfinite(got)], ref[np.isfinite(ref)], rtol=0, atol=1e-6)
