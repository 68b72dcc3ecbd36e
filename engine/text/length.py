"""How long a text will take to speak, from the text alone: a rough speaking time for progress display and the
frame estimate a synthesis starts from (the synthesizer's job estimate, the long-text runner's chunk estimates and
RecordingLength all use it, so they agree)."""

from __future__ import annotations

import unicodedata

from ..codec_format import FRAME_RATE


def estimate_seconds(text: str) -> float:
    """A rough speaking time for progress display: CJK characters ~0.22 s, other letters/digits ~75 ms,
    punctuation a short pause."""
    seconds = 0.0
    for ch in unicodedata.normalize("NFC", text):
        o = ord(ch)
        if 0x3040 <= o <= 0x30FF or 0x3400 <= o <= 0x9FFF or 0xAC00 <= o <= 0xD7AF or 0xF900 <= o <= 0xFAFF:
            seconds += 0.22
        elif ch.isalnum():
            seconds += 0.075
        elif ch in ",;:、，；：":
            seconds += 0.15
        elif ch in ".!?。！？…\n":
            seconds += 0.3
    return max(seconds, 0.5)


def estimated_frames(text: str) -> int:
    """The frames a synthesis of this text is estimated to take, from the text alone (a synthesis's
    FrameEvent.estimated_frames, which may only be larger when the text has more tokens than that)."""
    return max(int(round(estimate_seconds(text) * FRAME_RATE)), 1)
