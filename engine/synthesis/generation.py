"""The frame loop: prompt rows in, 16-code frames out; nothing else (no audio, events or cancellation).

Modelled on llama2.c's generate(): prefill the talker with the prompt, then per frame choose code 0 (or stop at
EOS / the frame cap), let the code predictor choose codes 1..15, and feed the frame back as the next talker input.
Everything that differs between two utterances lives in one `SequenceState`, so several sequences can share a
talker and code predictor; engine/synthesis/synthesizer.py adds decoding and events on top.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from ..codec_format import NUM_CODE_GROUPS
from ..nets.code_predictor import CodePredictor
from ..nets.talker import Talker
from ..text.prompt import Prompt
from ..types import Timings
from .sampling import Sampler


@dataclass
class SequenceState:
    """One utterance being generated: its prompt, sampler, code-0 history, frames and frame cap."""

    prompt: Prompt
    sampler: Sampler
    max_frames: int
    ignore_eos: bool = False  # EOS is masked out: the sequence always runs to max_frames
    history: list[int] = field(default_factory=list)  # code 0 of every step, the final EOS included
    frames: list[np.ndarray] = field(default_factory=list)  # (16,) int64 each
    ended_by: str | None = None  # "eos" or "cap" once finished

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
        return code_predictor.feedback(self.frames[-1]) + self.prompt.text_row(len(self.frames) - 1)

    def codes(self) -> np.ndarray:
        """All frames so far, (frames, 16) int64."""
        return np.stack(self.frames) if self.frames else np.zeros((0, NUM_CODE_GROUPS), np.int64)


def generate(talker: Talker, code_predictor: CodePredictor, seq: SequenceState,
             timings: Timings | None = None) -> Iterator[tuple[np.ndarray, float]]:
    """Run one sequence to its end, yielding (frame codes (16,), compute seconds of that frame) per frame.

    Afterwards seq.ended_by says why it stopped. Stage times are added to `timings` when given."""
    timings = timings if timings is not None else Timings()
    t = time.perf_counter()
    hidden, logits = talker.prefill(seq.prompt.prefill)
    t_frame = time.perf_counter()
    timings.prefill += t_frame - t
    while (c0 := seq.choose_code0(logits)) is not None:
        t = time.perf_counter()
        rest = code_predictor.predict(hidden, c0, seq.sampler.subtalker_choose)
        now = time.perf_counter()
        timings.code_predictor += now - t
        yield seq.add_frame(c0, rest), now - t_frame
        t_frame = time.perf_counter()
        hidden, logits = talker.step(seq.next_input(code_predictor))
        timings.talker += time.perf_counter() - t_frame
