"""engine.sampling: the official logits processing order, the filters, and the seeded generator."""

import numpy as np
import pytest

from engine.synthesis.sampling import (
    Sampler,
    SamplingConfig,
    multinomial,
    repetition_penalty,
    resolve,
    suppress,
    top_k_filter,
    top_p_filter,
)
from engine.types import GenerationSettings

VOCAB = 3072  # real layout: 2048 codes + 1024 control ids
EOS = 2150


def config(**kw) -> SamplingConfig:
    base = dict(do_sample=True, temperature=0.9, top_k=50, top_p=1.0, repetition_penalty=1.05, sub_do_sample=True,
                sub_temperature=0.9, sub_top_k=50, sub_top_p=1.0, eos_id=EOS, vocab_size=VOCAB)
    base.update(kw)
    return SamplingConfig(**base)


def kept(scores: np.ndarray) -> set[int]:
    return set(np.flatnonzero(np.isfinite(scores)).tolist())


def test_top_k_keeps_exactly_the_k_largest():
    s = np.array([0.1, 5.0, -2.0, 3.0, 4.0, 2.5], np.float32)
    assert kept(top_k_filter(s.copy(), 3)) == {1, 3, 4}
    assert kept(top_k_filter(s.copy(), 1)) == {1}
    assert kept(top_k_filter(s.copy(), 6)) == set(range(6))
    assert kept(top_k_filter(s.copy(), 0)) == set(range(6))  # 0 = off


def test_top_k_keeps_ties_at_the_kth_value():
    s = np.array([1.0, 3.0, 3.0, 2.0, 3.0, 0.5], np.float32)
    assert kept(top_k_filter(s.copy(), 2)) == {1, 2, 4}  # three-way tie at the 2nd value: all stay
    s = np.array([4.0, 2.0, 2.0, 1.0], np.float32)
    assert kept(top_k_filter(s.copy(), 2)) == {0, 1, 2}


def test_top_k_with_masked_entries():
    s = np.array([-np.inf, 1.0, -np.inf, 2.0], np.float32)
    assert kept(top_k_filter(s.copy(), 3)) == {1, 3}


def test_top_p_keeps_the_smallest_set_above_p():
    # probabilities 0.5, 0.3, 0.15, 0.05 (ascending cumulative: 0.05, 0.20, 0.50, 1.0)
    p = np.array([0.15, 0.5, 0.05, 0.3])
    s = np.log(p).astype(np.float32)
    assert kept(top_p_filter(s.copy(), 0.9)) == {0, 1, 3}  # drop tail with cumulative <= 0.1
    assert kept(top_p_filter(s.copy(), 0.75)) == {1, 3}  # drop tail with cumulative <= 0.25
    assert kept(top_p_filter(s.copy(), 0.6)) == {1, 3}  # drop tail with cumulative <= 0.4
    assert kept(top_p_filter(s.copy(), 0.4)) == {1}  # drop tail with cumulative <= 0.6
    assert kept(top_p_filter(s.copy(), 1e-6)) == {1}  # min_tokens_to_keep = 1
    assert kept(top_p_filter(s.copy(), 1.0)) == {0, 1, 2, 3}


def test_repetition_penalty_divides_positive_and_multiplies_negative():
    s = np.array([2.0, -2.0, 1.0, 0.0], np.float32)
    out = repetition_penalty(s.copy(), [0, 1, 1, 3], 2.0)
    np.testing.assert_array_equal(out, np.array([1.0, -4.0, 1.0, 0.0], np.float32))
    np.testing.assert_array_equal(repetition_penalty(s.copy(), [], 2.0), s)


def test_suppression_keeps_codes_and_eos_only():
    s = np.zeros(VOCAB, np.float32)
    out = suppress(s, VOCAB, EOS)
    assert kept(out) == set(range(2048)) | {EOS}


def test_eos_masked_for_the_first_two_steps():
    logits = np.zeros(VOCAB, np.float32)
    logits[EOS] = 100.0
    sampler = Sampler(config(do_sample=False), seed=0)
    assert sampler.talker_choose(logits, [], 0) != EOS
    assert sampler.talker_choose(logits, [5], 1) != EOS
    assert sampler.talker_choose(logits, [5, 6], 2) == EOS


def test_greedy_is_first_argmax_after_processing():
    logits = np.zeros(VOCAB, np.float32)
    logits[[7, 9]] = 3.0
    logits[2500] = 50.0  # a control id: suppressed
    sampler = Sampler(config(do_sample=False, sub_do_sample=False), seed=0)
    assert sampler.talker_choose(logits, [], 0) == 7
    # history penalises 7 -> 9 wins; penalty applies in greedy mode too
    assert sampler.talker_choose(logits, [7], 2) == 9
    cp = np.zeros(2048, np.float32)
    cp[[11, 12]] = 1.0
    assert sampler.subtalker_choose(cp, 1) == 11


def _draws(seed: int, n: int = 40) -> list[int]:
    rng = np.random.default_rng(123)
    sampler = Sampler(config(), seed=seed)
    out = []
    for step in range(n):
        out.append(sampler.talker_choose(rng.standard_normal(VOCAB).astype(np.float32), out, step))
        out.append(sampler.subtalker_choose(rng.standard_normal(2048).astype(np.float32), 1 + step % 15))
    return out


def test_same_seed_same_output_different_seed_different_output():
    assert _draws(1) == _draws(1)
    assert _draws(1) != _draws(2)


def test_sampling_respects_top_k_support():
    rng = np.random.default_rng(0)
    logits = rng.standard_normal(VOCAB).astype(np.float32)
    sampler = Sampler(config(top_k=5, repetition_penalty=1.0), seed=3)
    allowed = np.argsort(-np.where(np.arange(VOCAB) < 2048, logits, -np.inf))[:5]
    seen = {sampler.talker_choose(logits, [], 2) for _ in range(300)}
    assert seen <= set(allowed.tolist())
    assert len(seen) == 5


def test_multinomial_frequencies_match_softmax():
    p = np.array([0.5, 0.25, 0.125, 0.125])
    scores = np.log(p).astype(np.float32)
    rng = np.random.Generator(np.random.PCG64(7))
    n = 20000
    counts = np.bincount([multinomial(scores, rng) for _ in range(n)], minlength=4)
    # binomial standard deviation is at most sqrt(n)/2 ~ 71; allow 5 sigma
    assert np.all(np.abs(counts - p * n) < 5 * np.sqrt(n * p * (1 - p)))


def test_temperature_sharpens():
    logits = np.array([2.0, 1.0, 0.0, -1.0], np.float32)
    cold = Sampler(config(sub_temperature=0.2, sub_top_k=0), seed=1)
    hot = Sampler(config(sub_temperature=2.0, sub_top_k=0), seed=1)
    n = 2000
    cold_top = sum(cold.subtalker_choose(logits, 1) == 0 for _ in range(n))
    hot_top = sum(hot.subtalker_choose(logits, 1) == 0 for _ in range(n))
    assert cold_top > hot_top


def test_resolve_order_explicit_then_generation_config_then_defaults():
    gc = {"temperature": 0.7, "top_k": 30, "subtalker_top_k": 20, "do_sample": True}
    c = resolve(GenerationSettings(temperature=0.5), gc, EOS, VOCAB)
    assert (c.temperature, c.top_k, c.sub_top_k, c.top_p, c.repetition_penalty) == (0.5, 30, 20, 1.0, 1.05)
    g = resolve(GenerationSettings(greedy=True), gc, EOS, VOCAB)
    assert not g.do_sample and not g.sub_do_sample
    assert g.repetition_penalty == 1.05  # the penalty still applies in greedy mode


@pytest.mark.parametrize("k", [1, 2, 50])
def test_top_k_matches_sort_definition_on_random_scores(k):
    rng = np.random.default_rng(k)
    s = np.round(rng.standard_normal(300), 1).astype(np.float32)  # many ties
    kth = np.sort(s)[::-1][k - 1]
    assert kept(top_k_filter(s.copy(), k)) == set(np.flatnonzero(s >= kth).tolist())


@pytest.mark.parametrize("temperature,top_k,top_p", [(0.9, 50, 1.0), (0.7, 5, 0.8), (1.0, 0, 0.9), (1.2, 3000, 1.0)])
def test_fused_sampling_equals_warp_then_multinomial(temperature, top_k, top_p):
    from engine.synthesis.sampling import sample, warp

    logits = np.round(np.random.default_rng(top_k).standard_normal(VOCAB) * 2, 1).astype(np.float32)
    logits[2048:] = -np.inf
    logits[EOS] = 1.0
    a = np.random.Generator(np.random.PCG64(9))
    b = np.random.Generator(np.random.PCG64(9))
    for _ in range(200):
        assert sample(logits, temperature, top_k, top_p, a) == multinomial(warp(logits.copy(), temperature, top_k,
                                                                                 top_p), b)


def test_sample_takes_the_short_road_only_where_it_draws_what_the_general_path_draws(monkeypatch):
    """sample() against _sample_general() on the same RNG stream: same code and the same next random number for
    every case; ties at the k-th value, -inf and nan scores must fall back, ordinary scores must not."""
    from engine.synthesis import sampling

    general = sampling._sample_general
    fell_back = []

    def counting(*args):
        fell_back.append(True)
        return general(*args)

    monkeypatch.setattr(sampling, "_sample_general", counting)
    rng = np.random.default_rng(5)
    short = 0
    for case in range(3000):
        n = int(rng.choice([60, 2048, 3072]))
        top_k = int(rng.choice([1, 10, 50, 59]))
        scores = (rng.standard_normal(n) * rng.uniform(0.5, 8)).astype(np.float32)
        if case % 5 == 4:
            scores[rng.permutation(n)[:n - top_k]] = -np.inf  # exactly k finite scores: the (k+1)-th is -inf
        if case % 5 == 1:
            scores = np.round(scores, 1)  # ties, some at the k-th value
        if case % 5 == 2:
            scores[rng.integers(0, n, n - 30)] = -np.inf  # fewer finite scores than k for k = 50
        if case % 97 == 3:
            scores[rng.integers(0, n)] = np.nan
        temperature = float(rng.choice([0.9, 1.0, 0.5, 1.3]))
        a, b = np.random.default_rng(case), np.random.default_rng(case)
        fell_back.clear()
        try:
            got = sampling.sample(scores.copy(), temperature, top_k, 1.0, a)
        except ValueError:
            with pytest.raises(ValueError):
                general(scores.copy(), temperature, top_k, 1.0, b)
            continue
        assert got == general(scores.copy(), temperature, top_k, 1.0, b), case
        assert a.random() == b.random(), case  # one draw each
        short += not fell_back
        finite = np.sort(scores[np.isfinite(scores)] / np.float32(temperature))[::-1]
        tie_at_kth = finite.size < top_k or (finite.size > top_k and finite[top_k - 1] == finite[top_k])
        assert bool(fell_back) == (tie_at_kth or bool(np.isnan(scores).any())), case
    assert 1500 < short < 3000  # both roads were taken


def test_sampler_draws_the_generators_own_stream():
    """The Sampler serves its uniforms from blocks drawn ahead: its codes over several blocks equal sample() and
    draws fed by a plain Generator with the same seed, call for call."""
    from engine.synthesis.sampling import UniformStream, sample

    rng = np.random.default_rng(11)
    sampler = Sampler(config(repetition_penalty=1.0), seed=42)
    plain = np.random.Generator(np.random.PCG64(42))
    for step in range(3 * UniformStream.BLOCK + 5):
        logits = rng.standard_normal(2048).astype(np.float32)
        assert sampler.subtalker_choose(logits, 1) == sample(logits, 0.9, 50, 1.0, plain), step
