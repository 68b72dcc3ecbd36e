"""Speech-tokenizer encoder: 24 kHz mono audio -> (frames, 16) codec ids (the ICL reference codes).

Equals the official Qwen3TTSTokenizerV2Model.encode (a HF MimiModel encoder): causal SEANet convolutions,
a causal transformer at 25 Hz, a stride-2 downsample and split residual vector quantisation.

Any length works and memory stays bounded: the convolution stack, which dominates both time and memory, runs
over chunks of the input with enough left context to cover its receptive field, so every kept output frame
is computed from exactly the samples the full-length pass would use. The transformer (full causal attention
at 25 Hz, as the official encoder does) runs in blocks of rows that attend to a KV cache of all earlier rows,
so its memory is linear too (the KV cache, ~0.8 MB per second of audio at full size); only its attention
time grows with the square of the length, which stays small next to the convolutions (full size, 2 threads:
2.8 s for 30 s of audio; per second of audio, 5 minutes take ~20% longer than 30 s).
"""

from __future__ import annotations

import math

import ncnn
import numpy as np

from ..errors import AudioError, BundleError
from ..runtime.bundle import Bundle
from ..runtime.manifest_parts import CodecEncoderPart

DEFAULT_BLOCK_FRAMES = 256  # 25 Hz rows per transformer pass (10.24 s); longer inputs continue from a KV cache
DEFAULT_CHUNK_FRAMES = 64  # 25 Hz frames of audio per convolution pass (2.56 s): bounds memory, ~6% overlap
_CDIST_MM_THRESHOLD = 25  # torch.cdist uses the matrix-multiply form when either side has more rows


class CodecEncoder:
    def __init__(self, bundle: Bundle, threads: int = 2, chunk_frames: int = DEFAULT_CHUNK_FRAMES,
                 precision: str | None = None, block_frames: int = DEFAULT_BLOCK_FRAMES):
        info = bundle.record(CodecEncoderPart)
        self.precision = precision or encoder_precision(bundle)
        self.info = info
        self.hop = info.hop
        self.stride = info.downsample_stride
        self.hidden = info.hidden
        self.head_dim = info.head_dim
        self.context = math.ceil(info.receptive_field / self.hop)  # frames of left context per chunk
        self.chunk = max(1, int(chunk_frames))
        self.window = info.sliding_window
        self._allocators: tuple[ncnn.PoolAllocator, ncnn.PoolAllocator] | None = None
        self.semantic_levels = info.semantic_levels
        self.conv_net = bundle.net(info.conv_net, threads, self.precision)
        self.tf_net = bundle.net(info.tf_net, threads, self.precision)
        self.down_net = bundle.net(info.down_net, threads, self.precision)
        self.block = max(1, int(block_frames))
        layers = info.layers
        self._cache_in = [f"{kv}_in_{i}" for i in range(layers) for kv in ("k", "v")]
        self._cache_out = [f"{kv}_out_{i}" for i in range(layers) for kv in ("k", "v")]
        self.rvq_net = bundle.net(info.rvq_net, threads, precision="fp32")
        books = np.asarray(bundle.table(info.codebooks), dtype=np.float32)
        if books.ndim != 3 or books.shape[1] != info.codebook_size:
            raise BundleError(f"model bundle {bundle.path}: codebook table has shape {books.shape}")
        self.books = books
        # right-hand side of torch's cdist matmul form: [c, 1, |c|^2] per codebook row, (levels, size, dim + 2)
        norms = np.sum(books * books, axis=-1, keepdims=True, dtype=np.float32)
        self.books_aug = np.ascontiguousarray(np.concatenate([books, np.ones_like(norms), norms], axis=-1))
        self.inv_freq = _inv_freq(self.head_dim, info.rope_theta)

    @property
    def samples_per_frame(self) -> int:
        return self.hop * self.stride

    def encode(self, audio24k: np.ndarray) -> np.ndarray:
        """Codes (T, levels) int64 with T = ceil(len(audio) / 1920)."""
        audio = _check_audio(audio24k)
        # per-call pools: the nets' own pools would keep the largest blobs of every call alive afterwards
        self._allocators = (ncnn.PoolAllocator(), ncnn.PoolAllocator())
        for a in self._allocators:
            a.set_size_compare_ratio(0.0)  # reuse any large-enough free block: chunk sizes vary slightly
        try:
            latent = self._conv_stack(audio)  # (T25, hidden)
            sem, ac = self._transformer(latent)
            codes = np.empty((sem.shape[0], self.books.shape[0]), dtype=np.int64)
            ns = self.semantic_levels
            codes[:, :ns] = self._rvq(sem, 0, ns)
            codes[:, ns:] = self._rvq(ac, ns, self.books.shape[0])
        finally:
            for a in self._allocators:
                a.clear()
            self._allocators = None
        return codes

    # -- stages ---------------------------------------------------------------------------------------------

    def _conv_stack(self, audio: np.ndarray) -> np.ndarray:
        n, hop = len(audio), self.hop
        frames = -(-n // hop)
        out = np.empty((frames, self.hidden), dtype=np.float32)
        span = self.chunk + self.context  # input frames per pass: the same for every pass but the last,
        start = 0  # so the pool allocator can reuse the first pass's buffers
        while start < frames:
            first = max(0, start - self.context)
            end = min(frames, first + span)
            # non-final passes are whole frames long, so every strided conv sees a multiple of its stride
            y = self._run_conv(audio[first * hop:min(n, end * hop)])
            if y.shape != (self.hidden, end - first):
                raise BundleError(f"speech encoder convolution gave shape {y.shape}, expected "
                                  f"{(self.hidden, end - first)}")
            out[start:end] = y[:, start - first:].T
            start = end
        return out

    def _extractor(self, net: ncnn.Net) -> ncnn.Extractor:
        ex = net.create_extractor()
        if self._allocators is not None:
            ex.set_blob_allocator(self._allocators[0])
            ex.set_workspace_allocator(self._allocators[1])
        return ex

    def _run_conv(self, samples: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(samples, dtype=np.float32).reshape(1, 1, -1)
        ex = self._extractor(self.conv_net)
        ex.input("in0", ncnn.Mat(x).clone())
        ret, mat = ex.extract("out0")
        if ret != 0:
            raise BundleError(f"speech encoder convolution failed (ncnn error {ret})")
        return np.array(mat).reshape(self.hidden, -1)

    def _transformer(self, latent: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        t = latent.shape[0]
        hidden = np.empty_like(latent)
        caches: list[ncnn.Mat] = []  # per-layer K/V of rows 0..start-1, opaque (fed back as extracted)
        try:
            for start in range(0, t, self.block):
                end = min(t, start + self.block)
                pos = np.arange(start, end, dtype=np.float32)
                freqs = pos[:, None] * self.inv_freq[None, :]  # float32 product, as torch's (d/2 x 1) @ (1 x T)
                feeds = {
                    "in0": np.ascontiguousarray(latent[start:end]),
                    "mask": causal_mask(end - start, end, self.window),
                    "cos": np.cos(freqs.astype(np.float64)).astype(np.float32),
                    "sin": np.sin(freqs.astype(np.float64)).astype(np.float32),
                }
                ex = self._extractor(self.tf_net)
                for name, arr in feeds.items():
                    ex.input(name, ncnn.Mat(arr).clone())
                for name, mat in zip(self._cache_in, caches, strict=False):
                    ex.input(name, mat)
                ret, mat = ex.extract("out0")
                if ret != 0:
                    raise BundleError(f"speech encoder transformer failed (ncnn error {ret})")
                hidden[start:end] = np.array(mat, dtype=np.float32).reshape(end - start, -1)
                if end < t:
                    caches = []
                    for name in self._cache_out:
                        ret, mat = ex.extract(name, 1)
                        if ret != 0:
                            raise BundleError(f"speech encoder transformer failed to give {name} (ncnn error {ret})")
                        caches.append(mat)
        finally:
            caches.clear()  # before the per-call pool that holds them is cleared
        ex = self._extractor(self.down_net)
        ex.input("in0", ncnn.Mat(hidden).clone())
        outs = []
        for name in ("sem", "ac"):
            ret, mat = ex.extract(name)
            if ret != 0:
                raise BundleError(f"speech encoder downsample failed (ncnn error {ret})")
            outs.append(np.array(mat, dtype=np.float32).reshape(-(-t // self.stride), -1))
        return outs[0], outs[1]

    def _rvq(self, x: np.ndarray, lo: int, hi: int) -> np.ndarray:
        """Residual VQ over levels lo..hi-1: nearest row by torch.cdist's fp32 arithmetic, first index on ties."""
        residual = np.array(x, dtype=np.float32)
        codes = np.empty((x.shape[0], hi - lo), dtype=np.int64)
        for j, level in enumerate(range(lo, hi)):
            book = self.books[level]
            idx = np.argmin(self._distances(residual, level), axis=1)
            codes[:, j] = idx
            residual = residual - book[idx]
        return codes

    def _distances(self, x: np.ndarray, level: int) -> np.ndarray:
        book = self.books[level]
        if x.shape[0] > _CDIST_MM_THRESHOLD or book.shape[0] > _CDIST_MM_THRESHOLD:
            # torch _euclidean_dist: [-2x, |x|^2, 1] @ [c, 1, |c|^2]^T, clamp at 0, sqrt
            xn = np.sum(x * x, axis=-1, keepdims=True, dtype=np.float32)
            xa = np.concatenate([x * np.float32(-2), xn, np.ones_like(xn)], axis=-1)
            d2 = self._matmul_t(xa, self.books_aug[level])
        else:
            diff = x[:, None, :] - book[None, :, :]
            d2 = np.asarray(np.sum(diff * diff, axis=-1, dtype=np.float32))  # an array: the sum runs along an axis
        return np.sqrt(np.maximum(d2, np.float32(0)))

    def _matmul_t(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """a @ b.T in fp32 on ncnn."""
        ex = self._extractor(self.rvq_net)
        ex.input("x", ncnn.Mat(np.ascontiguousarray(a, dtype=np.float32)).clone())
        ex.input("b", ncnn.Mat(b).clone())
        ret, mat = ex.extract("out0")
        if ret != 0:
            raise BundleError(f"speech encoder codebook search failed (ncnn error {ret})")
        return np.array(mat).reshape(a.shape[0], b.shape[0])


def encoder_precision(bundle: Bundle) -> str:
    """The ncnn precision the encoder runs at: the bundle's, except bf16 bundles run fp32.

    A bf16 bundle stores fp32 weights, so fp32 arithmetic costs nothing on disk and ~100 MB RAM while
    encoding, and gives the official codes exactly; bf16 storage changed 15% of the codes of a full-size
    encoder (5% of code 0) for an 8% speed gain, and the reference codes are computed once per voice."""
    return "fp32" if bundle.runtime_precision == "bf16" else bundle.runtime_precision


def causal_mask(queries: int, keys: int, window: int | None = None) -> np.ndarray:
    """Additive (queries, keys) mask for the last `queries` of `keys` positions: query i (position
    keys - queries + i) sees keys j <= its position (and position - j < window when a window is given)."""
    i = np.arange(keys - queries, keys)[:, None]
    j = np.arange(keys)[None, :]
    visible = j <= i
    if window is not None:
        visible &= (i - j) < window
    return np.where(visible, np.float32(0), np.float32(-np.inf)).astype(np.float32)


def _inv_freq(head_dim: int, theta: float) -> np.ndarray:
    """1 / theta^(2i/d) computed like transformers' default RoPE init (float32 exponent, float32 result)."""
    exponent = np.arange(0, head_dim, 2, dtype=np.float32) / np.float32(head_dim)
    return (np.float32(1.0) / (np.float64(theta) ** exponent.astype(np.float64)).astype(np.float32)).astype(np.float32)


def _check_audio(audio: np.ndarray) -> np.ndarray:
    a = np.asarray(audio)
    if a.ndim != 1:
        raise AudioError(f"reference audio must be mono 1-D samples, got shape {a.shape}")
    if a.size == 0:
        raise AudioError("reference audio is empty")
    if not np.issubdtype(a.dtype, np.floating):
        raise AudioError(f"reference audio must be float samples, got {a.dtype}")
    a = a.astype(np.float32, copy=False)
    if not np.all(np.isfinite(a)):
        raise AudioError("reference audio contains NaN or infinite samples")
    return a
