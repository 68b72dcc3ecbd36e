"""Streaming decode: the audio of each generated frame as soon as the frame exists, optionally on a worker thread
that decodes while the next frames generate (a thread of its own, or one that jobs side by side share:
job_audio.py)."""
from __future__ import annotations

import threading
import time
from collections import deque
from concurrent.futures import Executor, Future, ThreadPoolExecutor

import numpy as np

from ..codec_format import SAMPLES_PER_FRAME
from ..nets.codec_decoder import CodecDecoder
from ..types import AudioChunk, Timings


class StreamedAudio:
    """Streaming decode of one utterance: each generated frame's audio as soon as the frame exists.

    ICL: the official decode runs reference + generated frames as one sequence (same 300-frame chunk seams),
    so the reference goes through the stream first; its audio is never played."""

    def __init__(self, decoder: CodecDecoder, ref_codes: np.ndarray | None, timings: Timings, overlap: bool = False,
                 pool: Executor | None = None):
        """pool: a one-thread worker shared with other streams (jobs side by side), which decodes this stream's
        frames, its reference included, in order between theirs; its owner shuts it down. Without it, overlap
        starts a worker of this stream's own."""
        self._stream = decoder.stream()
        # overlap: frames decode in order on one worker thread while the next frames generate (ncnn releases
        # the GIL); push() then returns the chunks finished so far, finish() the rest. Frames that arrive
        # while the worker is busy wait and are decoded together in one push: a push reads all the decoder's
        # weights, so n frames in one push cost far less than n pushes (docs/performance.md, "Decoder").
        own = overlap and pool is None
        self._own_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="decode") if own else None
        self._pool = pool or self._own_pool
        self._pending: deque[Future] = deque()
        self._waiting: list[np.ndarray] = []  # frames not yet taken by the worker
        self._lock = threading.Lock()
        self._ref_frames = 0 if ref_codes is None else ref_codes.shape[0]
        self._timings = timings
        self._ref_tail = np.zeros(0, np.float32)
        self._chunks: list[np.ndarray] = []
        self._emitted = 0
        if ref_codes is not None:
            if pool is not None:  # generation of the jobs beside it goes on meanwhile
                self._pending.append(pool.submit(self._prime, ref_codes))
            else:
                self._prime(ref_codes)

    def _prime(self, ref_codes: np.ndarray) -> list[np.ndarray]:
        """The reference through the stream first (its audio is never played: no chunks)."""
        t = time.perf_counter()
        self._ref_tail = np.asarray(self._stream.push(ref_codes), np.float32)[-SAMPLES_PER_FRAME:]
        self._timings.decode += time.perf_counter() - t
        return []

    def push(self, frame: np.ndarray, wait_first: bool = True) -> list[AudioChunk]:
        """Decode one generated frame; returns the audio chunks ready now, in order. wait_first: on a worker,
        wait for the first chunk (playback starts with it) rather than return nothing."""
        if self._pool is None:
            return [self._chunk(s) for s in self._decode(frame[None])]
        with self._lock:
            self._waiting.append(frame.copy())
            if len(self._waiting) == 1:  # no task holds these frames yet: the next task takes all waiting
                self._pending.append(self._pool.submit(self._decode_waiting))
        return self._ready(wait=wait_first and not self._chunks)

    def ready(self) -> list[AudioChunk]:
        """The chunks the worker has finished since the last call, without waiting."""
        return self._ready(wait=False)

    @property
    def decoding(self) -> bool:
        """Frames pushed whose chunks have not been returned yet."""
        return bool(self._pending)

    def pending(self) -> list[Future]:
        """The worker's tasks for this stream not done yet."""
        return [f for f in self._pending if not f.done()]

    def finish(self) -> list[AudioChunk]:
        """The chunks still being decoded, once they are done."""
        return self._ready(wait=True)

    def close(self) -> None:
        """Frames not started are dropped; a worker of its own stops after the frame it is decoding."""
        for f in self._pending:
            f.cancel()
        if self._own_pool is not None:
            self._own_pool.shutdown(wait=True)

    def _decode_waiting(self) -> list[np.ndarray]:
        with self._lock:
            frames, self._waiting = np.stack(self._waiting), []
        return self._decode(frames)

    def _decode(self, frames: np.ndarray) -> list[np.ndarray]:
        """One push of (n, 16) frames; their audio split back into one array per frame."""
        t = time.perf_counter()
        samples = np.asarray(self._stream.push(frames), np.float32)
        self._timings.decode += time.perf_counter() - t
        return np.split(samples, len(frames))

    def _ready(self, wait: bool) -> list[AudioChunk]:
        out: list[AudioChunk] = []
        while self._pending and (wait or self._pending[0].done()):
            out.extend(self._chunk(s) for s in self._pending.popleft().result())
        return out

    def _chunk(self, samples: np.ndarray) -> AudioChunk:
        chunk = AudioChunk(samples=samples, start_sample=self._emitted)
        self._chunks.append(samples)
        self._emitted += len(samples)
        return chunk

    def audio(self, generated_frames: int) -> np.ndarray:
        """The whole utterance as the official cut leaves it: the streamed samples, preceded by the few
        reference samples its float64 cut keeps (it can fall a sample or so before the reference's end)."""
        parts = list(self._chunks)
        if self._ref_frames and generated_frames:
            t_ref, n_ref = self._ref_frames, self._ref_frames * SAMPLES_PER_FRAME
            cut = int(t_ref / (t_ref + generated_frames) * (n_ref + self._emitted))
            extra = n_ref - cut
            if 0 < extra <= len(self._ref_tail):
                parts.insert(0, self._ref_tail[len(self._ref_tail) - extra:])
        return np.concatenate(parts).astype(np.float32) if parts else np.zeros(0, np.float32)
