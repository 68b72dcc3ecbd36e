"""What the user gave to speak with, and the one function that turns it into the voice a model kind needs.

    voice = voice_for(synth, VoiceInput(reference="me.wav", ref_text="..."))   # Base: a cloned voice
    voice = voice_for(synth, VoiceInput(speaker="serena"))                    # CustomVoice: a preset speaker
    voice = voice_for(synth, VoiceInput(description="A warm, low voice."))   # VoiceDesign: None (the description
                                                                             # is the request's instruct)
A designed voice (a VoiceDesign model's audio kept as a voice) given to a Base model is cloned from its recording
and text, as reference audio is (slow). The model kind says what it needs (ModelKind.needs, a VoiceNeed); input it cannot
use is refused in one line that says what it does instead, and missing input raises MissingVoiceInput, whose
`needs` lets each front end name its own control (a command-line flag, a panel, a request field)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from ..codec_format import SAMPLE_RATE
from ..errors import VoiceError
from ..voice import Speaker, Voice, VoiceChoice
from .contract import AudioSource, SynthesizerContract
from .designed_voice import is_designed
from .model_kind import VoiceNeed


class MissingVoiceInput(VoiceError):
    """The model kind needs input that was not given: `needs` says which (a VoiceNeed)."""

    def __init__(self, message: str, needs: VoiceNeed):
        super().__init__(message)
        self.needs = needs


@dataclass(frozen=True)
class VoiceInput:
    """What the user chose: a saved voice (or its file) or reference audio (with its transcript; timbre_only drops
    it), a preset speaker's name, or a written description of the voice."""

    voice: Voice | str | Path | None = None
    reference: AudioSource | None = None
    ref_text: str | None = None
    timbre_only: bool = False
    speaker: str | Speaker | None = None
    description: str | None = None


def voice_for(synth: SynthesizerContract, given: VoiceInput) -> VoiceChoice:
    """The voice `synth`'s model kind speaks `given` with (a reference is cloned here: slow), or VoiceError."""
    kind = synth.kind
    if given.voice is not None or given.reference is not None:
        kind.refuse_clone()  # CustomVoice / VoiceDesign explain what they do instead
    if given.speaker is not None and kind.needs != VoiceNeed.SPEAKER:
        kind.speaker(given.speaker if isinstance(given.speaker, str) else given.speaker.name)  # explains why not
    if kind.needs == VoiceNeed.DESCRIPTION:
        if not (given.description or "").strip():
            raise MissingVoiceInput('This VoiceDesign model makes its voice from a description: describe the voice '
                                    '(e.g. "A warm, low female voice, calm and a little husky.").', VoiceNeed.DESCRIPTION)
        return None
    if kind.needs == VoiceNeed.SPEAKER:
        if given.speaker is None:
            raise MissingVoiceInput(f"This CustomVoice model speaks with one of its preset speakers: "
                                    f"{', '.join(s.name for s in kind.speakers)}.", VoiceNeed.SPEAKER)
        return kind.speaker(given.speaker if isinstance(given.speaker, str) else given.speaker.name)
    if given.voice is not None and given.reference is not None:
        raise VoiceError("Give either a saved voice or reference audio, not both.")
    if given.voice is not None:
        voice = given.voice if isinstance(given.voice, Voice) else Voice.load(given.voice)
        if is_designed(voice):
            return _cloned(synth, voice, given.timbre_only)
        called = None if isinstance(given.voice, Voice) else f"voice {Path(given.voice).name}"  # as Voice.load says
        voice = _fitted(voice, synth.model_id, called)
        return replace(voice, ref_codes=None, ref_text=None) if given.timbre_only and voice.icl else voice
    if given.reference is None:
        raise MissingVoiceInput("This Base model clones a voice: give reference audio or a saved voice.", VoiceNeed.REFERENCE)
    return synth.create_voice(given.reference, ref_text=None if given.timbre_only else given.ref_text)


def _fitted(voice: Voice, model_id: str, called: str | None = None) -> Voice:
    """A voice as this model needs it, as Voice.load gives it from a file: its making for this model (Voice.others)
    when it was made for several; refused when it was made by other models only."""
    fitted = voice.for_model(model_id) if model_id else voice
    if fitted is None:
        what = called or (f"voice {voice.name!r}" if voice.name else "this voice")
        raise VoiceError(f"{what} was made with a different model; create it again from its reference audio")
    return fitted


def _cloned(synth: SynthesizerContract, designed: Voice, timbre_only: bool) -> Voice:
    """A designed voice made into this model's: cloned from its recording, with the text it speaks (unless only
    the timbre is wanted), under its name and language."""
    if designed.ref_audio is None or len(designed.ref_audio) == 0:
        raise VoiceError(f"The designed voice {designed.name!r} has lost its recording; design it again.")
    return synth.create_voice((designed.ref_audio, SAMPLE_RATE), ref_text=None if timbre_only else designed.ref_text,
                              name=designed.name, language=designed.language)
