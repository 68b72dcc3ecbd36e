"""The one place the server runs the engine: a task alone (its audio streamed as the frames are decoded), a group
of tasks side by side (Synthesizer.synthesize_many: each one's audio exactly what it would be alone, sent when it
ends), and a long text chunk by chunk (Synthesizer.speak, the app's path).

Each function posts the task's events (tasks.py) and checks between frames whether the task must stop (its client
left, or its time ran out): the generation is closed there, which cancels it in the engine."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from engine import (
    AudioChunk,
    ChunkAudio,
    ChunkSkipped,
    EngineError,
    FrameEvent,
    LongResult,
    LongTextOptions,
    Speaker,
    SynthesisJob,
    SynthesisRequest,
    SynthesisResult,
    SynthesizerContract,
)

from .api_errors import ApiError
from .tasks import Audio, Failed, Finished, SpeechTask, Started


def engine_error(e: EngineError) -> ApiError:
    """Bad input the engine found (text too long for the model, a voice of another model...): 400, its line."""
    return ApiError(400, str(e))


def speak_alone(synth: SynthesizerContract, task: SpeechTask) -> None:
    settings = replace(task.settings, stream_audio=task.stream)
    try:
        events = synth.synthesize(task.text, task.voice, task.language, settings, task.instruct)
    except EngineError as e:
        task.post(Failed(engine_error(e)))
        return
    task.post(Started(batched=1, seed=settings.seed))
    sent = 0
    try:
        for event in events:
            stop = task.stop_reason()
            if stop is not None:
                task.post(Failed(stop))
                return
            if isinstance(event, AudioChunk):
                task.post(Audio(event.samples))
                sent += len(event.samples)
            elif isinstance(event, SynthesisResult):
                if not task.stream:
                    task.post(Audio(event.audio))
                    sent = len(event.audio)
                task.post(Finished(seconds=sent / event.sample_rate))
                return
    except EngineError as e:
        task.post(Failed(engine_error(e)))
    finally:
        _close(events)


def speak_together(synth: SynthesizerContract, tasks: list[SpeechTask]) -> None:
    """Several tasks sharing every model step; each task's audio is posted whole when it ends."""
    jobs = [SynthesisJob(text=t.text, voice=t.voice.name if isinstance(t.voice, Speaker) else t.voice,
                         language=t.language, max_frames=t.settings.max_frames,
                         seed=t.settings.seed, instruct=t.instruct) for t in tasks]
    settings = replace(tasks[0].settings, seed=None, max_frames=None, stream_audio=False)
    try:
        run = synth.synthesize_many(jobs, settings, batch_size=len(tasks))
    except EngineError as e:
        for task in tasks:
            task.post(Failed(engine_error(e)))
        return
    started: set[int] = set()
    ended: set[int] = set()
    try:
        for job_event in run:
            for i, task in enumerate(tasks):  # a task whose client left or whose time ran out leaves the batch
                if i not in ended:
                    stop = task.stop_reason()
                    if stop is not None:
                        run.cancel(i)
                        task.post(Failed(stop))
                        ended.add(i)
            i = job_event.job
            if i in ended:
                continue
            task = tasks[i]
            if job_event.error is not None:
                task.post(Failed(engine_error(job_event.error)))
                ended.add(i)
                continue
            if i not in started and isinstance(job_event.event, (FrameEvent, SynthesisResult)):
                started.add(i)
                task.post(Started(batched=len(tasks), seed=task.settings.seed))
            if isinstance(job_event.event, SynthesisResult):
                result = job_event.event
                task.post(Audio(result.audio))
                task.post(Finished(seconds=result.seconds))
                ended.add(i)
    finally:
        run.close()
        for i, task in enumerate(tasks):
            if i not in ended:  # the run ended without a word for it (should not happen): never leave it waiting
                task.post(Failed(ApiError(500, "The engine ended this speech without a result.")))


class LongSpeech:
    """A long text on the long-text path (split into chunks of whole sentences, joined with the app's pauses),
    run one chunk per advance() so that other requests are served between its chunks. Chunks run one at a time:
    side by side would hold the engine for several chunks at once."""

    def __init__(self, synth: SynthesizerContract, task: SpeechTask):
        self.task = task
        self.done = False
        self._sent = 0
        try:
            self._events: Iterator | None = synth.speak(SynthesisRequest(
                task.text, task.voice, task.language, replace(task.settings), task.instruct,
                LongTextOptions(batch_size=1)))
        except EngineError as e:
            task.post(Failed(engine_error(e)))
            self._events = None
            self.done = True
            return
        task.post(Started(batched=1, seed=task.settings.seed))

    def advance(self) -> bool:
        """Run until the next chunk is sent (or skipped) or the text ends; True when the task is over."""
        if self._events is None:
            return True
        task = self.task
        try:
            for event in self._events:
                stop = task.stop_reason()
                if stop is not None:
                    task.post(Failed(stop))
                    return self._end()
                if isinstance(event, ChunkAudio):
                    task.post(Audio(event.samples))
                    self._sent += len(event.samples)
                    return False
                if isinstance(event, ChunkSkipped):
                    return False
                if isinstance(event, LongResult):
                    task.post(Finished(seconds=event.seconds))
                    return self._end()
        except EngineError as e:
            task.post(Failed(engine_error(e)))
            return self._end()
        task.post(Failed(ApiError(500, "The long text ended without a result.")))
        return self._end()

    def close(self) -> None:
        self._end()

    def _end(self) -> bool:
        if self._events is not None:
            _close(self._events)
            self._events = None
        self.done = True
        return True


def _close(events: object) -> None:
    close = getattr(events, "close", None)
    if close is not None:
        close()
