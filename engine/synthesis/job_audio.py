"""The audio of a job: decoded whole when it ends (final_audio, as the official wrapper decodes), or streamed as its
frames come (streaming.py); for jobs side by side (SideBySideAudio), both on one worker thread that decodes while
the jobs' generation goes on, so a job's decoding never holds up the other jobs' frames."""
from __future__ import annotations

import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass

import numpy as np

from ..nets.codec_decoder import CodecDecoder
from ..types import AudioChunk, Timings
from .streaming import StreamedAudio


def final_audio(decoder: CodecDecoder, codes: np.ndarray, ref_codes: np.ndarray | None) -> np.ndarray:
    """Decode as the official wrapper does: ICL decodes reference + generated frames, then cuts the reference
    part: int(T_ref / T_total * n_samples) samples (float64 arithmetic, truncation)."""
    if ref_codes is None:
        if codes.shape[0] == 0:
            return np.zeros(0, np.float32)
        return np.asarray(decoder.decode(codes), np.float32)
    full = np.concatenate([ref_codes, codes], axis=0)
    wav = np.asarray(decoder.decode(full), np.float32)
    cut = int(ref_codes.shape[0] / max(full.shape[0], 1) * wav.shape[0])
    return wav[cut:]


@dataclass
class _Ended:
    """A job whose generation has ended, waiting for its audio: its stream's last chunks or its whole decode."""

    stream: StreamedAudio | None
    whole: Future[np.ndarray] | None  # None: streamed, or codes only
    frames: int


class SideBySideAudio:
    """The audio of jobs generated side by side. A streamed job's frames decode as they come and its chunks are
    handed out as they are done; a job that is not streamed is decoded whole once it ends (the same call as alone,
    so the same samples). With overlap everything runs on one worker thread, in the order it was asked for: one
    decoder, on its own thread (CodecDecoder is not thread-safe), beside the generation of all the jobs; frames of
    a job that wait for the worker decode together in one push, which costs less per frame (streaming.py).
    Without overlap everything decodes at once on the caller's thread."""

    def __init__(self, decoder: CodecDecoder, overlap: bool):
        self._decoder = decoder
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="decode") if overlap else None
        self._streams: dict[int, StreamedAudio] = {}
        self._ended: dict[int, _Ended] = {}

    def push(self, key: int, ref_codes: np.ndarray | None, timings: Timings, frame: np.ndarray) -> list[AudioChunk]:
        """A new frame of streamed job `key` (its reference, if any, goes through its stream first); returns the
        job's chunks ready now, without waiting for the worker."""
        stream = self._streams.get(key)
        if stream is None:
            stream = self._streams[key] = StreamedAudio(self._decoder, ref_codes, timings, pool=self._pool)
        return stream.push(frame, wait_first=False)

    def end(self, key: int, codes: np.ndarray, ref_codes: np.ndarray | None, timings: Timings, decode: bool) -> None:
        """Job `key` made its last frame: its audio is complete once its stream is decoded, or once the whole
        decode asked for here (decode and not streamed) is done."""
        stream = self._streams.pop(key, None)
        whole: Future[np.ndarray] | None = None
        if stream is None and decode:
            if codes.shape[0]:
                whole = self._submit(_decode_whole, self._decoder, codes, ref_codes, timings)
            else:  # ended before its first frame: no audio, and nothing to decode
                whole = Future()
                whole.set_result(np.zeros(0, np.float32))
        self._ended[key] = _Ended(stream, whole, codes.shape[0])

    def drop(self, key: int) -> None:
        """A cancelled job: whatever of it the worker has not started is dropped."""
        for stream in (self._streams.pop(key, None), getattr(self._ended.get(key), "stream", None)):
            if stream is not None:
                stream.close()
        ended = self._ended.pop(key, None)
        if ended is not None and ended.whole is not None:
            ended.whole.cancel()

    def chunks(self) -> list[tuple[int, AudioChunk]]:
        """Every job's chunks finished since the last call, each job's in order; no waiting."""
        out = [(key, chunk) for key, stream in self._streams.items() for chunk in stream.ready()]
        out += [(key, chunk) for key, e in self._ended.items() if e.stream is not None for chunk in e.stream.ready()]
        return out

    def complete(self) -> list[tuple[int, np.ndarray | None]]:
        """The ended jobs whose audio is now complete (None: codes only), each after all its chunks went out
        through chunks(); no waiting."""
        out: list[tuple[int, np.ndarray | None]] = []
        for key, e in list(self._ended.items()):
            if e.stream is not None and not e.stream.decoding:
                out.append((key, e.stream.audio(e.frames)))
            elif e.stream is None and (e.whole is None or e.whole.done()):
                out.append((key, e.whole.result() if e.whole is not None else None))
            else:
                continue
            del self._ended[key]
        return out

    @property
    def busy(self) -> bool:
        """Audio is still being decoded for a job."""
        return bool(self._streams) or bool(self._ended)

    def wait(self) -> None:
        """Until something more is done (a chunk or a whole decode)."""
        pending = [f for s in self._all_streams() for f in s.pending()]
        pending += [e.whole for e in self._ended.values() if e.whole is not None and not e.whole.done()]
        if pending:
            wait(pending, return_when=FIRST_COMPLETED)

    def close(self) -> None:
        for stream in self._all_streams():
            stream.close()
        self._streams.clear()
        for e in self._ended.values():
            if e.whole is not None:
                e.whole.cancel()
        self._ended.clear()
        if self._pool is not None:
            self._pool.shutdown(wait=True)

    def _all_streams(self) -> list[StreamedAudio]:
        return list(self._streams.values()) + [e.stream for e in self._ended.values() if e.stream is not None]

    def _submit(self, fn, *args) -> Future[np.ndarray]:
        if self._pool is not None:
            return self._pool.submit(fn, *args)
        done: Future[np.ndarray] = Future()
        done.set_result(fn(*args))
        return done


def _decode_whole(decoder: CodecDecoder, codes: np.ndarray, ref_codes: np.ndarray | None,
                  timings: Timings) -> np.ndarray:
    t = time.perf_counter()
    audio = final_audio(decoder, codes, ref_codes)
    timings.decode += time.perf_counter() - t
    return audio
