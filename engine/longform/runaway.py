"""The runaway guard: notices a chunk that will not stop, loops or goes silent, so it can be generated again.

Qwen3-TTS is known to drift on long inputs: it runs on past the text, repeats a few frames forever, or fills
seconds with silence. All three show in the first codebook (c0, the semantic one) long before a frame cap:
  - too long: more frames than `length_factor` x the text's estimated length (at least `min_extra_seconds` more);
  - a loop: c0 repeating with a period of at most `max_period` frames for `loop_seconds`;
  - silence (and other stuck states): at most `max_distinct` different c0 values over `loop_seconds`.
Speech changes its c0 every frame or two over a 2048-entry codebook, so neither pattern occurs in it.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass

from ..codec_format import FRAME_RATE
from ..errors import TextError


@dataclass(frozen=True)
class GuardSettings:
    length_factor: float = 3.0
    min_extra_seconds: float = 6.0
    loop_seconds: float = 4.0
    max_period: int = 12  # frames (about 1 s)
    max_distinct: int = 2
    retries: int = 2  # new seeds after the first attempt

    def check(self) -> None:
        if not isinstance(self.retries, int) or not 0 <= self.retries <= 20:
            raise TextError(f"The number of retries must be between 0 and 20, not {self.retries!r}.")
        if not self.length_factor >= 1.0 or not self.loop_seconds > 0 or self.max_period < 1:
            raise TextError("The runaway guard's limits must be positive (length factor at least 1).")

    @property
    def loop_frames(self) -> int:
        return max(2, int(round(self.loop_seconds * FRAME_RATE)))


class RunawayGuard:
    """Feed it each frame's c0; push() returns a one-line reason once the chunk has run away, else None."""

    def __init__(self, estimated_frames: int, settings: GuardSettings | None = None):
        self.settings = settings or GuardSettings()
        est = max(1, int(estimated_frames))
        extra = int(round(self.settings.min_extra_seconds * FRAME_RATE))
        self.frame_limit = max(int(est * self.settings.length_factor), est + extra)
        self._estimated = est
        window = self.settings.loop_frames
        self._recent: deque[int] = deque(maxlen=window)
        self._counts: Counter[int] = Counter()
        self._runs = [0] * (self.settings.max_period + 1)  # runs[p]: consecutive frames equal to the one p back
        self.frames = 0

    def push(self, c0: int) -> str | None:
        c0 = int(c0)
        s, recent = self.settings, self._recent
        window = s.loop_frames
        history = list(recent)[-s.max_period:]
        for p in range(1, s.max_period + 1):
            same = len(history) >= p and history[-p] == c0
            self._runs[p] = self._runs[p] + 1 if same else 0
        if len(recent) == window:
            old = recent[0]
            self._counts[old] -= 1
            if not self._counts[old]:
                del self._counts[old]
        recent.append(c0)
        self._counts[c0] += 1
        self.frames += 1
        for p in range(1, s.max_period + 1):
            if self._runs[p] >= max(window - p, p):  # the cycle filled the window, and came round at least twice
                return (f"its codes fell into a loop (the same {p} frame{'s' if p > 1 else ''} over and over "
                        f"for {s.loop_seconds:g} s)")
        if len(recent) == window and len(self._counts) <= s.max_distinct:
            return f"it went silent or stuck ({len(self._counts)} distinct codes in {s.loop_seconds:g} s)"
        return None

    def too_long(self) -> str:
        return (f"it ran past {self.frame_limit / FRAME_RATE:.1f} s for about {self._estimated / FRAME_RATE:.1f} s "
                f"of text without stopping")
