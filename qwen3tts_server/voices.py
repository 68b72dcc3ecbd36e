"""Voice names -> what the engine speaks with, and the voice list (`GET /v1/audio/voices`).

A request names its voice; it never names a file. A Base model speaks with the voices of the app's library
(engine.store.VoiceLibrary: by file name or voice name, any case) made with this model; a CustomVoice model with
its preset speakers; a VoiceDesign model makes its voice from `instructions`, the description."""

from __future__ import annotations

import threading
from pathlib import Path

from engine import (
    EngineError,
    MissingVoiceInput,
    SynthesizerContract,
    VoiceChoice,
    VoiceInput,
    VoiceNeed,
    is_designed,
    voice_for,
)
from engine.store import VoiceLibrary

from .api_errors import ApiError


class VoiceBook:
    """Resolves names for one loaded model: the name becomes the input the model's kind needs, and the engine's
    voice_for turns it into the voice, as for the app and the command line. A library voice is read from its file
    at each request: 4 ms for a voice with 10 s of reference audio (AMD EPYC), next to seconds of speech, so no
    copy is kept that could go stale."""

    def __init__(self, synth: SynthesizerContract, library: VoiceLibrary):
        self.synth = synth
        self.library = library
        self._lock = threading.Lock()  # the library's listing cache is shared by the requests' threads

    def resolve(self, name: str, instructions: str | None) -> VoiceChoice:
        """The engine's voice for a request, or ApiError 400 saying which names there are."""
        needs = self.synth.kind.needs
        if needs == VoiceNeed.DESCRIPTION:
            given, not_usable = VoiceInput(description=instructions), "voice_not_found"
        elif not name:
            raise ApiError(400, f"The request needs 'voice': {self._names_hint()}", "missing_field", "voice")
        elif needs == VoiceNeed.SPEAKER:
            given, not_usable = VoiceInput(speaker=name), "voice_not_found"
        else:
            with self._lock:
                entry = self.library.find(name)
            if entry is None:
                raise ApiError(400, f"No voice is called {name!r}. {self._names_hint()}", "voice_not_found", "voice")
            if is_designed(entry):
                raise ApiError(400, f"{entry.name!r} is a designed voice: open it once in the app with this model to "
                                    "make it a voice the model can speak with.", "voice_not_usable", "voice")
            given, not_usable = VoiceInput(voice=entry.path), "voice_not_usable"
        try:
            return voice_for(self.synth, given)
        except MissingVoiceInput:  # only a description can be missing here: the name was checked above
            raise ApiError(400, "This VoiceDesign model makes its voice from a description: send it as "
                                "instructions, e.g. \"A warm, low female voice, calm and a little husky.\"",
                           "missing_field", "instructions") from None
        except (OSError, EngineError) as e:
            said = f"The voice {given.voice.stem!r} cannot be used: {e}" if isinstance(given.voice, Path) else str(e)
            raise ApiError(400, said, not_usable, "voice") from None

    def listing(self) -> list[dict]:
        """What `GET /v1/audio/voices` lists: the voices this model can speak with, each {id, name, ...}."""
        needs = self.synth.kind.needs
        if needs == VoiceNeed.SPEAKER:
            return [{"id": s.name, "name": s.label, "type": "speaker"} for s in self.synth.kind.speakers]
        if needs == VoiceNeed.DESCRIPTION:
            return []
        with self._lock:
            entries = self.library.entries()
        model_id = self.synth.model_id
        return [{"id": e.path.stem, "name": e.name, "type": "library", "language": e.language,
                 "in_context": e.icl}
                for e in entries if not is_designed(e) and (not model_id or e.model_id == model_id)]

    def _names_hint(self) -> str:
        names = [v["id"] for v in self.listing()]
        if not names:
            return ("This model has no voices in the library yet: make one in the app (Voices) with this model, "
                    "then name it here.")
        shown = ", ".join(names[:20]) + (", ..." if len(names) > 20 else "")
        return f"Voices: {shown} (GET /v1/audio/voices lists them)."
