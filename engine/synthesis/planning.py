"""The rules a synthesis request is checked and sized by, before anything runs: a cloned voice fits this model,
a reference fits its context, a text fits one synthesis, and the frame cap (the caller's, or a default from the
text's estimated length). Plain functions of the model's numbers; the Synthesizer applies them."""
from __future__ import annotations

import numpy as np

from ..codec_format import FRAME_RATE, NUM_CODE_GROUPS
from ..errors import TextError, VoiceError
from ..text.length import estimated_frames
from ..text.tokenizer import clean_text
from ..types import GenerationSettings
from ..voice import Voice
from .designed_voice import is_designed

# a text longer than this many characters per position cannot fit the context, whatever --max-frames says
# (generous: ordinary text is 3-5 characters a token); refused before it is tokenized
MAX_CHARS_PER_POSITION = 64
PRODUCT_MAX_SECONDS = 300.0  # one synthesis speaks at most 5 minutes unless --max-frames asks for more
MIN_DEFAULT_FRAMES = 125  # a default cap never below 10 s
POSITION_MARGIN = 8


def check_clone_voice(voice: Voice, model_id: str, hidden_size: int, codebook_size: int, max_positions: int) -> None:
    """VoiceError unless this model can clone with `voice`: not a designed voice, made by this model, a finite
    x-vector of its width, reference codes in its range and within its context."""
    if is_designed(voice):
        raise VoiceError(f"{voice.name or 'This voice'!r} is a designed voice: it holds only its reference "
                         "recording. Make it into a voice for this model first (create_voice from its "
                         "reference audio and text).")
    if voice.model_id and model_id and voice.model_id != model_id:
        what = f"voice {voice.name!r}" if voice.name else "this voice"
        raise VoiceError(f"{what} was made with a different model; create it again from its reference audio")
    x = np.asarray(voice.xvector)
    if x.ndim != 1 or x.shape[0] != hidden_size:
        raise VoiceError(f"the voice's x-vector has shape {x.shape}; this model needs ({hidden_size},)")
    if not np.isfinite(x).all():
        raise VoiceError("The voice's x-vector contains invalid values (NaN or infinity); create the voice "
                         "again from its reference audio.")
    if voice.ref_codes is not None and voice.ref_text:
        codes = np.asarray(voice.ref_codes)
        if codes.ndim != 2 or codes.shape[1] != NUM_CODE_GROUPS or codes.shape[0] < 1:
            raise VoiceError(f"the voice's reference codes have shape {codes.shape}; expected (frames, 16)")
        if int(codes.min()) < 0 or int(codes.max()) >= codebook_size:
            raise VoiceError("the voice's reference codes are out of range for this model")
        clean_text(voice.ref_text, "reference text")
        check_reference_frames(codes.shape[0], max_positions)


def check_reference_frames(frames: int, max_positions: int) -> None:
    """VoiceError when a reference of `frames` frames takes more than half the model's context."""
    limit = max_positions // 2
    if frames > limit:
        raise VoiceError(
            f"the reference is too long ({frames / FRAME_RATE:.0f} s); this model's context allows at most "
            f"{limit / FRAME_RATE:.0f} s of reference audio"
        )


def check_text_fits(text: str, settings: GenerationSettings, max_positions: int) -> None:
    """TextError for a text no synthesis can speak, said before the tokenizer sees it (a 5 MB text without spaces
    took 2.77 GB to tokenize)."""
    product = int(PRODUCT_MAX_SECONDS * FRAME_RATE)
    if settings.max_frames is None and estimated_frames(text) > product:
        raise TextError(_too_long(estimated_frames(text), product))
    if len(text) > MAX_CHARS_PER_POSITION * max_positions:
        raise TextError(f"the text is too long for one synthesis ({len(text):,} characters); split it into "
                        "shorter parts")


def frame_limit(max_new_tokens: int, max_positions: int, prefill_rows: int) -> int:
    """The most frames any synthesis may run: generation_config max_new_tokens - 1 and the position budget."""
    return max(0, min(max_new_tokens - 1, max_positions - prefill_rows - POSITION_MARGIN))


def check_room(hard: int, prefill_rows: int, max_positions: int, instruct: bool, icl: bool) -> None:
    """TextError when the prompt leaves less than a second to speak (`hard` frames): "at most 0 s" would blame
    the text, so the message names what fills the context."""
    if hard < FRAME_RATE:
        parts = [p for p, present in (("instruction", instruct), ("reference", icl), ("text", True)) if present]
        raise TextError(
            f"the prompt fills this model's context: the {' and '.join(parts)} take {prefill_rows} "
            f"of its {max_positions} positions, leaving no room to speak; shorten the {parts[0]}")


def frame_cap(text: str, settings: GenerationSettings, hard: int, streamed_text: int) -> tuple[int, int]:
    """(the frame cap, the estimated frames) of a synthesis of `text` whose prompt leaves `hard` frames and streams
    `streamed_text` text rows (0 when the text is all in the prefill). The caller's cap if it set one (at most
    `hard`), else three times the estimate with a margin, at most PRODUCT_MAX_SECONDS."""
    est = max(estimated_frames(text), streamed_text)
    if settings.max_frames is not None:
        n = int(settings.max_frames)
        if n > hard:
            raise TextError(f"max frames must be between 1 and {hard} for this text and model, not {n}")
        return n, est
    product = min(hard, int(PRODUCT_MAX_SECONDS * FRAME_RATE))
    if est > product or streamed_text > product:
        raise TextError(_too_long(est, product))
    return min(product, max(3 * est, est + 75, MIN_DEFAULT_FRAMES, streamed_text + 75)), est


def _too_long(frames: int, most: int) -> str:
    return (f"the text is too long: about {frames / FRAME_RATE:.0f} s of speech, and one synthesis makes at most "
            f"{most / FRAME_RATE:.0f} s; split it into shorter parts")
