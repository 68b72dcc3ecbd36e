"""What a batch line speaks with, by the names in its Voice and Instruction columns, for the loaded model kind:
a preset speaker (CustomVoice), or a voice from the library, read in the batch's thread (Base); either way the
engine's voice_for makes the name into the voice, as for the Studio tab, the command line and the server."""

from __future__ import annotations

from collections.abc import Callable

from ..context import AppContext
from ..engine_adapter import (
    Voice,
    VoiceChoice,
    VoiceError,
    VoiceInput,
    VoiceNeed,
    kind_of,
    takes_style_instructions,
    voice_for,
)
from ..widgets.speaker_panel import SpeakerPanel
from ..widgets.voice_panel import VoicePanel


class BatchVoices:
    def __init__(self, ctx: AppContext, voice_panel: VoicePanel, speaker_panel: SpeakerPanel):
        self.ctx = ctx
        self.voice_panel = voice_panel
        self.speaker_panel = speaker_panel

    def names(self) -> list[str]:
        """The batch's voice column: the model's speakers (CustomVoice) or the voice library."""
        if kind_of(self.ctx.synth).needs == VoiceNeed.SPEAKER:
            return self.speaker_panel.speaker_names()
        return self.voice_panel.voice_names()

    def instruct(self, text: str) -> str | None:
        """A batch line's style instruction ("" = the one on the Studio tab); None where the model ignores it."""
        if not takes_style_instructions(self.ctx.synth):
            return None
        return text.strip() or self.speaker_panel.instruct()

    def voice(self, name: str) -> VoiceChoice | Callable[[], Voice]:
        """A batch line's voice by name ("" = the one selected): a speaker, or a function that loads the voice
        file (a designed voice is cloned with this Base model before its line). Raises VoiceError."""
        synth = self.ctx.synth
        if synth is None:
            raise VoiceError("Open a model first.")
        if synth.kind.needs == VoiceNeed.DESCRIPTION:
            raise VoiceError("A VoiceDesign model makes one voice per description: design it, save it as a voice, "
                             "then run the batch with a Base model.")
        if synth.kind.needs == VoiceNeed.SPEAKER:
            return voice_for(synth, VoiceInput(speaker=name or self.speaker_panel.selected_name()))
        path = self.voice_panel.entry_by_name(name).path  # which file: here; reading it: in the batch's thread

        def load() -> Voice:
            made = voice_for(synth, VoiceInput(voice=path))  # a designed voice is cloned with this model here
            assert isinstance(made, Voice)  # a Base model's voice from a file
            return made
        return load
