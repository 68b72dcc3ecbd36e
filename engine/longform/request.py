"""What a caller asks of the engine, as one value: SynthesisRequest. The command line builds one from its
arguments, the app from its widgets, a batch from each of its lines; Synthesizer.speak(request) does the rest
(engine/longform/runner.py). A short text is a long text of one chunk: the same request, the same events."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import TextError
from ..text.splitter import DEFAULT_MAX_CHARS, LANGUAGE_CODES, TextChunk, split_text
from ..types import GenerationSettings
from ..voice import VoiceChoice
from .joining import JoinSettings
from .runaway import GuardSettings


@dataclass(frozen=True)
class LongTextOptions:
    """How a text becomes one recording: the longest chunk, the pauses and fades between chunks, the runaway
    guard, and how many chunks are generated side by side."""

    max_chars: int = DEFAULT_MAX_CHARS
    join: JoinSettings = field(default_factory=JoinSettings)
    guard: GuardSettings = field(default_factory=GuardSettings)
    # chunks generated side by side (sharing each model step); 1: one after the other, the first audio
    # soonest; None: the model's suggested_batch_size. Either way every chunk gets the same codes.
    batch_size: int | None = 1


@dataclass(frozen=True)
class SynthesisRequest:
    """One text to speak, and everything about how. voice: a Voice (Base), a preset speaker or its name
    (CustomVoice), None (VoiceDesign: instruct describes the voice). settings: sampling and output (seed, frame
    cap per chunk, stream_audio: audio while a one-chunk text is generated, codes_only). options: splitting,
    joining, the runaway guard and chunks side by side."""

    text: str
    voice: VoiceChoice = None
    language: str = "auto"
    settings: GenerationSettings = field(default_factory=GenerationSettings)
    instruct: str | None = None
    options: LongTextOptions = field(default_factory=LongTextOptions)

    def chunks(self) -> list[TextChunk]:
        """The chunks this request's text is spoken in (TextError when there is nothing to speak)."""
        chunks = split_for_synthesis(self.text, self.language, self.options.max_chars)
        if not chunks:
            raise TextError("The text is empty; type something to speak.")
        return chunks


def split_for_synthesis(text: str, language: str = "auto", max_chars: int = DEFAULT_MAX_CHARS) -> list[TextChunk]:
    """The chunks a request is spoken in (a model language the splitter does not know splits as "auto")."""
    rules = language if (language or "auto").strip().lower() in LANGUAGE_CODES else "auto"
    return split_text(text, max_chars=max_chars, language=rules)


def speakable(chunk: TextChunk) -> bool:
    """A chunk with no letter or digit ("* * *", "—") has nothing to say: only its pause is kept."""
    return any(ch.isalnum() for ch in chunk.text)
