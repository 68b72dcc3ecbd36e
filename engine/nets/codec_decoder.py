"""Codec ids (frames x 16) -> 24 kHz waveform on ncnn, whole-sequence or streaming.

The official decoder always runs `chunked_decode(chunk_size=300, left_context_size=25)`: chunks of 300 new
frames, each after the first decoded by a fresh forward together with the 25 frames before it, whose audio is
dropped. Every layer of the decoder is causal, so the bundle's graph is stateful (convolution tails, the last
keys/values of each attention layer) and a chunk can be fed in blocks of any size: outputs depend only on the
frames since the chunk's start. Whole decoding and streaming share one code path; streaming adds no latency
(each pushed frame returns its 1920 samples at once) and equals the whole decode up to float rounding.

Precision ("auto", "fp32", "bf16"): bundles converted with per-layer marks (manifest `bf16_layers`) can run the
vocoder's convolutions in bf16 (ncnn's AVX512-BF16 kernels: about 2x per convolution, 1.4-1.6x for the whole
decoder; SNR about 31 dB against fp32 at full size, docs/performance.md "Decoder") with every other layer, the
streaming state included, in fp32 (engine/convert/codec_decoder.py). "auto" picks bf16 where the CPU has
AVX512-BF16 and the bundle has the marks, else the bundle's own precision; "fp32" is the exact decoder.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import ncnn
import numpy as np

from ..codec_format import SAMPLE_RATE
from ..errors import CodesError, EngineError
from ..runtime.bundle import Bundle
from ..runtime.cpu import has_bf16_dot_product
from ..runtime.cpu_load import crowded_team
from ..runtime.device import DEFAULT_GPU_PRECISION, Device, gpu_failures, resolve_device
from ..runtime.manifest_parts import CodecDecoderPart
from ..runtime.manifest_values import positive
from ..runtime.openmp import team_limit

CHUNK_SIZE = 300  # official chunked_decode
LEFT_CONTEXT = 25
BLOCK_FRAMES = 25  # frames per graph run: bounds memory (activations at 1920 x channels per frame)
MASKED = np.float32(-1e30)
DECODER_PRECISIONS = ("auto", "fp32", "bf16")  # what a caller may ask for (CLI --decoder-precision, the app)
# The exact decoder unless measurements say otherwise: bf16 convolutions must be >= 2x faster with an SNR against
# fp32 of ~40 dB to become the default (docs/performance.md, "Decoder", has the figures).
DEFAULT_DECODER_PRECISION = "fp32"


def decode_codes(bundle: str | Path | Bundle, codes, threads: int = 2,
                 precision: str = DEFAULT_DECODER_PRECISION, device: str | Device = "cpu",
                 gpu_precision: str = DEFAULT_GPU_PRECISION) -> np.ndarray:
    """Codec ids (frames, 16) -> float32 audio at SAMPLE_RATE, loading only the bundle's decoder, on `device`
    ("cpu", "gpu", "gpu:N", "auto" or a Device: engine/runtime/device.py; a GPU failure is one GpuError line)."""
    device = device if isinstance(device, Device) else resolve_device(device, gpu_precision)
    bundle = (bundle if isinstance(bundle, Bundle) else Bundle.open(bundle)).on(device)
    with gpu_failures(device):
        return CodecDecoder(bundle, threads, precision).decode(codes)


def check_decoder_precision(precision: str) -> str:
    """The name itself, or EngineError in one sentence."""
    if not isinstance(precision, str) or precision not in DECODER_PRECISIONS:
        raise EngineError(f"Unknown speech decoder precision {precision!r}; choose one of "
                          f"{', '.join(DECODER_PRECISIONS)}.")
    return precision


def decoder_part(bundle: Bundle) -> CodecDecoderPart:
    """The bundle's speech decoder part as its typed record."""
    return bundle.record(CodecDecoderPart)


def decoder_net_precision(bundle: Bundle, precision: str = "auto") -> str:
    """The ncnn precision the decoder of `bundle` runs at for the requested precision: "fp32", "bf16", or "fp16"
    (fp16 bundles under "auto" on a CPU without AVX512-BF16, as before bf16 decoding existed)."""
    check_decoder_precision(precision)
    marked = decoder_part(bundle).bf16_layers
    if precision == "bf16":
        if not marked:
            raise EngineError(f"The speech decoder of {bundle.path} was converted before bf16 decoding existed; "
                              "convert the model again to use it, or choose fp32 or auto.")
        return "bf16"  # on a CPU without AVX512-BF16 ncnn emulates it: same rounding bound, slower than fp32
    if precision == "auto" and marked and has_bf16_dot_product():
        return "bf16"
    if precision == "fp32" or bundle.runtime_precision == "bf16":
        # a bf16 bundle stores fp32 weights: its unmarked (older) decoder graphs run exactly in fp32
        return "fp32"
    return bundle.runtime_precision


class CodecDecoder:
    """The speech-tokenizer decoder of a bundle. Not thread-safe: use one instance per thread."""

    def __init__(self, bundle: Bundle, threads: int = 2, precision: str = DEFAULT_DECODER_PRECISION):
        """precision: "auto" (bf16 convolutions where the CPU has AVX512-BF16 and the bundle's graph is marked
        for it, else the bundle's own), "fp32" (exact) or "bf16" (refused for bundles converted without the marks)."""
        info = decoder_part(bundle)
        self.info = info
        self.requested_precision = check_decoder_precision(precision)
        self._bundle, self._precision = bundle, decoder_net_precision(bundle, precision)
        self._net = bundle.net(info.graph, threads, precision=self._precision)
        self._table = bundle.table(info.table)
        self.num_quantizers = info.num_quantizers
        self.codebook_sizes = np.asarray(info.codebook_sizes, dtype=np.int64)
        self._offsets = np.asarray(info.codebook_offsets, dtype=np.int64)
        self.samples_per_frame = info.upsample
        config = bundle.speech_config
        self.sample_rate = (positive(config, "output_sample_rate", f"The manifest of {bundle.path} is damaged: its "
                                     "speech_config") if "output_sample_rate" in config else SAMPLE_RATE)
        self._layers = info.layers
        self._kv_heads = info.kv_heads
        self._head_dim = info.head_dim
        self._past = info.past
        self._window = info.sliding_window
        self._states = info.states
        # RoPE inverse frequencies as transformers builds them (fp32 result of base ** (2i/d)).
        hd = self._head_dim
        expo = np.arange(0, hd, 2, dtype=np.float32) / np.float32(hd)
        self._inv_freq = (1.0 / (info.rope_theta ** expo.astype(np.float64))).astype(np.float32)
        # ncnn computes only what an extract needs: pulling outputs in graph order keeps one pass and
        # releases each state's source blob as soon as its tail is copied.
        self._outputs = list(info.outputs)

    @property
    def precision(self) -> str:
        """The ncnn precision the decoder runs at: "fp32", "bf16" (bf16 convolutions, the rest fp32) or "fp16"."""
        return self._precision

    @property
    def threads(self) -> int:
        return int(self._net.opt.num_threads)

    @threads.setter
    def threads(self, threads: int) -> None:
        """Reloads the network when the count changes: ncnn's convolution gemm keeps its load-time count."""
        if int(threads) < 1:
            raise EngineError(f"The decoder needs at least one thread; got {threads}.")
        if int(threads) != self.threads:
            self._net = self._bundle.net(self.info.graph, int(threads), precision=self._precision)

    # -- input handling ------------------------------------------------------------------------

    def validate(self, codes) -> np.ndarray:
        """Check codes (frames, num_quantizers) of integer ids within each codebook; returns int64 array."""
        arr = np.asarray(codes)
        nq = self.num_quantizers
        if arr.ndim != 2 or arr.shape[1] != nq:
            raise CodesError(f"codes must have shape (frames, {nq}); got {tuple(arr.shape)}")
        if arr.size and not np.issubdtype(arr.dtype, np.integer):
            if arr.dtype.kind != "f" or not np.all(np.isfinite(arr)) or not np.all(arr == np.round(arr)):
                raise CodesError(f"codes must be integers; got dtype {arr.dtype}")
        arr = arr.astype(np.int64)
        bad = (arr < 0) | (arr >= self.codebook_sizes[None, :])
        if bad.any():
            t, g = (int(v) for v in np.argwhere(bad)[0])
            raise CodesError(
                f"code {arr[t, g]} at frame {t}, group {g} is out of range 0..{self.codebook_sizes[g] - 1}"
                f" ({int(bad.sum())} bad ids in all)"
            )
        return arr

    def latent(self, codes: np.ndarray) -> np.ndarray:
        """Dequantised, projected frames (T, codebook_dim) float32: the sum of one table row per group."""
        rows = np.asarray(self._table[codes + self._offsets[None, :]], dtype=np.float32)
        return rows.sum(axis=1, dtype=np.float32)

    # -- decoding ------------------------------------------------------------------------------

    def decode(self, codes) -> np.ndarray:
        """Whole-sequence decode; equals the official chunked_decode(300, 25). Returns (T*1920,) float32."""
        codes = self.validate(codes)
        parts = list(self.stream().iter_push(codes, validated=True))
        return np.concatenate(parts) if parts else np.zeros(0, np.float32)

    def stream(self) -> StreamingDecoder:
        return StreamingDecoder(self)

    # -- one graph run ---------------------------------------------------------------------------

    def _new_run(self) -> _Run:
        return _Run(self)

    def _rope(self, start: int, n: int) -> tuple[np.ndarray, np.ndarray]:
        pos = np.arange(start, start + n, dtype=np.float32)
        freqs = pos[:, None] * self._inv_freq[None, :]
        return np.cos(freqs).astype(np.float32), np.sin(freqs).astype(np.float32)

    def _mask(self, start: int, n: int) -> np.ndarray:
        """(n, P+n) additive mask: past rows hold positions start-P..start-1 (negative = before the chunk)."""
        keys = np.arange(start - self._past, start + n)
        q = np.arange(start, start + n)[:, None]
        ok = (keys[None, :] >= 0) & (keys[None, :] <= q)
        if self._window:
            ok &= keys[None, :] > q - int(self._window)
        return np.where(ok, np.float32(0.0), MASKED).astype(np.float32)


class _Run:
    """One fresh forward (an official chunk with its left context); positions restart at 0."""

    def __init__(self, dec: CodecDecoder):
        self.dec = dec
        self.pos = 0
        kv_shape = (dec._kv_heads, dec._past, dec._head_dim)
        self.kv = [np.zeros(kv_shape, np.float32) for _ in range(2 * dec._layers)]
        self.conv = [np.zeros((s.channels, 1, s.width), np.float32) for s in dec._states]

    def step(self, latent: np.ndarray) -> np.ndarray:
        dec = self.dec
        n = latent.shape[0]
        cos, sin = dec._rope(self.pos, n)
        feeds = {
            "latent": np.ascontiguousarray(latent.T)[:, None, :],  # (c, h=1, w=T)
            "cos": cos,
            "sin": sin,
            "mask": dec._mask(self.pos, n),
        }
        for i in range(dec._layers):
            feeds[f"k{i}"] = self.kv[2 * i]
            feeds[f"v{i}"] = self.kv[2 * i + 1]
        for s, arr in zip(dec._states, self.conv, strict=True):
            feeds[s.name] = arr
        ex = dec._net.create_extractor()
        mats = {k: ncnn.Mat(np.ascontiguousarray(v, dtype=np.float32)).clone() for k, v in feeds.items()}
        for k, m in mats.items():
            ex.input(k, m)
        with team_limit(crowded_team(dec.threads)):  # one thread while other programs hold the cores
            out = {name: _extract(ex, name) for name in dec._outputs}
        del ex, mats
        wav = out["wav"].reshape(-1)
        new_conv = [out[s.name + "_out"] for s in dec._states]
        new_kv = [out[f"{t}{i}_out"] for i in range(dec._layers) for t in ("k", "v")]
        if wav.shape[0] != n * dec.samples_per_frame:
            raise EngineError(f"codec decoder produced {wav.shape[0]} samples for {n} frames")
        self.conv, self.kv = new_conv, new_kv
        self.pos += n
        return wav


def _extract(ex, name: str) -> np.ndarray:
    ret, mat = ex.extract(name)
    if ret != 0:
        raise EngineError(f"codec decoder: ncnn failed computing {name} (error {ret})")
    return np.array(mat, dtype=np.float32)


class StreamingDecoder:
    """Frames in, audio out, as they arrive: push(frames) returns the samples of exactly those frames.

    No latency and nothing held back (the decoder is causal). Reproduces the official chunking: at every
    300-frame boundary a fresh run starts from the previous 25 frames, whose audio is dropped.
    """

    def __init__(self, decoder: CodecDecoder):
        self._dec = decoder
        self._run: _Run | None = None
        self.frames = 0  # frames received so far
        self._history = np.zeros((0, decoder.info.codebook_dim), np.float32)  # last LEFT_CONTEXT latents

    def push(self, frames) -> np.ndarray:
        """Decode new frames ((n, 16) or one (16,) frame); returns their n*1920 samples."""
        arr = np.asarray(frames)
        if arr.ndim == 1:
            arr = arr.reshape(1, -1)
        parts = list(self.iter_push(arr))
        return np.concatenate(parts) if parts else np.zeros(0, np.float32)

    def iter_push(self, frames, validated: bool = False) -> Iterator[np.ndarray]:
        """Like push, yielding audio block by block (at most BLOCK_FRAMES frames each)."""
        dec = self._dec
        codes = frames if validated else dec.validate(frames)
        i, n = 0, codes.shape[0]
        while i < n:
            t = self.frames
            if self._run is None or (t % CHUNK_SIZE == 0 and t > 0):
                self._start_run(t)
            take = min(n - i, CHUNK_SIZE - t % CHUNK_SIZE, BLOCK_FRAMES)
            lat = dec.latent(codes[i:i + take])
            assert self._run is not None  # started just above when missing
            wav = self._run.step(lat)
            self._history = np.concatenate([self._history, lat])[-LEFT_CONTEXT:]
            self.frames += take
            i += take
            yield wav

    def _start_run(self, t: int) -> None:
        """A new official chunk starting at frame t: fresh state, primed with up to 25 earlier frames."""
        self._run = self._dec._new_run()
        ctx = LEFT_CONTEXT if t - LEFT_CONTEXT > 0 else t
        if ctx:
            hist = self._history[-ctx:]
            for j in range(0, ctx, BLOCK_FRAMES):
                self._run.step(hist[j:j + BLOCK_FRAMES])  # context audio is discarded, as upstream
