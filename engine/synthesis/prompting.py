"""The prompt of one synthesis from its text and voice: which row speaks (a cloned voice's x-vector, a preset
speaker's codec row, or none for a designed voice), the reference of in-context cloning, the instruction, and the
tokenized text, assembled by text/prompt.py's build_prompt."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import TextError, VoiceError
from ..text.prompt import Prompt, PromptIds, build_prompt
from ..text.tokenizer import TextTokenizer, clean_text
from ..voice import Speaker, Voice, VoiceChoice
from .model_kind import ModelKind, VoiceNeed, prompt_language

Rows = Callable[[Sequence[int]], np.ndarray]


@dataclass(frozen=True)
class PromptMaker:
    """What a prompt is made from: the model kind, its special ids and tokenizer, its text table, and the
    talker's codec rows and the code predictor's frame rows (of the networks loaded now)."""

    kind: ModelKind
    ids: PromptIds
    tokenizer: TextTokenizer
    text_table: np.ndarray
    codec_rows: Rows
    frame_rows: Callable[[np.ndarray], np.ndarray]

    def text_rows(self, ids: Sequence[int]) -> np.ndarray:
        """T(ids): projected text rows (n, H) float32."""
        arr = np.asarray(list(ids), dtype=np.int64).reshape(-1)
        if arr.size and (int(arr.min()) < 0 or int(arr.max()) >= self.text_table.shape[0]):
            raise TextError("the text produced a token id outside the model's text vocabulary")
        return np.asarray(self.text_table[arr], dtype=np.float32).reshape(arr.size, -1)

    def speaker_row(self, voice: VoiceChoice, check_clone: Callable[[Voice], None]
                    ) -> tuple[np.ndarray | None, Speaker | None, Voice | None]:
        """(speaker row of the prompt, the preset speaker, the ICL voice) for this model kind; check_clone(voice)
        refuses a cloned voice this model cannot use."""
        if isinstance(voice, Voice):
            self.kind.refuse_clone()
            check_clone(voice)
            return voice.xvector, None, voice if voice.icl else None
        if isinstance(voice, (str, Speaker)):
            speaker = self.kind.speaker(voice if isinstance(voice, str) else voice.name)
            return self.codec_rows([speaker.codec_id])[0], speaker, None
        if voice is not None:
            raise VoiceError(f"A voice must be a Voice, a speaker name or None, not {type(voice).__name__}.")
        if self.kind.needs == VoiceNeed.DESCRIPTION:  # the voice is the instruction
            return None, None, None
        if self.kind.needs == VoiceNeed.SPEAKER:
            raise VoiceError(f"Choose a speaker: {', '.join(s.name for s in self.kind.speakers)}.")
        raise VoiceError("Choose a voice to clone: this Base model speaks with a voice made from reference audio.")

    def build(self, text: str, voice: VoiceChoice, language: str, non_streaming: bool | None,
              instruct: str | None, check_clone: Callable[[Voice], None]) -> Prompt:
        """Prefill and trailing rows for this text and voice (language already checked): a cloned Voice on a Base
        model (ICL when it has codes and a transcript), a speaker (name or Speaker) on a CustomVoice model, None
        on a VoiceDesign model. non_streaming None: the model kind's default text mode."""
        clean_text(text)
        speaker_row, speaker, icl_voice = self.speaker_row(voice, check_clone)
        instruct = self.kind.check_instruct(instruct)
        input_ids = self.tokenizer.target_ids(text)
        if len(input_ids) < 9:
            raise TextError("the text is empty; type something to speak")
        ref_ids = ref_rows = None
        if icl_voice is not None:
            ref_ids = self.tokenizer.reference_ids(icl_voice.ref_text or "")
            if len(ref_ids) < 6:
                raise VoiceError("the voice's reference text is empty; create the voice again with its transcript")
            ref_rows = self.frame_rows(np.asarray(icl_voice.ref_codes, np.int64))
        if non_streaming is None:
            non_streaming = self.kind.default_non_streaming
        return build_prompt(
            input_ids, prompt_language(language, speaker), speaker_row, self.ids, self.text_rows,
            self.codec_rows, non_streaming=non_streaming, ref_ids=ref_ids, ref_frame_rows=ref_rows,
            instruct_ids=self.tokenizer.instruct_ids(instruct) if instruct else None,
        )
