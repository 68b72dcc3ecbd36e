"""The frame loop: prompt rows in, 16-code frames out; nothing else (no audio, events or cancellation).

Modelled on llama2.c's generate(): prefill the talker with the prompt, then per frame choose code 0 (or stop at
EOS / the frame cap), let the code predictor choose codes 1..15, and feed the frame back as the next talker input.
Everything that differs between two utterances lives in one `SequenceState`, its talker KV cache included, so
several sequences share a talker and code predictor: up to `batch_size` of them take part in every call, and one
sequence is simply a batch of one. A sequence joins by a prefill of its own (exactly as when it runs alone), then
takes part in the shared steps; when it ends (EOS or its cap) or is dropped it leaves, and the next waiting
sequence takes its place at the following step. The talker and code predictor give every row the numbers it
would get alone (engine/runtime/step_graph.py), and each sequence draws from its own sampler in the same order as
alone, so batching changes no code. engine/synthesis/synthesizer.py adds decoding and events on top.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from ..codec_format import NUM_CODE_GROUPS
from ..errors import EngineError
from ..nets.code_predictor import CodePredictor
from ..nets.talker import Talker, TalkerSequence
from ..text.prompt import Prompt
from ..types import Timings, check_batch_size
from .sampling import Sampler


@dataclass
class SequenceState:
    """One utterance being generated: its prompt, sampler, code-0 history, frames and frame cap, and its place in
    the talker (KV cache, and the hidden state and logits of its last position) once it has been prefilled."""

    prompt: Prompt
    sampler: Sampler
    max_frames: int
    ignore_eos: bool = False  # EOS is masked out: the sequence always runs to max_frames
    history: list[int] = field(default_factory=list)  # code 0 of every step, the final EOS included
    frames: list[np.ndarray] = field(default_factory=list)  # (16,) int64 each
    ended_by: str | None = None  # "eos" or "cap" once finished
    cache: TalkerSequence | None = None  # the talker's KV cache of this sequence
    hidden: np.ndarray | None = None  # talker hidden state of the last position (the code predictor's input)
    logits: np.ndarray | None = None  # talker logits of the last position (code 0 of the next frame)

    @property
    def position(self) -> int:
        """The decode step about to run (= frames made so far)."""
        return len(self.frames)

    def choose_code0(self, logits: np.ndarray) -> int | None:
        """Code 0 of the next frame from the talker logits, or None when the sequence ends here."""
        step = len(self.frames)
        eos = self.sampler.config.eos_id
        if self.ignore_eos:
            logits = np.array(logits, np.float32, copy=True)
            logits[eos] = -np.inf
        c0 = self.sampler.talker_choose(logits, self.history, step)
        self.history.append(c0)
        if c0 == eos:
            self.ended_by = "eos"
            return None
        if step == self.max_frames:  # code 0 is still drawn at the cap, as the official loop does
            self.ended_by = "cap"
            return None
        return c0

    def add_frame(self, c0: int, rest: np.ndarray) -> np.ndarray:
        frame = np.empty(NUM_CODE_GROUPS, np.int64)
        frame[0] = c0
        frame[1:] = rest
        self.frames.append(frame)
        return frame

    def next_input(self, code_predictor: CodePredictor) -> np.ndarray:
        """Talker input of the next step: the last frame's embedding plus the text row of its step."""
        row: np.ndarray = code_predictor.feedback(self.frames[-1]) + self.prompt.text_row(len(self.frames) - 1)
        return row

    def codes(self) -> np.ndarray:
        """All frames so far, (frames, 16) int64."""
        return np.stack(self.frames) if self.frames else np.zeros((0, NUM_CODE_GROUPS), np.int64)

    def talker_state(self) -> tuple[TalkerSequence, np.ndarray, np.ndarray]:
        """(KV cache, hidden, logits) of a prefilled sequence."""
        if self.cache is None or self.hidden is None or self.logits is None:
            raise EngineError("a sequence steps before its prefill")
        return self.cache, self.hidden, self.logits


@dataclass
class _Slot:
    key: int
    seq: SequenceState
    timings: Timings


@dataclass(frozen=True)
class BatchStep:
    """What one step did: the frames made (key, frame (16,) int64) and the sequences that ended (their
    SequenceState.ended_by says why)."""

    frames: list[tuple[int, np.ndarray]]
    ended: list[int]
    seconds: float  # compute time of the step's frames (shared by every sequence in it; prefills not counted)


class FrameLoop:
    """Sequences waiting and running; step() advances every running sequence by one frame.

    A step first feeds the frames of the previous step to the talker (so a frame reaches its caller before the
    talker step that follows it, and a caller that stops after a frame pays for no step it will not use), then
    lets waiting sequences join, then chooses each running sequence's next frame."""

    def __init__(self, talker: Talker, code_predictor: CodePredictor, batch_size: int = 1):
        self.talker, self.code_predictor = talker, code_predictor
        self.batch_size = check_batch_size(batch_size)
        self._waiting: deque[_Slot] = deque()
        self._running: list[_Slot] = []  # each has made a frame the talker has not seen yet, or just joined

    def add(self, key: int, seq: SequenceState, timings: Timings | None = None) -> None:
        """Queue a sequence; its stage times are added to `timings` (shared steps count in full for each)."""
        self._waiting.append(_Slot(key, seq, timings if timings is not None else Timings()))

    def drop(self, key: int) -> bool:
        """Remove a waiting or running sequence (cancel); True when it was there."""
        for queue in (self._waiting, self._running):
            for slot in list(queue):
                if slot.key == key:
                    queue.remove(slot)
                    return True
        return False

    @property
    def running(self) -> list[int]:
        return [s.key for s in self._running]

    @property
    def done(self) -> bool:
        return not self._waiting and not self._running

    def step(self) -> BatchStep:
        t0 = time.perf_counter()
        if self._running:  # the previous step's frames, fed back as every running sequence's next input
            rows = np.stack([slot.seq.next_input(self.code_predictor) for slot in self._running])
            hidden, logits = self.talker.step_many([slot.seq.talker_state()[0] for slot in self._running], rows)
            talker_seconds = time.perf_counter() - t0
            for j, slot in enumerate(self._running):
                slot.seq.hidden, slot.seq.logits = hidden[j], logits[j]
                slot.timings.talker += talker_seconds
        prefill_seconds = 0.0
        while len(self._running) < self.batch_size and self._waiting:
            slot = self._waiting.popleft()
            t = time.perf_counter()
            slot.seq.cache, slot.seq.hidden, slot.seq.logits = self.talker.start(slot.seq.prompt.prefill)
            seconds = time.perf_counter() - t
            slot.timings.prefill += seconds
            prefill_seconds += seconds
            self._running.append(slot)
        ended: list[int] = []
        going: list[tuple[_Slot, int]] = []
        for slot in self._running:
            c0 = slot.seq.choose_code0(slot.seq.talker_state()[2])
            if c0 is None:
                ended.append(slot.key)
                slot.seq.cache = slot.seq.hidden = slot.seq.logits = None  # its KV cache is not needed again
            else:
                going.append((slot, c0))
        self._running = [slot for slot, _ in going]
        frames: list[tuple[int, np.ndarray]] = []
        if going:
            t = time.perf_counter()
            rest = self.code_predictor.predict_many(
                np.stack([slot.seq.talker_state()[1] for slot, _ in going]), [c0 for _, c0 in going],
                [slot.seq.sampler.subtalker_choose for slot, _ in going])
            cp_seconds = time.perf_counter() - t
            for (slot, c0), codes in zip(going, rest, strict=True):
                frames.append((slot.key, slot.seq.add_frame(c0, codes)))
                slot.timings.code_predictor += cp_seconds
        return BatchStep(frames=frames, ended=ended, seconds=time.perf_counter() - t0 - prefill_seconds)


def generate(talker: Talker, code_predictor: CodePredictor, seq: SequenceState,
             timings: Timings | None = None) -> Iterator[tuple[np.ndarray, float]]:
    """Run one sequence to its end (a FrameLoop of one), yielding (frame codes (16,), compute seconds of that frame)
    per frame. Afterwards seq.ended_by says why it stopped. Stage times are added to `timings` when given."""
    loop = FrameLoop(talker, code_predictor)
    loop.add(0, seq, timings)
    while not loop.done:
        step = loop.step()
        for _, frame in step.frames:
            yield frame, step.seconds
