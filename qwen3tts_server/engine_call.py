"""The one place the server runs the engine. A request alone goes through the engine's one door,
Synthesizer.speak(SynthesisRequest): a text of one chunk streams its audio as the frames are decoded (as the app's
streamed take: synthesize's frame cap, no retry), a longer text is split, guarded and joined as the app reads a
long text, one chunk per turn. Requests waiting together with equal settings run side by side through
Synthesizer.speak_many, the engine's door for several requests: each is the request it would be alone, so its
codes are what it gets alone with the same seed, and its audio streams as its frames are decoded, as it would
alone.

Each run posts its task's events (task.py) and checks between frames whether the task must stop (its client left,
or its time ran out): the generation is closed there, which cancels it in the engine."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from engine import (
    AudioChunk,
    ChunkAudio,
    ChunkFrame,
    ChunkSkipped,
    EngineError,
    LongResult,
    LongTextOptions,
    SpeechListener,
    SynthesisRequest,
    SynthesizerContract,
    run_speeches,
)

from .api_errors import ApiError
from .task import Audio, Failed, Finished, SpeechTask, Started


def engine_error(e: EngineError) -> ApiError:
    """Bad input the engine found (text too long for the model, a voice of another model...): 400, its line."""
    return ApiError(400, str(e))


class SpeechRun:
    """One task alone through Synthesizer.speak, one chunk per advance(), so that other tasks are served between
    a long text's chunks. Chunks run one at a time: side by side would hold the engine for several at once."""

    def __init__(self, synth: SynthesizerContract, task: SpeechTask):
        self.task = task
        # what the events mean, as run_speech reads them: the recording's samples once each, in order
        self._listener = SpeechListener(on_samples=lambda chunk: task.post(Audio(chunk.samples)))
        # a text of one chunk streams (its audio as the frames are decoded, the frame cap synthesize has); a long
        # text is guarded chunk by chunk as in the app
        settings = replace(task.settings, stream_audio=not task.long)
        request = SynthesisRequest(text=task.text, voice=task.voice, language=task.language, settings=settings,
                                   instruct=task.instruct, options=LongTextOptions(batch_size=1))
        try:
            self._events: Iterator | None = synth.speak(request)
        except EngineError as e:
            task.post(Failed(engine_error(e)))
            self._events = None
            return
        task.post(Started(batched=1, seed=settings.seed))

    def advance(self) -> bool:
        """Run until a chunk of a longer text is sent (or left out) or the speech ends; True when it is over."""
        if self._events is None:
            return True
        task = self.task
        try:
            for event in self._events:
                stop = task.stop_reason()
                if stop is not None:
                    task.post(Failed(stop))
                    return self._end()
                self._listener.see(event)
                if isinstance(event, (ChunkAudio, ChunkSkipped)) and event.chunk + 1 < event.chunks:
                    return False  # the engine's turn goes to the tasks waiting
                if isinstance(event, LongResult):
                    outcome = self._listener.outcome()
                    task.post(Finished(seconds=outcome.seconds) if isinstance(outcome, LongResult)
                              else Failed(_failure(outcome, self._listener.skipped)))
                    return self._end()
        except EngineError as e:
            task.post(Failed(engine_error(e)))
            return self._end()
        task.post(Failed(ApiError(500, "The speech ended without a result.")))
        return self._end()

    def close(self) -> None:
        self._end()

    def _end(self) -> bool:
        if self._events is not None:
            _close(self._events)
            self._events = None
        return True


def speak_together(synth: SynthesizerContract, tasks: list[SpeechTask]) -> None:
    """Several tasks (each a text of one chunk) through Synthesizer.speak_many, sharing every model step: each is
    the request a task alone makes (streamed, synthesize's frame cap, no retry), so its audio is what it gets
    alone; a task whose client left or whose time ran out leaves the run between frames."""
    requests = [SynthesisRequest(text=t.text, voice=t.voice, language=t.language,
                                 settings=replace(t.settings, stream_audio=True), instruct=t.instruct,
                                 options=LongTextOptions(batch_size=1)) for t in tasks]
    try:
        speeches = synth.speak_many(requests, batch_size=len(tasks), longest_first=False)
    except EngineError as e:
        for task in tasks:
            task.post(Failed(engine_error(e)))
        return
    ended: set[int] = set()
    started: set[int] = set()
    skipped: dict[int, list[ChunkSkipped]] = {}

    def check_stops() -> None:  # before each event: a task that must stop leaves the run
        for i, task in enumerate(tasks):
            if i not in ended:
                stop = task.stop_reason()
                if stop is not None:
                    speeches.cancel(i)
                    task.post(Failed(stop))
                    ended.add(i)

    def on_frame(i: int, ev: ChunkFrame, done: int) -> None:
        if i not in started and i not in ended:
            started.add(i)
            tasks[i].post(Started(batched=len(tasks), seed=tasks[i].settings.seed))

    def on_samples(i: int, chunk: AudioChunk) -> None:
        if i not in ended:
            tasks[i].post(Audio(chunk.samples))

    def on_done(i: int, result: LongResult) -> None:
        if i not in ended:
            ended.add(i)
            tasks[i].post(Finished(seconds=result.seconds))

    def on_skipped(i: int, ev: ChunkSkipped) -> None:
        skipped.setdefault(i, []).append(ev)

    def on_failed(i: int, error: EngineError) -> None:
        if i not in ended:
            ended.add(i)
            tasks[i].post(Failed(_failure(error, skipped.get(i, []))))

    try:
        run_speeches(speeches, on_frame=on_frame, on_samples=on_samples,
                     on_skipped=on_skipped, on_done=on_done,
                     on_failed=on_failed, check_cancel=check_stops)
    finally:
        for i, task in enumerate(tasks):
            if i not in ended:  # the run ended without a word for it (should not happen): never leave it waiting
                task.post(Failed(ApiError(500, "The engine ended this speech without a result.")))


def _failure(error: EngineError, skipped: list[ChunkSkipped]) -> ApiError:
    """A speech without a result: 500 "no_audio" when the model made nothing of its text (its first left-out
    chunk says why), else the engine's refusal of the request (400)."""
    return ApiError(500, skipped[0].message, "no_audio") if skipped else engine_error(error)


def _close(events: object) -> None:
    close = getattr(events, "close", None)
    if close is not None:
        close()
