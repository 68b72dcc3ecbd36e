"""How long the recording of a long text will be, known before its first chunk is generated: what
Synthesizer.speak will put into it (each chunk's estimated length and the pause before it), refined as chunks
finish. A player can pace itself by it and a waveform scale to it while the recording grows.

    length = RecordingLength.of(speech)   # speech = synth.speak(request)
    length.samples            # the whole recording, estimated
    for ev in speech:
        if length.see(ev):    # a chunk finished or was left out: length.samples changed
            ...
"""

from __future__ import annotations

from ..codec_format import SAMPLES_PER_FRAME
from ..errors import TextError
from ..text.length import estimated_frames
from ..text.splitter import TextChunk
from .events import ChunkAudio, ChunkSkipped, LongEvent, Speech
from .joining import JoinSettings, PausePlanner
from .request import LongTextOptions, speakable, split_for_synthesis


class RecordingLength:
    """The samples a request's recording is expected to have: every chunk it will speak at its estimated
    length (at most max_frames, the per-chunk cap the caller set), with the pause the joining puts before it.
    Fed every event with see(), a chunk in the recording counts at its real length and a left-out chunk not
    at all (the pauses around it follow the joining's rules too)."""

    def __init__(self, text: str, language: str = "auto", options: LongTextOptions | None = None,
                 max_frames: int | None = None):
        options = options or LongTextOptions()
        options.join.check()
        if max_frames is not None and (isinstance(max_frames, bool) or not isinstance(max_frames, int)
                                       or max_frames < 1):
            raise TextError(f"The frame cap must be a whole number of at least 1, not {max_frames!r}.")
        chunks = split_for_synthesis(text, language, options.max_chars)  # (it refuses a text not a str)
        if not chunks:
            raise TextError("The text is empty; type something to speak.")
        self._start(chunks, options.join, max_frames)

    @classmethod
    def of(cls, speech: Speech) -> RecordingLength:
        """The length of the recording `speech` makes, from the chunks it was split into."""
        length = cls.__new__(cls)
        length._start(speech.chunks, speech.request.options.join, speech.request.settings.max_frames)
        return length

    def _start(self, chunks: list[TextChunk], join: JoinSettings, max_frames: int | None) -> None:
        self._chunks = chunks
        self._join = join
        # 0 for a chunk with nothing to say: speak keeps only its pause
        cap = max_frames or float("inf")
        self.chunk_frames = [min(estimated_frames(c.text), cap) if speakable(c) else 0 for c in self._chunks]
        self._pieces: dict[int, int] = {}  # chunk -> samples it added to the recording (its pause + audio)
        self._left_out: set[int] = set()
        self.samples = self._total()

    @property
    def chunks(self) -> int:
        return len(self._chunks)

    def see(self, ev: LongEvent) -> bool:
        """Take in an event of the speech of this text; True when `samples` changed."""
        if not isinstance(ev, (ChunkAudio, ChunkSkipped)):
            return False
        if ev.chunks != len(self._chunks) or not 0 <= ev.chunk < len(self._chunks):
            raise TextError(f"This length was estimated for a text of {len(self._chunks)} chunks, not for chunk "
                            f"{ev.chunk + 1} of {ev.chunks}.")
        if isinstance(ev, ChunkAudio):
            self._pieces[ev.chunk] = len(ev.samples)
        else:
            self._left_out.add(ev.chunk)
        before, self.samples = self.samples, self._total()
        return self.samples != before

    def _total(self) -> int:
        """The recording with the pauses of the recording's own PausePlanner (engine/longform/joining.py)."""
        total, pauses = 0, PausePlanner(self._join)
        for i, chunk in enumerate(self._chunks):
            if i in self._pieces:  # its real piece: pause and audio
                total += self._pieces[i]
                pauses.place(chunk.ends_paragraph, has_audio=self._pieces[i] > 0)
            elif i in self._left_out or not self.chunk_frames[i]:
                pauses.pass_over(chunk.ends_paragraph)
            else:
                total += pauses.place(chunk.ends_paragraph) + int(self.chunk_frames[i]) * SAMPLES_PER_FRAME
        return total
