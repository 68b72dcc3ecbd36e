"""A request's recording as its chunks finish: Recording takes each finished (or left-out) chunk, in whatever order
chunks end, and gives them back in text order with the pause before each and fades where two chunks meet."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace

from ..codec_format import SAMPLE_RATE
from ..text.splitter import TextChunk
from ..types import SynthesisResult, Timings
from .events import ChunkAudio, ChunkSkipped, LongEvent, LongResult
from .joining import JoinSettings, PausePlanner, joined_piece
from .request import speakable


class Recording:
    """Puts finished chunks into the recording in text order (they may finish in any order): a pause before
    each one (a paragraph pause when a paragraph ended since the last chunk in the recording), then its audio,
    faded where it meets another chunk (a seam), never at the recording's own start and end. A chunk waits here
    only until every chunk before it is done."""

    def __init__(self, chunks: list[TextChunk], join: JoinSettings):
        self.chunks, self.join = chunks, join
        self.next = 0  # the first chunk not yet in the recording (or left out)
        self.waiting: dict[int, tuple[SynthesisResult | None, str, int, bool]] = {}
        self.written = 0
        self.pauses = PausePlanner(join)
        self.skipped: list[ChunkSkipped] = []
        self.last = max((i for i, c in enumerate(chunks) if speakable(c)), default=-1)  # the last chunk to speak
        self.timings = Timings()
        self.ended_by = "eos"

    def done(self, i: int, result: SynthesisResult | None, reason: str, attempts: int,
             streamed: bool = False) -> Iterator[LongEvent]:
        self.waiting[i] = (result, reason, attempts, streamed)
        n = len(self.chunks)
        while self.next < n and (self.next in self.waiting or not speakable(self.chunks[self.next])):
            k, chunk = self.next, self.chunks[self.next]
            self.next += 1
            if not speakable(chunk):
                self.pauses.pass_over(chunk.ends_paragraph)
                continue
            result, reason, attempts, streamed = self.waiting.pop(k)
            if result is None:
                skip = ChunkSkipped(k, n, chunk.text, reason, attempts)
                self.skipped.append(skip)
                yield skip
                self.pauses.pass_over(chunk.ends_paragraph)
                continue
            after_audio = self.pauses.anything_before
            pause = self.pauses.place(chunk.ends_paragraph, has_audio=len(result.audio) > 0)
            piece = joined_piece(result.audio, pause, self.join, fade_in=after_audio, fade_out=k < self.last)
            self._count(result)
            start, self.written = self.written, self.written + len(piece)  # counted before the caller sees it
            yield ChunkAudio(k, n, chunk.text, piece, start, result, attempts, streamed)
            del piece, result

    def made_before(self, below: int, made: dict[int, Callable[[], SynthesisResult]]) -> Iterator[LongEvent]:
        """Put the chunks an earlier run made, up to `below`, into the recording (read one at a time, and only
        when every chunk before them is done: memory stays at one chunk)."""
        for i in sorted(k for k in made if k < below):
            yield from self.done(i, made.pop(i)(), "", 0)

    def _count(self, result: SynthesisResult) -> None:
        if result.ended_by == "cap":
            self.ended_by = "cap"
        mine, theirs = self.timings, result.timings
        for name in ("prefill", "talker", "code_predictor", "decode"):
            setattr(mine, name, getattr(mine, name) + getattr(theirs, name))
        mine.load = theirs.load  # loading happened once
        mine.frames += int(result.codes.shape[0])
        if mine.first_audio == 0.0:
            mine.first_audio = theirs.first_audio

    def finish(self, seed: int, total: float) -> LongResult:
        seconds = self.written / SAMPLE_RATE
        timings = replace(self.timings, total=total, audio_seconds=seconds,
                          rtf=total / seconds if seconds > 0 else float("inf"))
        return LongResult(chunks=len(self.chunks), skipped=self.skipped, samples=self.written, seed=seed,
                          timings=timings, frames=timings.frames, ended_by=self.ended_by)
