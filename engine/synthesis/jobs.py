"""From planned jobs to the events their caller sees: the frames of the one frame loop (synthesis/generation.py)
as FrameEvents, their audio streamed as the frames come (synthesis/streaming.py) or decoded whole when a sequence
ends (synthesis/job_audio.py: for jobs side by side, between the steps or beside them), and each job's
SynthesisResult with its timings. One synthesis is a batch of one job."""
from __future__ import annotations

import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass

import numpy as np

from ..codec_format import SAMPLE_RATE
from ..errors import Cancelled, EngineError
from ..nets.code_predictor import CodePredictor
from ..nets.codec_decoder import CodecDecoder
from ..nets.talker import Talker
from ..types import AudioChunk, FrameEvent, JobEvent, SynthesisEvent, SynthesisResult, Timings
from .generation import FrameLoop, SequenceState, generate
from .job_audio import SideBySideAudio, final_audio
from .streaming import StreamedAudio


@dataclass
class Job:
    """A validated synthesis request: the sequence to generate and how to turn it into audio."""

    sequence: SequenceState
    estimated_frames: int
    ref_codes: np.ndarray | None  # ICL reference frames (decoded before the generated ones, then cut)
    stream_audio: bool
    decode: bool

    def frame_event(self, frame: np.ndarray, elapsed: float, seconds: float) -> FrameEvent:
        """The event of the frame just made."""
        k = self.sequence.position - 1
        return FrameEvent(index=k, codes=frame.copy(), elapsed=elapsed, frame_seconds=seconds,
                          max_frames=self.sequence.max_frames, estimated_frames=max(self.estimated_frames, k + 1))


def job_events(talker: Talker, code_predictor: CodePredictor, decoder: CodecDecoder, job: Job, load_seconds: float,
               overlap_decode: bool, streaming_threads: int | None = None) -> Iterator[SynthesisEvent]:
    """The events of one job: a FrameEvent per frame (each followed by the audio chunks ready, when it streams),
    then its SynthesisResult. streaming_threads: the most threads generation uses while the audio streams (the
    self-tuner's measurement: the decoder competes for the cores)."""
    t_start = time.perf_counter()
    timings = Timings(load=load_seconds)
    seq = job.sequence
    stream = StreamedAudio(decoder, job.ref_codes, timings, overlap_decode) if job.stream_audio else None
    if stream is not None:
        talker.governor.limit = code_predictor.governor.limit = streaming_threads
    try:
        for frame, seconds in generate(talker, code_predictor, seq, timings):
            yield job.frame_event(frame, time.perf_counter() - t_start, seconds)
            if stream is not None:
                for chunk in stream.push(frame):
                    if timings.first_audio == 0.0:
                        timings.first_audio = time.perf_counter() - t_start
                    yield chunk
        if stream is not None:
            for chunk in stream.finish():
                if timings.first_audio == 0.0:
                    timings.first_audio = time.perf_counter() - t_start
                yield chunk
    finally:
        if stream is not None:
            stream.close()
            talker.governor.limit = code_predictor.governor.limit = None
    yield job_result(decoder, job, timings, t_start, stream.audio(seq.position) if stream is not None else None)


def batch_events(talker: Talker, code_predictor: CodePredictor, decoder: CodecDecoder,
                 planned: list[tuple[int, Job]], failed: list[tuple[int, EngineError]], batch_size: int,
                 take_cancelled: Callable[[], list[int]], load_seconds: float,
                 overlap_decode: bool = True) -> Generator[JobEvent, None, None]:
    """The JobEvents of several jobs side by side (engine.BatchRun): the failed ones at once, then per step the
    frames made, the audio chunks of streamed jobs (job.stream_audio) decoded so far, and the results of the jobs
    whose audio is complete; a job take_cancelled() names is dropped before the step. Each job's chunks come in
    order after the frames they decode (job_audio.py: between the steps, a few frames a push), its result after
    its last chunk. overlap_decode: a job decoded whole at its end is decoded on a worker thread while the others
    go on, its result once that is done; else at once."""
    t_start = time.perf_counter()
    for i, error in failed:
        yield JobEvent(job=i, error=error)
    loop = FrameLoop(talker, code_predictor, batch_size)
    jobs = dict(planned)
    timings = {i: Timings(load=load_seconds) for i in jobs}
    for i, job in planned:
        loop.add(i, job.sequence, timings[i])
    audio = SideBySideAudio(decoder, overlap_decode)

    def chunk_event(i: int, chunk: AudioChunk) -> JobEvent:
        if timings[i].first_audio == 0.0:
            timings[i].first_audio = time.perf_counter() - t_start
        return JobEvent(job=i, event=chunk)

    def results() -> Iterator[JobEvent]:
        for i, samples in audio.complete():
            yield JobEvent(job=i, event=job_result(decoder, jobs[i], timings[i], t_start, samples))

    try:
        while not loop.done:
            for i in take_cancelled():
                if loop.drop(i):
                    audio.drop(i)
                    yield JobEvent(job=i, error=Cancelled("This job was cancelled."))
            if loop.done:
                break
            step = loop.step()
            now = time.perf_counter()
            for i, frame in step.frames:
                job = jobs[i]
                yield JobEvent(job=i, event=job.frame_event(frame, now - t_start, step.seconds))
                if job.stream_audio:
                    for chunk in audio.push(i, job.ref_codes, timings[i], frame):
                        yield chunk_event(i, chunk)
            for i in step.ended:
                job = jobs[i]
                for chunk in audio.end(i, job.sequence.codes(), job.ref_codes, timings[i], job.decode):
                    yield chunk_event(i, chunk)
            yield from results()
        while audio.busy:  # generation is over: the whole decodes still going on
            audio.wait()
            yield from results()
    finally:
        audio.close()


def job_result(decoder: CodecDecoder, job: Job, timings: Timings, t_start: float,
               audio: np.ndarray | None) -> SynthesisResult:
    """The finished sequence's result: its audio (decoded whole here unless streamed or codes only)."""
    seq = job.sequence
    codes = seq.codes()
    if audio is None and job.decode:
        t = time.perf_counter()
        audio = final_audio(decoder, codes, job.ref_codes)
        timings.decode += time.perf_counter() - t
        timings.first_audio = time.perf_counter() - t_start
    elif audio is None:
        audio = np.zeros(0, np.float32)
    timings.total = time.perf_counter() - t_start
    if timings.first_audio == 0.0:
        timings.first_audio = timings.total
    timings.frames = codes.shape[0]
    timings.audio_seconds = len(audio) / SAMPLE_RATE
    if timings.audio_seconds > 0:
        timings.rtf = timings.total / timings.audio_seconds
    return SynthesisResult(audio=audio, codes=codes, ended_by=seq.ended_by or "", seed=seq.sampler.seed,
                           timings=timings)
