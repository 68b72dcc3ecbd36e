"""Whisper's encoder and decoder on ncnn (graphs written by engine/convert/whisper.py).

WhisperEncoder: one 30 s log-mel window -> the cross-attention keys and values of every decoder layer (Mats kept
as ncnn made them and fed to every decoder step unchanged).
WhisperDecoder: one token per call; its self-attention KV cache lives inside SDPA (opaque Mats fed back as
extracted, as the talker's). The token's input row (token table row + position row) is summed in numpy.

Weights: fp32 bundles hold fp16-stored weights where that was lossless; on x86 ncnn keeps those fp16 in memory and
computes in fp32 (engine/nets/talker.py net_precision says why), elsewhere they are widened at load.
"""

from __future__ import annotations

import ncnn
import numpy as np

from ..errors import BundleError
from ..runtime.bundle import Bundle
from ..runtime.ncnn_mats import InputRow, as_mat, extract, extract_raw
from ..runtime.whisper_part import WhisperPart
from .talker import X86


def whisper_part(bundle: Bundle) -> WhisperPart:
    """The bundle's Whisper part; a BundleError saying what the bundle is when it has none."""
    if not bundle.is_whisper or not bundle.has(WhisperPart):
        raise BundleError(f"{bundle.path} is a text-to-speech model, not a speech-recognition (Whisper) model; "
                          "choose a Whisper model to transcribe with")
    return bundle.record(WhisperPart)


def _precision(bundle: Bundle) -> str:
    if bundle.precision == "fp16" or X86:
        return "fp16"  # fp16-stored weights stay fp16; activations stay fp32 on x86 (see the module docstring)
    return "fp32"


class WhisperEncoder:
    """features (n_mels, 3000) -> [xk_0, xv_0, xk_1, ...] Mats for the decoder."""

    def __init__(self, bundle: Bundle, threads: int):
        part = whisper_part(bundle)
        self.spec = part.spec
        self.net = bundle.net(part.encoder_graph, threads, _precision(bundle))
        self._outputs = [f"x{kv}_{i}" for i in range(self.spec.decoder_layers) for kv in ("k", "v")]

    def set_threads(self, threads: int) -> None:
        self.net.opt.num_threads = threads

    def run(self, features: np.ndarray) -> list[ncnn.Mat]:
        ex = self.net.create_extractor()
        ex.input("features", as_mat(features))
        return extract_raw(ex, self._outputs)


class WhisperDecoder:
    """One token per call: logits (vocab,) of the next token; the cache grows by one position."""

    def __init__(self, bundle: Bundle, threads: int):
        part = whisper_part(bundle)
        self.spec = part.spec
        self.net = bundle.net(part.decoder_graph, threads, _precision(bundle))
        self.tokens = bundle.table(part.tokens_table)  # memory-mapped: a token reads one row
        self.positions = bundle.table(part.positions_table, in_memory=True)
        layers = self.spec.decoder_layers
        if self.tokens.shape != (self.spec.vocab_size, self.spec.d_model):
            raise BundleError(f"The model bundle {bundle.path} is damaged: its token table has the wrong shape.")
        self._cache_in = [f"{kv}_in_{i}" for i in range(layers) for kv in ("k", "v")]
        self._cache_out = [f"{kv}_out_{i}" for i in range(layers) for kv in ("k", "v")]
        self._cross_in = [f"x{kv}_{i}" for i in range(layers) for kv in ("k", "v")]
        self._row = InputRow((self.spec.d_model,))

    @property
    def max_positions(self) -> int:
        return int(self.positions.shape[0])

    def set_threads(self, threads: int) -> None:
        self.net.opt.num_threads = threads

    def step(self, token: int, position: int, cross: list[ncnn.Mat],
             cache: list[ncnn.Mat] | None) -> tuple[np.ndarray, list[ncnn.Mat]]:
        row = np.asarray(self.tokens[token], np.float32) + self.positions[position]
        ex = self.net.create_extractor()
        ex.input("in0", self._row.set(row))
        for name, mat in zip(self._cross_in, cross, strict=True):
            ex.input(name, mat)
        if cache is not None:
            for name, mat in zip(self._cache_in, cache, strict=True):
                ex.input(name, mat)
        logits = extract(ex, "logits").copy()
        return logits, extract_raw(ex, self._cache_out)
