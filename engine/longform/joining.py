"""How the chunks of a long text become one recording: a pause before each chunk (longer after a paragraph) and
a short raised-cosine fade on both sides of every seam between chunks, so no seam clicks.

Each chunk's piece is built from that chunk alone (pause + faded audio), so the recording can be written as
the chunks finish and nothing has to be held back: the joined length is exactly chunks + pauses.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..codec_format import SAMPLE_RATE
from ..errors import TextError


@dataclass(frozen=True)
class JoinSettings:
    sentence_pause: float = 0.35  # seconds of silence between chunks of one paragraph
    paragraph_pause: float = 0.9  # seconds of silence after a paragraph
    fade: float = 0.012  # seconds of fade-out/fade-in at each seam (a crossfade through the pause)

    def check(self) -> None:
        for name, value, most in (("sentence pause", self.sentence_pause, 10.0),
                                  ("paragraph pause", self.paragraph_pause, 10.0), ("fade", self.fade, 0.5)):
            if not isinstance(value, (int, float)) or not 0.0 <= value <= most:
                raise TextError(f"The {name} must be between 0 and {most:g} seconds, not {value!r}.")


def seconds_to_samples(seconds: float) -> int:
    return int(round(seconds * SAMPLE_RATE))


def fade_edges(audio: np.ndarray, fade_samples: int) -> np.ndarray:
    """A copy with a raised-cosine fade-in at the start and fade-out at the end (shorter for short audio)."""
    out = np.array(audio, dtype=np.float32, copy=True)
    _fade_in_place(out, fade_samples)
    return out


def _fade_in_place(out: np.ndarray, fade_samples: int, fade_in: bool = True, fade_out: bool = True) -> None:
    n = min(int(fade_samples), len(out) // 2)
    if n > 0:
        ramp = (0.5 - 0.5 * np.cos(np.pi * (np.arange(n) + 0.5) / n)).astype(np.float32)
        if fade_in:
            out[:n] *= ramp
        if fade_out:
            out[len(out) - n:] *= ramp[::-1]


def joined_piece(audio: np.ndarray, pause_samples: int, settings: JoinSettings, fade_in: bool = True,
                 fade_out: bool = True) -> np.ndarray:
    """The samples one chunk adds to the recording: its pause (0 for the first chunk), then its audio, faded in
    where it follows another chunk and out where another follows it (the recording's own start and end are no
    seam: a text of one chunk is exactly its synthesis). One new array: a long recording never holds more than
    a chunk and its piece."""
    pause = max(int(pause_samples), 0)
    out = np.zeros(pause + len(audio), np.float32)
    out[pause:] = audio
    _fade_in_place(out[pause:], seconds_to_samples(settings.fade), fade_in, fade_out)
    return out


def pause_samples(after_paragraph: bool, settings: JoinSettings) -> int:
    return seconds_to_samples(settings.paragraph_pause if after_paragraph else settings.sentence_pause)


class PausePlanner:
    """The pause before each piece of a recording, the one rule the recording and its length estimate share:
    none before the first piece with audio, a paragraph pause when a paragraph ended since the last piece (a
    chunk left out or with nothing to say still ends its paragraph), else a sentence pause. Fed the chunks in
    text order: place() for a chunk that goes into the recording, pass_over() for one that does not."""

    def __init__(self, settings: JoinSettings):
        self.settings = settings
        self.anything_before = False
        self.after_paragraph = False

    def pass_over(self, ends_paragraph: bool) -> None:
        self.after_paragraph = self.after_paragraph or ends_paragraph

    def place(self, ends_paragraph: bool, has_audio: bool = True) -> int:
        """The pause before this chunk's piece, in samples; has_audio False: an empty piece (it starts nothing)."""
        pause = pause_samples(self.after_paragraph, self.settings) if self.anything_before else 0
        self.anything_before = self.anything_before or has_audio
        self.after_paragraph = ends_paragraph
        return pause
