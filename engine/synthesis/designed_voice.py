"""A designed voice: the audio a VoiceDesign model made from a description, kept as a reference recording.

VoiceDesign makes a new voice each time; for a consistent character the model's authors recommend designing
once and then cloning that audio with a Base model. A designed voice is a Voice with no x-vector (it belongs to
no model yet): its reference audio and the text it speaks are what a Base model's create_voice needs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..codec_format import SAMPLE_RATE
from ..errors import VoiceError
from ..text.tokenizer import clean_text
from ..voice import Voice

DESIGN_PREFIX = "design:"  # model_id of a designed voice: matches no model, so every app offers to make it


def designed_voice(audio: np.ndarray, text: str, description: str, model_id: str, name: str = "",
                   language: str = "auto") -> Voice:
    """Keep `audio` (24 kHz mono float32, what the VoiceDesign model said) and `text` (what it said) as a voice
    a Base model can clone. `description` is the instruction that designed it (kept as the default name)."""
    samples = np.asarray(audio, np.float32).reshape(-1)
    if samples.size < SAMPLE_RATE // 2 or not np.isfinite(samples).all():
        raise VoiceError("The designed audio is too short to keep as a voice (it needs at least half a second).")
    text = clean_text(text, "designed voice's text")
    name = (name or description or "designed voice").strip()[:80]
    return Voice(xvector=np.zeros(0, np.float32), model_id=DESIGN_PREFIX + model_id, ref_text=text,
                 language=language, name=name, ref_audio=samples)


def is_designed(voice: Voice | Any) -> bool:
    """True for a designed voice (made by designed_voice, not yet cloned by a Base model): a Voice, or anything
    with its model_id, such as the voice library's VoiceSummary."""
    return str(getattr(voice, "model_id", "") or "").startswith(DESIGN_PREFIX)
