"""Choosing codes from logits exactly as the official (Hugging Face) generate does, with a seeded numpy RNG.

Talker (code 0), in this order: repetition penalty over the code-0 history -> EOS masked for the first
`min_new_tokens` steps -> suppression of the control ids [vocab - 1024, vocab) except EOS -> (sampling only)
temperature -> top-k (keeps ties at the k-th value) -> top-p -> multinomial. Greedy = argmax (first index).
Code predictor (codes 1..15): no penalty, no suppression; its own temperature / top-k / top-p.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..types import GenerationSettings

HARD_DEFAULTS: dict[str, Any] = dict(
    do_sample=True, top_k=50, top_p=1.0, temperature=0.9, repetition_penalty=1.05,
    subtalker_dosample=True, subtalker_top_k=50, subtalker_top_p=1.0, subtalker_temperature=0.9,
    max_new_tokens=2048,
)


@dataclass(frozen=True)
class SamplingConfig:
    """Fully resolved sampling parameters for one synthesis."""

    do_sample: bool
    temperature: float
    top_k: int
    top_p: float
    repetition_penalty: float
    sub_do_sample: bool
    sub_temperature: float
    sub_top_k: int
    sub_top_p: float
    eos_id: int
    vocab_size: int  # talker codec vocabulary (control ids are its last 1024 rows)
    min_new_tokens: int = 2


def resolve(settings: GenerationSettings | None, generation_config: dict[str, Any], eos_id: int,
            vocab_size: int) -> SamplingConfig:
    """Explicit setting -> generation_config.json -> the official wrapper's hard defaults."""
    s = settings or GenerationSettings()
    gc = generation_config or {}

    def pick(name: str, value: Any) -> Any:
        if value is not None:
            return value
        return gc.get(name, HARD_DEFAULTS[name])

    return SamplingConfig(
        do_sample=False if s.greedy else bool(pick("do_sample", None)),
        temperature=float(pick("temperature", s.temperature)),
        top_k=int(pick("top_k", s.top_k)),
        top_p=float(pick("top_p", s.top_p)),
        repetition_penalty=float(pick("repetition_penalty", s.repetition_penalty)),
        sub_do_sample=False if s.greedy else bool(pick("subtalker_dosample", None)),
        sub_temperature=float(pick("subtalker_temperature", s.subtalker_temperature)),
        sub_top_k=int(pick("subtalker_top_k", s.subtalker_top_k)),
        sub_top_p=float(pick("subtalker_top_p", s.subtalker_top_p)),
        eos_id=int(eos_id),
        vocab_size=int(vocab_size),
    )


def settings_from_generation_config(generation_config: dict[str, Any]) -> GenerationSettings:
    """GenerationSettings with every sampling field filled from generation_config.json (for display)."""
    gc = generation_config or {}

    def g(name: str) -> Any:
        return gc.get(name, HARD_DEFAULTS[name])

    return GenerationSettings(
        greedy=not bool(g("do_sample")), temperature=float(g("temperature")), top_k=int(g("top_k")),
        top_p=float(g("top_p")), repetition_penalty=float(g("repetition_penalty")),
        subtalker_temperature=float(g("subtalker_temperature")), subtalker_top_k=int(g("subtalker_top_k")),
        subtalker_top_p=float(g("subtalker_top_p")),
    )


def official_defaults() -> GenerationSettings:
    """Every sampling setting at the official wrapper's default: what a model without a generation_config.json
    gets (a fresh copy: settings are mutable)."""
    return settings_from_generation_config({})


# ---------------------------------------------------------------------------------------------- processors


def repetition_penalty(scores: np.ndarray, history: Iterable[int], penalty: float) -> np.ndarray:
    """HF RepetitionPenaltyLogitsProcessor: each previously generated id: /penalty if > 0 else *penalty."""
    if penalty == 1.0:
        return scores
    ids = np.unique(np.fromiter(history, dtype=np.int64))
    if ids.size == 0:
        return scores
    p = np.float32(penalty)
    s = scores[ids]
    scores[ids] = np.where(s < 0, s * p, s / p)
    return scores


def suppress(scores: np.ndarray, vocab_size: int, eos_id: int) -> np.ndarray:
    """The official suppress_tokens: every control id in [vocab - 1024, vocab) except EOS."""
    start = max(0, vocab_size - 1024)
    keep = scores[eos_id] if start <= eos_id < vocab_size else None
    scores[start:vocab_size] = -np.inf
    if keep is not None:
        scores[eos_id] = keep
    return scores


def top_k_filter(scores: np.ndarray, k: int) -> np.ndarray:
    """HF TopKLogitsWarper: remove every score below the k-th largest (ties with it survive)."""
    if k <= 0 or k >= scores.size:
        return scores
    kth = np.partition(scores, scores.size - k)[scores.size - k]
    scores[scores < kth] = -np.inf
    return scores


def top_p_filter(scores: np.ndarray, p: float, min_tokens_to_keep: int = 1) -> np.ndarray:
    """HF TopPLogitsWarper: sort ascending, drop the low tail whose cumulative probability is <= 1 - p."""
    if p >= 1.0:
        return scores
    order = np.argsort(scores, kind="stable")
    sorted_scores = scores[order].astype(np.float32)
    probs = _softmax(sorted_scores)
    cum = np.cumsum(probs, dtype=np.float32)
    remove = cum <= np.float32(1.0 - p)
    remove[-min_tokens_to_keep:] = False
    scores[order[remove]] = -np.inf
    return scores


def _softmax(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float32)
    finite = np.isfinite(x)
    out = np.zeros_like(x)
    if not finite.any():
        return out
    m = x[finite].max()
    e = np.exp(x[finite] - m)
    out[finite] = e / e.sum()
    return out


def warp(scores: np.ndarray, temperature: float, top_k: int, top_p: float) -> np.ndarray:
    """Temperature -> top-k -> top-p, as HF applies the warpers when sampling."""
    if temperature != 1.0:
        scores = scores / np.float32(temperature)
    if top_k:
        scores = top_k_filter(scores, top_k)
    if top_p < 1.0:
        scores = top_p_filter(scores, top_p)
    return scores


class UniformStream:
    """A Generator's random() values served from blocks drawn ahead: Generator.random(n) gives exactly the values
    of n successive random() calls, so every draw is the one the Generator itself would give; one numpy call per
    block instead of one per sampling (each costs tens of microseconds in the frame loop's cold caches)."""

    BLOCK = 64

    def __init__(self, rng: np.random.Generator):
        self._rng = rng
        self._ahead: list[float] = []  # the next values, last one first

    def random(self) -> float:
        if not self._ahead:
            self._ahead = self._rng.random(self.BLOCK).tolist()
            self._ahead.reverse()
        return self._ahead.pop()


Uniforms = np.random.Generator | UniformStream  # anything whose random() gives the next uniform in [0, 1)


def multinomial(scores: np.ndarray, rng: Uniforms) -> int:
    """One draw from softmax(scores) (float64 inverse CDF over the finite scores)."""
    finite = np.flatnonzero(np.isfinite(scores))
    if finite.size == 0:
        raise ValueError("every logit is masked")
    x = scores[finite].astype(np.float64)
    w = np.exp(x - x.max())
    cdf = np.cumsum(w)
    i = int(np.searchsorted(cdf, rng.random() * cdf[-1], side="right"))
    return int(finite[min(i, finite.size - 1)])


def _sample_general(scores: np.ndarray, temperature: float, top_k: int, top_p: float, rng: Uniforms) -> int:
    """warp() then multinomial(), fused: only the top-k candidates are touched after the k-th value is found.

    Same kept set and same draw as the two-step reference (one rng.random() per call). Any top-k / top-p; sample()
    takes a shorter road for the common case."""
    if temperature != 1.0:
        scores = scores / np.float32(temperature)
    n = scores.size
    kth = -np.inf
    if 0 < top_k < n:
        kth = float(np.partition(scores, n - top_k)[n - top_k])
        idx = np.flatnonzero(scores >= kth)  # ties with the k-th value stay, as in HF
    else:
        idx = np.arange(n)
    vals = scores[idx]
    if top_p < 1.0:
        keep = np.isfinite(top_p_filter(vals.copy(), top_p))
        idx, vals = idx[keep], vals[keep]
    if kth == -np.inf:  # else every kept score is >= a finite k-th value (each numpy call counts in the frame loop)
        finite = vals > -np.inf
        idx, vals = idx[finite], vals[finite]
    if idx.size == 0:
        raise ValueError("every logit is masked")
    x = vals.astype(np.float64)
    cdf = np.cumsum(np.exp(x - x.max()))
    i = int(np.searchsorted(cdf, rng.random() * cdf[-1], side="right"))
    return int(idx[min(i, idx.size - 1)])


def sample(scores: np.ndarray, temperature: float, top_k: int, top_p: float, rng: Uniforms) -> int:
    """_sample_general() with the same kept set, the same float64 CDF and the same rng.random() draw, in fewer
    numpy calls for the frame loop's case (0 < top_k < size, top_p 1, no tie at the k-th value): each numpy call
    right after an ncnn call runs with cold caches, 16 samplings per frame (docs/performance.md, "Frame loop").

    One argpartition finds the k largest raw scores and the (k+1)-th. Dividing by a positive temperature keeps
    their order, so when the (k+1)-th scaled score is below the smallest of the k, the k are exactly what the
    reference keeps (every score >= the k-th largest scaled one); otherwise (ties, -inf or nan there) it runs."""
    n = scores.size
    if top_p < 1.0 or not 0 < top_k < n or not temperature > 0:
        return _sample_general(scores, temperature, top_k, top_p, rng)
    cand = np.argpartition(scores, n - top_k - 1)[n - top_k - 1:]  # the (k+1)-th largest, then the k largest
    vals = (scores[cand] / np.float32(temperature)).tolist()  # float32 division as the reference, then exact floats
    edge = vals.pop(0)
    if not edge < min(vals):
        return _sample_general(scores, temperature, top_k, top_p, rng)
    ids = cand.tolist()
    del ids[0]
    order = sorted(range(top_k), key=ids.__getitem__)  # the reference's CDF runs in index order
    x = np.array([vals[j] for j in order])
    weights = np.exp(x - max(vals)).tolist()  # numpy's exp, as the reference (math.exp differs in the last bit)
    cdf = []
    total = 0.0
    for w in weights:  # sequential float64 sums: np.cumsum's values
        total += w
        cdf.append(total)
    if not total < math.inf:  # nan or inf among the scores: the general path decides, before the draw
        return _sample_general(scores, temperature, top_k, top_p, rng)
    i = bisect.bisect_right(cdf, rng.random() * total)  # np.searchsorted(side="right")
    return ids[order[min(i, top_k - 1)]]


# ---------------------------------------------------------------------------------------------- sampler


class Sampler:
    """Stateful only through its RNG. One per synthesis."""

    def __init__(self, config: SamplingConfig, seed: int | None):
        self.config = config
        self.seed = seed
        self.rng = UniformStream(np.random.Generator(np.random.PCG64(seed)))

    def talker_scores(self, logits: np.ndarray, history: Iterable[int], step: int) -> np.ndarray:
        """The processed code-0 scores (before the sampling warpers)."""
        c = self.config
        scores = np.array(logits, dtype=np.float32, copy=True).reshape(-1)
        scores = repetition_penalty(scores, history, c.repetition_penalty)
        if step < c.min_new_tokens and 0 <= c.eos_id < scores.size:
            scores[c.eos_id] = -np.inf
        return suppress(scores, c.vocab_size, c.eos_id)

    def talker_choose(self, logits: np.ndarray, history: Iterable[int], step: int) -> int:
        """Code 0 of frame `step` (0-based count of codes already generated)."""
        c = self.config
        scores = self.talker_scores(logits, history, step)
        if not c.do_sample:
            return int(np.argmax(scores))
        return sample(scores, c.temperature, c.top_k, c.top_p, self.rng)

    def subtalker_choose(self, logits: np.ndarray, group: int) -> int:
        """Code `group` (1..15) from the code predictor's logits."""
        c = self.config
        ready = isinstance(logits, np.ndarray) and logits.ndim == 1 and logits.dtype == np.float32
        scores = logits if ready else np.asarray(logits, np.float32).ravel()
        if not c.sub_do_sample:
            return int(np.argmax(scores))
        return sample(scores, c.sub_temperature, c.sub_top_k, c.sub_top_p, self.rng)

