"""Talker prompt rows: Base x-vector and ICL clones, CustomVoice speakers, VoiceDesign.

Every prompt row is a text-track vector plus a codec-track vector, as the official generate lays them out. The
functions here only arrange rows; embedding lookups are passed in, so this module needs no network.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import TextError
from ..runtime.manifest_parts import TextPart

Rows = Callable[[Sequence[int]], np.ndarray]  # ids -> (n, H) float32


@dataclass(frozen=True)
class PromptIds:
    """Text-side and codec-side control ids, from the bundle's "text" part (never hard-coded)."""

    tts_pad: int
    tts_bos: int
    tts_eos: int
    codec_pad: int
    codec_bos: int
    codec_eos: int
    think: int
    nothink: int
    think_bos: int
    think_eos: int
    language_ids: dict[str, int]

    @classmethod
    def from_part(cls, part: TextPart) -> PromptIds:
        return cls(
            tts_pad=part.id("tts_pad_token_id"), tts_bos=part.id("tts_bos_token_id"),
            tts_eos=part.id("tts_eos_token_id"), codec_pad=part.id("codec_pad_id"), codec_bos=part.id("codec_bos_id"),
            codec_eos=part.id("codec_eos_token_id"), think=part.id("codec_think_id"),
            nothink=part.id("codec_nothink_id"), think_bos=part.id("codec_think_bos_id"),
            think_eos=part.id("codec_think_eos_id"), language_ids=dict(part.codec_language_id),
        )

    def languages(self) -> list[str]:
        """"auto" and every language the checkpoint names (dialects are CustomVoice speaker properties)."""
        return ["auto"] + [k for k in self.language_ids if "dialect" not in k]


@dataclass
class Prompt:
    prefill: np.ndarray  # (L, H) float32
    trailing: np.ndarray  # (n, H) float32: added to decode step k's input while k < n, then tpad
    tpad: np.ndarray  # (H,) float32

    def text_row(self, step: int) -> np.ndarray:
        return self.trailing[step] if step < len(self.trailing) else self.tpad


def codec_head_ids(ids: PromptIds, language: str) -> list[int]:
    """The think / language part of the codec track (before the speaker row)."""
    lang = language.lower()
    if lang == "auto":
        return [ids.nothink, ids.think_bos, ids.think_eos]
    if lang not in ids.language_ids:
        raise TextError(f"unknown language {language!r}; choose one of {', '.join(ids.languages())}")
    return [ids.think, ids.think_bos, ids.language_ids[lang], ids.think_eos]


def split_target_ids(input_ids: Sequence[int]) -> tuple[list[int], list[int]]:
    """(role ids[0:3], text proper ids[3:-5]) of a templated target."""
    ids = list(input_ids)
    if len(ids) < 9:
        raise TextError("the text is empty; type something to speak")
    return ids[:3], ids[3:-5]


def build_prompt(
    input_ids: Sequence[int],
    language: str,
    speaker_row: np.ndarray | None,
    ids: PromptIds,
    text_rows: Rows,
    codec_rows: Rows,
    non_streaming: bool = False,
    ref_ids: Sequence[int] | None = None,
    ref_frame_rows: np.ndarray | None = None,
    instruct_ids: Sequence[int] | None = None,
) -> Prompt:
    """Prefill and trailing rows as the official Qwen3TTSForConditionalGeneration.generate builds them.

    input_ids: the templated target ids; speaker_row: the x-vector (raw, talker width) of a Base clone, the
    codec row C(spk_id) of a CustomVoice speaker, None for VoiceDesign; language: the codec language key
    (a dialect speaker's dialect already substituted, see model_kind.prompt_language).
    ICL when ref_ids (templated reference ids) and ref_frame_rows (T_ref, H) = F(reference frames) are given.
    instruct_ids (the templated instruction): text-only rows placed before the role rows.
    """
    role, text = split_target_ids(input_ids)
    special = text_rows([ids.tts_bos, ids.tts_eos, ids.tts_pad])
    tbos, teos, tpad = special[0], special[1], special[2]

    head = codec_head_ids(ids, language)
    codec = [codec_rows(head)]
    if speaker_row is not None:
        codec.append(np.asarray(speaker_row, np.float32).reshape(1, -1))
    codec.append(codec_rows([ids.codec_pad, ids.codec_bos]))
    codec_seq = np.concatenate(codec, axis=0)  # (K, H)
    k = codec_seq.shape[0]

    # role rows (text only), then the head block: K-2 TPAD + TBOS over codec rows 0..K-2
    head_text = np.concatenate([np.repeat(tpad[None], k - 2, axis=0), tbos[None]], axis=0)
    rows = [text_rows(instruct_ids)] if instruct_ids else []
    rows += [text_rows(role), head_text + codec_seq[:-1]]
    bos_row = codec_seq[-1]

    if ref_ids is not None or ref_frame_rows is not None:
        if ref_ids is None or ref_frame_rows is None:
            raise ValueError("ICL needs both the reference ids and the reference frame rows")
        ref_text = list(ref_ids)[3:-2]
        a = np.concatenate([text_rows(ref_text + text), teos[None]], axis=0)  # T1 rows
        b = np.concatenate([bos_row[None], np.asarray(ref_frame_rows, np.float32)], axis=0)  # T2 rows
        t1, t2 = a.shape[0], b.shape[0]
        if non_streaming:
            pad_rows = codec_rows([ids.codec_pad] * t1)
            rows += [a + pad_rows, b + tpad[None]]
            trailing = tpad[None]
        elif t1 > t2:
            rows.append(a[:t2] + b)
            trailing = a[t2:]
        else:
            a = np.concatenate([a, np.repeat(tpad[None], t2 - t1, axis=0)], axis=0)
            rows.append(a + b)
            trailing = tpad[None]
    elif non_streaming:
        body = np.concatenate([text_rows(text), teos[None]], axis=0)
        rows += [body + codec_rows([ids.codec_pad] * body.shape[0]), (tpad + bos_row)[None]]
        trailing = tpad[None]
    else:
        rows.append(text_rows(text[:1]) + bos_row[None])
        trailing = np.concatenate([text_rows(text[1:]), teos[None]], axis=0) if len(text) > 1 else teos[None]

    prefill = np.ascontiguousarray(np.concatenate(rows, axis=0), dtype=np.float32)
    return Prompt(prefill=prefill, trailing=np.ascontiguousarray(trailing, np.float32), tpad=tpad.astype(np.float32))
