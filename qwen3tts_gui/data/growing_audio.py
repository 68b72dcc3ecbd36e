"""Audio that may still be arriving: float32 mono samples appended chunk by chunk while a take is generated.

The player plays it and the waveform view draws it as it grows. Room is reserved ahead (at least doubling), so a
take of n chunks is copied O(log n) times instead of once per chunk; data[:length] is the audio so far.
"""

from __future__ import annotations

import numpy as np


class GrowingAudio:
    """Float32 mono samples, data[:length]; `complete` once no more will arrive."""

    def __init__(self) -> None:
        self.data = np.zeros(0, np.float32)
        self.length = 0
        self.complete = False

    @property
    def samples(self) -> np.ndarray:
        """The audio so far (a view: it changes if the audio is set afresh)."""
        return self.data[: self.length]

    def set(self, samples: np.ndarray, complete: bool = True) -> None:
        """Start again from a copy of `samples` (float32, flattened)."""
        self.data = np.asarray(samples, np.float32).reshape(-1).copy()
        self.length = len(self.data)
        self.complete = complete

    def append(self, samples: np.ndarray, room: int = 0) -> None:
        """Add samples at the end. When the reserved room runs out it grows to at least twice its size, the space
        needed, and `room` samples (a caller that knows the final length passes it: one allocation)."""
        samples = np.asarray(samples, np.float32).reshape(-1)
        need = self.length + len(samples)
        if need > len(self.data):
            grown = np.zeros(max(need, 2 * len(self.data), room), np.float32)
            grown[: self.length] = self.data[: self.length]
            self.data = grown
        self.data[self.length : need] = samples
        self.length = need
