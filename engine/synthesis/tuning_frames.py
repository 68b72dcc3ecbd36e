"""Frames the self-tuner times: generated greedily from a random prompt (random weights give no meaningful codes,
and the time of a step does not depend on them)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from ..nets.code_predictor import CodePredictor
from ..nets.talker import Talker

PROMPT_ROWS = 12


class FrameSource:
    """Frames generated greedily from a random prompt, one at a time, with the talker and code predictor timed."""

    def __init__(self, talker: Talker, cp: CodePredictor):
        self.talker, self.cp = talker, cp
        rng = np.random.default_rng(0)
        prompt = (rng.standard_normal((PROMPT_ROWS, talker.hidden_size)) * 0.05).astype(np.float32)
        self.seq, self.hidden, self.logits = talker.start(prompt)
        self.made: list[np.ndarray] = []

    def next(self, timed: bool = True) -> Any:
        talker, cp = self.talker, self.cp
        c0 = int(np.argmax(self.logits[:cp.codebook_size]))
        t0 = time.perf_counter()
        rest = cp.predict_many(self.hidden[None], [c0], [greedy])[0]
        t1 = time.perf_counter()
        frame = np.concatenate([[c0], rest]).astype(np.int64)
        self.made.append(frame)
        hidden, logits = talker.step_many([self.seq], cp.frame_rows(frame[None]))
        self.hidden, self.logits = hidden[0], logits[0]
        if not timed:
            return frame
        return {"talker": time.perf_counter() - t1, "code predictor": t1 - t0}

    def codes(self, n: int) -> np.ndarray:
        while len(self.made) < n:
            self.next()
        return np.stack(self.made[:n])


def greedy(logits: np.ndarray, group: int) -> int:
    return int(np.argmax(logits))
