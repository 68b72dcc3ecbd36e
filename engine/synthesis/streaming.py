"""Streaming decode: the audio of each generated frame as soon as the frame exists, optionally on a worker thread
that decodes while the next frames generate."""
from __future__ import annotations

import threading
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

from ..codec_format import SAMPLES_PER_FRAME
from ..nets.codec_decoder import CodecDecoder
from ..types import AudioChunk, Timings


class StreamedAudio:
    """Streaming decode of one utterance: each generated frame's audio as soon as the frame exists.

    ICL: the official decode runs reference + generated frames as one sequence (same 300-frame chunk seams),
    so the reference goes through the stream first; its audio is never played."""

    def __init__(self, decoder: CodecDecoder, ref_codes: np.ndarray | None, timings: Timings, overlap: bool = False,
                 frames_per_push: int = 1):
        """frames_per_push (without overlap): after the first frame, which decodes at once (playback starts with
        it), frames wait until this many are there (or finish()) and decode in one push: a push reads all the
        decoder's weights (jobs side by side, job_audio.py)."""
        self._stream = decoder.stream()
        # overlap: frames decode in order on one worker thread while the next frames generate (ncnn releases
        # the GIL); push() then returns the chunks finished so far, finish() the rest. Frames that arrive
        # while the worker is busy wait and are decoded together in one push: a push reads all the decoder's
        # weights, so n frames in one push cost far less than n pushes (docs/performance.md, "Decoder").
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="decode") if overlap else None
        self._pending: deque[Future] = deque()
        self._waiting: list[np.ndarray] = []  # frames not yet taken by the worker (or held for a fuller push)
        self._frames_per_push = max(1, int(frames_per_push))
        self._lock = threading.Lock()
        self._ref_frames = 0 if ref_codes is None else ref_codes.shape[0]
        self._timings = timings
        self._ref_tail = np.zeros(0, np.float32)
        self._chunks: list[np.ndarray] = []
        self._emitted = 0
        if ref_codes is not None:
            t = time.perf_counter()
            self._ref_tail = np.asarray(self._stream.push(ref_codes), np.float32)[-SAMPLES_PER_FRAME:]
            timings.decode += time.perf_counter() - t

    def push(self, frame: np.ndarray) -> list[AudioChunk]:
        """Decode one generated frame; returns the audio chunks ready now, in order."""
        if self._pool is None:
            self._waiting.append(frame.copy())
            if len(self._waiting) < (self._frames_per_push if self._emitted else 1):
                return []
            return self._decode_held()
        with self._lock:
            self._waiting.append(frame.copy())
            if len(self._waiting) == 1:  # no task holds these frames yet: the next task takes all waiting
                self._pending.append(self._pool.submit(self._decode_waiting))
        return self._ready(wait=not self._chunks)  # the first chunk as soon as possible: playback starts with it

    def finish(self) -> list[AudioChunk]:
        """The chunks still being decoded (or held for a fuller push), once they are done."""
        if self._pool is None:
            return self._decode_held() if self._waiting else []
        return self._ready(wait=True)

    def _decode_held(self) -> list[AudioChunk]:
        frames, self._waiting = np.stack(self._waiting), []
        return [self._chunk(s) for s in self._decode(frames)]

    def close(self) -> None:
        """Stop the worker (after the frame it is decoding); frames not started are dropped."""
        if self._pool is not None:
            for f in self._pending:
                f.cancel()
            self._pool.shutdown(wait=True)

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
