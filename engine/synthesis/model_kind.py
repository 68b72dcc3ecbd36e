"""What a model speaks with: Base clones a voice, CustomVoice has preset speakers (the 1.7B one also follows a
style instruction), VoiceDesign makes the voice from a description.

Everything here mirrors the official qwen-tts wrapper (generate_custom_voice / generate_voice_design) and
Qwen3TTSForConditionalGeneration.generate: speaker names are case-insensitive, a dialect speaker speaks its
dialect when the language is chinese or auto, and the 0.6B CustomVoice model drops any instruction.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from ..errors import TextError, VoiceError
from ..runtime.bundle import Bundle
from ..runtime.manifest_parts import TextPart
from ..voice import Speaker


class InstructIgnoredWarning(UserWarning):
    """An instruction was given to a model that drops it (0.6B CustomVoice, as the official implementation)."""

BASE = "base"
CUSTOM_VOICE = "custom_voice"
VOICE_DESIGN = "voice_design"
KIND_LABELS = {BASE: "Base", CUSTOM_VOICE: "CustomVoice", VOICE_DESIGN: "VoiceDesign"}


class VoiceNeed(StrEnum):
    """What a model kind speaks with: the input a user gives it (engine/synthesis/voice_input.py turns it into a
    voice)."""

    REFERENCE = "reference"  # Base: reference audio, or a voice saved from one
    SPEAKER = "speaker"  # CustomVoice: one of its preset speakers
    DESCRIPTION = "description"  # VoiceDesign: the voice described in words


NEEDS = {BASE: VoiceNeed.REFERENCE, CUSTOM_VOICE: VoiceNeed.SPEAKER, VOICE_DESIGN: VoiceNeed.DESCRIPTION}
DIALECT_LANGUAGES = ("chinese", "auto")  # languages a dialect speaker turns into its dialect


@dataclass(frozen=True)
class ModelKind:
    kind: str = BASE  # BASE | CUSTOM_VOICE | VOICE_DESIGN (a bundle whose config names none is a Base model)
    size: str = ""  # tts_model_size, e.g. "0b6" / "1b7"
    speakers: tuple[Speaker, ...] = ()
    languages: tuple[str, ...] = ("auto",)  # what a user may ask for (dialects belong to speakers)

    @classmethod
    def from_part(cls, part: TextPart) -> ModelKind:
        """From the bundle's text part (the converter records config.json's kind, size and speaker table)."""
        speakers = []
        for name, codec_id in sorted(part.spk_id.items()):
            if isinstance(codec_id, list):  # some configs store one-element lists
                codec_id = codec_id[0]
            dialect = part.spk_is_dialect.get(name) or None
            speakers.append(Speaker(name.lower(), codec_id, dialect))
        langs = ("auto",) + tuple(k for k in part.codec_language_id if "dialect" not in k)
        return cls(kind=part.tts_model_type or BASE, size=part.tts_model_size, speakers=tuple(speakers),
                   languages=langs)

    @classmethod
    def of_bundle(cls, bundle: str | os.PathLike | Any) -> ModelKind:
        """Read from a bundle folder (or an open Bundle) without loading any network."""
        b = bundle if isinstance(bundle, Bundle) else Bundle.open(bundle)
        return cls.from_part(b.record(TextPart))

    @property
    def label(self) -> str:
        return KIND_LABELS.get(self.kind, self.kind)

    @property
    def needs(self) -> VoiceNeed:
        """What the user gives this kind to speak with (VoiceNeed)."""
        return NEEDS.get(self.kind, VoiceNeed.REFERENCE)

    @property
    def honours_instruct(self) -> bool:
        """The official generate_custom_voice drops the instruct when `tts_model_size in "0b6"` (a substring
        test, kept as is: an empty size counts as 0.6B); VoiceDesign always uses it; Base takes none."""
        if self.kind == VOICE_DESIGN:
            return True
        return self.kind == CUSTOM_VOICE and self.size not in "0b6"

    @property
    def default_non_streaming(self) -> bool:
        """The wrappers' default text mode: generate_voice_clone streams the text, the others do not."""
        return self.kind != BASE

    def speaker(self, name: str) -> Speaker:
        """The preset speaker called `name` (any case); a clear refusal lists the known ones."""
        if self.kind != CUSTOM_VOICE:
            raise VoiceError(self._no_speakers())
        key = (name or "").strip().lower()
        for s in self.speakers:
            if s.name == key:
                return s
        known = ", ".join(s.name for s in self.speakers)
        raise VoiceError(f"Unknown speaker {name!r}; this model's speakers are: {known}.")

    def _no_speakers(self) -> str:
        if self.kind == VOICE_DESIGN:
            return ("This VoiceDesign model has no preset speakers: describe the voice with an instruction "
                    "instead.")
        return ("This Base model has no preset speakers: it clones a voice from reference audio (preset "
                "speakers need a CustomVoice model).")

    def refuse_clone(self) -> None:
        """Raise if this model cannot speak with a cloned voice."""
        if self.kind == CUSTOM_VOICE:
            raise VoiceError("Voice cloning needs a Base model; this CustomVoice model speaks with its preset "
                             f"speakers: {', '.join(s.name for s in self.speakers)}.")
        if self.kind == VOICE_DESIGN:
            raise VoiceError("Voice cloning needs a Base model; this VoiceDesign model makes its voice from the "
                             "instruction (save a designed voice and use it with a Base model).")
        if self.kind != BASE:
            raise VoiceError(f"This model's kind {self.kind!r} is not supported.")

    def check_instruct(self, instruct: str | None) -> str:
        """The instruction as the model will use it: "" when none is given or the model drops it.
        Base models take none (the official voice-clone call has no such argument)."""
        text = instruct or ""
        if text and self.kind == BASE:
            raise TextError("This Base model takes no instruction; style instructions need a CustomVoice 1.7B "
                            "or a VoiceDesign model.")
        if "\x00" in text:
            raise TextError("The instruction contains a NUL character.")
        if text and not self.honours_instruct:
            note = self.instruct_note(text) or "This model ignores style instructions; the instruction was not used."
            warnings.warn(note, InstructIgnoredWarning, stacklevel=3)
            return ""
        return text

    def instruct_note(self, instruct: str | None) -> str | None:
        """A sentence for the user when an instruction will be ignored (0.6B CustomVoice), else None."""
        if instruct and self.kind == CUSTOM_VOICE and not self.honours_instruct:
            return ("This 0.6B CustomVoice model ignores style instructions (as the official implementation "
                    "does); the instruction was not used.")
        return None


def prompt_language(language: str, speaker: Speaker | None) -> str:
    """The language key of the codec prompt: a dialect speaker's dialect replaces chinese and auto."""
    lang = language.lower()
    if speaker is not None and speaker.dialect and lang in DIALECT_LANGUAGES:
        return speaker.dialect
    return lang
