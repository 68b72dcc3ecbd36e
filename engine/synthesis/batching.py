"""Continuous batching: up to `batch_size` sequences share every talker and code-predictor call.

Each sequence is an engine.generation.SequenceState (its own prompt, sampler, code-0 history, frames and cap)
plus its own talker KV cache. A sequence joins by a prefill of its own (exactly as when it runs alone), then
takes part in the shared steps; when it ends (EOS or its cap) or is dropped it leaves, and the next waiting
sequence takes its place at the following step. The talker and code predictor give every row the numbers it
would get alone (engine/runtime/step_graph.py), and each sequence draws from its own sampler in the same order as
alone, so batching changes no code.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass

import numpy as np

from ..errors import EngineError
from ..nets.code_predictor import CodePredictor
from ..nets.talker import Talker, TalkerSequence
from ..types import Timings
from .generation import SequenceState

MAX_BATCH_SIZE = 8  # row counts measured bit-identical to running alone (tests/test_batching.py)


@dataclass
class _Slot:
    key: Hashable
    seq: SequenceState
    timings: Timings
    cache: TalkerSequence | None = None
    hidden: np.ndarray | None = None
    logits: np.ndarray | None = None


@dataclass(frozen=True)
class BatchStep:
    """What one step did: the frames made (key, frame (16,) int64) and the sequences that ended (their
    SequenceState.ended_by says why)."""

    frames: list[tuple[Hashable, np.ndarray]]
    ended: list[Hashable]
    seconds: float  # wall time of the step (shared by every sequence in it)


class ContinuousBatch:
    """Sequences waiting and running; step() advances every running sequence by one frame."""

    def __init__(self, talker: Talker, code_predictor: CodePredictor, batch_size: int):
        if not 1 <= int(batch_size) <= MAX_BATCH_SIZE:
            raise EngineError(f"Batch size must be between 1 and {MAX_BATCH_SIZE}, not {batch_size}.")
        self.talker, self.code_predictor = talker, code_predictor
        self.batch_size = int(batch_size)
        self._waiting: deque[_Slot] = deque()
        self._running: list[_Slot] = []

    def add(self, key: Hashable, seq: SequenceState, timings: Timings | None = None) -> None:
        """Queue a sequence; its stage times are added to `timings` (shared steps count in full for each)."""
        self._waiting.append(_Slot(key, seq, timings if timings is not None else Timings()))

    def drop(self, key: Hashable) -> bool:
        """Remove a waiting or running sequence (cancel); True when it was there."""
        for queue in (self._waiting, self._running):
            for slot in list(queue):
                if slot.key == key:
                    queue.remove(slot)
                    return True
        return False

    @property
    def running(self) -> list[Hashable]:
        return [s.key for s in self._running]

    @property
    def done(self) -> bool:
        return not self._waiting and not self._running

    def step(self) -> BatchStep:
        t0 = time.perf_counter()
        ended: list[Hashable] = []
        while len(self._running) < self.batch_size and self._waiting:
            slot = self._waiting.popleft()
            t = time.perf_counter()
            slot.cache, slot.hidden, slot.logits = self.talker.start(slot.seq.prompt.prefill)
            slot.timings.prefill += time.perf_counter() - t
            self._running.append(slot)
        going: list[tuple[_Slot, int]] = []
        for slot in self._running:
            c0 = slot.seq.choose_code0(slot.logits)
            if c0 is None:
                ended.append(slot.key)
            else:
                going.append((slot, c0))
        self._running = [slot for slot, _ in going]
        frames: list[tuple[Hashable, np.ndarray]] = []
        if going:
            t = time.perf_counter()
            rest = self.code_predictor.predict_many(
                np.stack([slot.hidden for slot, _ in going]), [c0 for _, c0 in going],
                [slot.seq.sampler.subtalker_choose for slot, _ in going])
            cp_seconds = time.perf_counter() - t
            for (slot, c0), codes in zip(going, rest, strict=True):
                frames.append((slot.key, slot.seq.add_frame(c0, codes)))
                slot.timings.code_predictor += cp_seconds
            t = time.perf_counter()
            rows = np.stack([slot.seq.next_input(self.code_predictor) for slot in self._running])
            hidden, logits = self.talker.step_many([slot.cache for slot in self._running], rows)
            talker_seconds = time.perf_counter() - t
            for j, slot in enumerate(self._running):
                slot.hidden, slot.logits = hidden[j], logits[j]
                slot.timings.talker += talker_seconds
        return BatchStep(frames=frames, ended=ended, seconds=time.perf_counter() - t0)
