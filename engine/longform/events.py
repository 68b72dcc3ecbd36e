"""What speaking a request yields (engine/longform/runner.py makes them): the events of each chunk, the final
LongResult, ChunkProgress (which chunk progress shows while chunks run side by side), and Speech, the events of
one request with what was decided before the first one; for several requests at once (engine/longform/many.py)
Speeches, whose RequestEvents tag each of those events with its request."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Generic, Self, TypeVar

import numpy as np

from ..codec_format import SAMPLE_RATE
from ..errors import EngineError
from ..text.splitter import TextChunk
from ..types import AudioChunk, FrameEvent, SynthesisResult, Timings
from .request import SynthesisRequest

E = TypeVar("E")


@dataclass
class ChunkStarted:
    chunk: int
    chunks: int
    text: str


@dataclass
class ChunkFrame:
    chunk: int
    chunks: int
    attempt: int
    frame: FrameEvent


@dataclass
class ChunkStream:
    """Audio of a chunk while it is generated (the recording's samples from audio.start_sample): a text of one
    chunk with settings.stream_audio. Its ChunkAudio then holds the same samples again, streamed=True."""

    chunk: int
    chunks: int
    audio: AudioChunk


@dataclass
class ChunkRetry:
    chunk: int
    chunks: int
    attempt: int  # the attempt about to start (1 = first retry)
    reason: str
    seed: int


@dataclass
class ChunkAudio:
    chunk: int
    chunks: int
    text: str
    samples: np.ndarray  # what this chunk adds to the recording: pause, then its audio (faded at seams)
    start_sample: int  # where `samples` start in the recording
    result: SynthesisResult  # the chunk alone: raw audio, codes, seed, timings
    attempts: int  # 0: an earlier run made it (speak's `made`)
    streamed: bool = False  # its samples came before as ChunkStream events


@dataclass
class ChunkSkipped:
    chunk: int
    chunks: int
    text: str
    reason: str
    attempts: int

    @property
    def message(self) -> str:
        return f"Chunk {self.chunk + 1} of {self.chunks} was left out: {self.reason}."


@dataclass
class LongResult:
    chunks: int
    skipped: list[ChunkSkipped]
    samples: int
    seed: int  # the base seed: chunk i's first attempt uses seed + i
    timings: Timings  # the chunks' own figures added up; total, audio_seconds and rtf of the whole recording
    sample_rate: int = SAMPLE_RATE
    frames: int = 0  # generated frames in the recording (each ChunkAudio's result holds its chunk's codes)
    ended_by: str = "eos"  # "cap" when a chunk in the recording ended at its frame cap

    @property
    def seconds(self) -> float:
        return self.samples / self.sample_rate


LongEvent = ChunkStarted | ChunkFrame | ChunkStream | ChunkRetry | ChunkAudio | ChunkSkipped | LongResult


class ChunkProgress:
    """What progress should show while chunks may run side by side: the first chunk not yet in the recording
    (`chunk`), and `done`, how many are in it or left out. Feed it every event with see()."""

    def __init__(self) -> None:
        self._running: set[int] = set()
        self._next = 0  # the chunk after the last one put into the recording (or left out)
        self.done = 0

    @property
    def chunk(self) -> int:
        return min(self._running) if self._running else self._next

    def see(self, ev: LongEvent) -> bool:
        """Take in an event; True when it concerns the chunk on show (a frame worth displaying, or a move on)."""
        if isinstance(ev, (ChunkStarted, ChunkFrame)):
            self._running.add(ev.chunk)
            return ev.chunk == self.chunk
        if isinstance(ev, (ChunkAudio, ChunkSkipped)):
            self._running.discard(ev.chunk)
            self._next = max(self._next, ev.chunk + 1)
            self.done += 1
            return True
        return False


class EventStream(Generic[E]):
    """A run's events: iterate it; close() stops the run (closes the generator behind it)."""

    def __init__(self, events: Iterator[E]):
        self._events = events

    def __iter__(self) -> Self:
        return self

    def __next__(self) -> E:
        return next(self._events)

    def close(self) -> None:
        close = getattr(self._events, "close", None)
        if close is not None:
            close()


class Speech(EventStream[LongEvent]):
    """The events of one request (iterate it; close() stops the chunk in progress), with what was decided
    before the first one: the request as checked and the chunks its text is spoken in."""

    def __init__(self, request: SynthesisRequest, chunks: list[TextChunk], events: Iterator[LongEvent]):
        super().__init__(events)
        self.request, self.chunks = request, chunks


@dataclass(frozen=True)
class RequestEvent:
    """An event of request number `request` (its index in the list given to speak_many): `event` is one of the
    events speak() gives that request alone, ending with its LongResult; or `error` instead, when the request was
    refused (its own one-line reason, as speak() would raise it) or cancelled (Cancelled); nothing follows it."""

    request: int
    event: LongEvent | None = None
    error: EngineError | None = None


class Speeches(EventStream[RequestEvent]):
    """The events of several requests (iterate it for RequestEvents), with what was decided before the first one:
    `requests` (each as checked, or as given when refused) and `chunks` (request -> the chunks its text is spoken
    in, for the requests that passed their checks). cancel(i) stops request i before its next frame (a finished
    or unknown one is ignored); close() (or leaving the loop) stops them all."""

    def __init__(self, requests: list[SynthesisRequest], chunks: dict[int, list[TextChunk]],
                 events: Callable[[Speeches], Iterator[RequestEvent]]):
        self.requests, self.chunks = requests, chunks
        self.cancelled: set[int] = set()  # the requests cancelled so far
        super().__init__(events(self))

    def cancel(self, request: int) -> None:
        self.cancelled.add(int(request))
