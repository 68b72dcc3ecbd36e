"""The audio of a job: decoded whole when it ends (final_audio, as the official wrapper decodes), or streamed as its
frames come (streaming.py); for jobs side by side, SideBySideAudio: streamed jobs decode between the generation
steps, jobs decoded whole at their end on a worker thread while the others go on generating."""
from __future__ import annotations

import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

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


# Frames a streamed job side by side decodes per push after its first (which goes at once: playback starts with
# it), between the generation steps on the generating thread. Measured with benchmarks/server_load.py, 4 clients x
# 20 frames, AMD EPYC, 2 cores, load 2.4-2.8 (docs/performance.md, "The speech server under load"): this way
# 1.13 / 0.87 / 0.94 audio s per s at 1.04-1.07 CPU s per audio s (as decoding each whole: 1.22 / 0.90 / 1.06,
# 1.05-1.11), against 0.80 / 0.56 / 0.85 at 1.16-1.24 for one frame per push on a decoding thread beside
# generation (the decoder's two threads and generation's two then share the two cores).
FRAMES_PER_PUSH = 4


class SideBySideAudio:
    """The audio of jobs generated side by side. A streamed job's frames decode on the generating thread between
    the steps, its first frame at once and then FRAMES_PER_PUSH at a time (a push reads all the decoder's weights,
    so fuller pushes cost less per frame); a job that is not streamed is decoded whole once it ends, by the same
    call as alone (so the same samples): with overlap on a worker thread while the others generate, else at once."""

    def __init__(self, decoder: CodecDecoder, overlap: bool):
        self._decoder = decoder
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="decode") if overlap else None
        self._streams: dict[int, StreamedAudio] = {}
        self._ended: dict[int, Future[np.ndarray]] = {}  # whole decodes on the worker
        # a CodecDecoder is not thread-safe: a push between the steps waits for a whole decode under way
        self._decoding = threading.Lock()
        self._done: list[tuple[int, np.ndarray | None]] = []  # audio complete, not handed out yet

    def push(self, key: int, ref_codes: np.ndarray | None, timings: Timings, frame: np.ndarray) -> list[AudioChunk]:
        """A new frame of streamed job `key` (its reference, if any, goes through its stream first); returns the
        job's chunks decoded now."""
        with self._decoding:  # (a new stream decodes the reference at once)
            stream = self._streams.get(key)
            if stream is None:
                stream = self._streams[key] = StreamedAudio(self._decoder, ref_codes, timings,
                                                            frames_per_push=FRAMES_PER_PUSH)
            return stream.push(frame)

    def end(self, key: int, codes: np.ndarray, ref_codes: np.ndarray | None, timings: Timings,
            decode: bool) -> list[AudioChunk]:
        """Job `key` made its last frame: a streamed job's last chunks (returned; its audio is complete), or its
        whole decode is asked for (decode and not streamed; complete() hands it out when done)."""
        stream = self._streams.pop(key, None)
        if stream is not None:
            with self._decoding:
                last = stream.finish()
            self._done.append((key, stream.audio(codes.shape[0])))
            return last
        if not decode:
            self._done.append((key, None))
        elif not codes.shape[0]:  # ended before its first frame: no audio, and nothing to decode
            self._done.append((key, np.zeros(0, np.float32)))
        elif self._pool is None:
            self._done.append((key, self._decode_whole(codes, ref_codes, timings)))
        else:
            self._ended[key] = self._pool.submit(self._decode_whole, codes, ref_codes, timings)
        return []

    def drop(self, key: int) -> None:
        """A cancelled job: its frames are not decoded."""
        self._streams.pop(key, None)
        ended = self._ended.pop(key, None)
        if ended is not None:
            ended.cancel()

    def complete(self) -> list[tuple[int, np.ndarray | None]]:
        """The ended jobs whose audio is now complete (None: codes only), each after all its chunks; no waiting."""
        out, self._done = self._done, []
        for key, whole in list(self._ended.items()):
            if whole.done():
                out.append((key, whole.result()))
                del self._ended[key]
        return out

    @property
    def busy(self) -> bool:
        """A whole decode is still going on."""
        return bool(self._ended)

    def wait(self) -> None:
        """Until a whole decode is done."""
        if self._ended:
            wait(list(self._ended.values()), return_when=FIRST_COMPLETED)

    def _decode_whole(self, codes: np.ndarray, ref_codes: np.ndarray | None, timings: Timings) -> np.ndarray:
        with self._decoding:
            t = time.perf_counter()
            audio = final_audio(self._decoder, codes, ref_codes)
            timings.decode += time.perf_counter() - t
        return audio

    def close(self) -> None:
        for whole in self._ended.values():
            whole.cancel()
        self._ended.clear()
        self._streams.clear()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
