"""Hugging Face Whisper checkpoint -> a speech-recognition bundle: two ncnn graphs and two numpy tables.

Graph `whisper_encoder` (one call per 30 s window):
    input   features (n_mels, 3000)                                   the log-mel window (engine/recognition/features.py)
    outputs encoder (1500, d) and, per decoder layer i, xk_<i>, xv_<i> (heads, 1500, head_dim): the cross-attention
            keys and values, computed once per window instead of once per token
    conv1 -> GELU -> conv2 (stride 2) -> GELU -> + positions -> pre-norm layers -> final LayerNorm
Graph `whisper_decoder` (one token per call, KV cache inside SDPA as in the talker):
    inputs  in0 (d,) the token's embedding row plus its position row (summed in numpy from the tables);
            k_in_<i>, v_in_<i> (opaque, fed back as extracted); xk_<i>, xv_<i> from the encoder
    outputs logits (vocab,), k_out_<i>, v_out_<i>
Tables: whisper_tokens (vocab, d) (times embed_scale), whisper_positions (448, d).

The output projection is tied to the token table in every Whisper checkpoint (proj_out = embed_tokens); the graph
holds its own copy so that the logits are one InnerProduct (GEMV) per token.
Linear weights are stored fp16 where that is lossless (fp32 bundles; engine/convert/talker.py fp16_lossless), or
always (fp16 bundles); q8 is not offered for Whisper (its accuracy is checked for the talker's weights only).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConvertError
from ..io.json_file import json_object_or_none, read_json_object
from ..runtime.ncnn_graph import Graph, raw, tagged
from ..runtime.whisper_part import FRONT_END, WhisperPart, WhisperSpec
from .checkpoint import SafetensorsFile
from .talker import FEATMASK_NO_FP16, fp16_lossless

ENCODER_GRAPH = "whisper_encoder"
DECODER_GRAPH = "whisper_decoder"
TOKEN_TABLE = "whisper_tokens"
POSITION_TABLE = "whisper_positions"
PRECISIONS = ("fp32", "fp16")
REQUIRED_FILES = ("config.json", "generation_config.json", "model.safetensors", "preprocessor_config.json",
                  "vocab.json")
TOKENIZER_FILES = ("vocab.json", "merges.txt", "added_tokens.json", "special_tokens_map.json",
                   "tokenizer_config.json", "normalizer.json", "tokenizer.json")


def is_whisper_checkpoint(path: str | Path) -> bool:
    """True when the folder's config.json says model_type "whisper"."""
    config = json_object_or_none(Path(path) / "config.json")
    return config is not None and config.get("model_type") == "whisper"


def whisper_spec(cfg: dict[str, Any]) -> WhisperSpec:
    """The shapes of one Whisper model from its config.json, checked for what the graphs support."""
    try:
        d = int(cfg["d_model"])
        spec = WhisperSpec(
            mels=int(cfg["num_mel_bins"]), d_model=d, encoder_layers=int(cfg["encoder_layers"]),
            decoder_layers=int(cfg["decoder_layers"]), encoder_heads=int(cfg["encoder_attention_heads"]),
            decoder_heads=int(cfg["decoder_attention_heads"]),
            source_positions=int(cfg.get("max_source_positions", 1500)),
            target_positions=int(cfg.get("max_target_positions", 448)), vocab_size=int(cfg["vocab_size"]),
            embed_scale=math.sqrt(d) if cfg.get("scale_embedding") else 1.0,
        )
    except (KeyError, TypeError, ValueError) as e:
        raise ConvertError(f"config.json: the Whisper config is missing or has a bad value: {e}") from None
    for heads in (spec.encoder_heads, spec.decoder_heads):
        if heads <= 0 or d % heads:
            raise ConvertError(f"config.json: d_model {d} is not a multiple of {heads} attention heads")
    if (cfg.get("activation_function") or "gelu") != "gelu":
        raise ConvertError(f"config.json: activation {cfg.get('activation_function')!r} is not supported")
    if spec.source_positions != 1500:
        raise ConvertError(f"config.json: max_source_positions {spec.source_positions} is not supported "
                           "(Whisper windows are 30 s: 1500 positions)")
    return spec


class _Builder:
    """Layers of the Whisper graphs, reading weights from the checkpoint."""

    def __init__(self, g: Graph, weights: SafetensorsFile, precision: str):
        self.g, self.weights, self.precision = g, weights, precision

    def w(self, name: str) -> np.ndarray:
        return self.weights.get(name)

    def _store_fp16(self, w: np.ndarray) -> bool:
        return self.precision == "fp16" or fp16_lossless(w)

    def linear(self, x: str, weight: np.ndarray, bias: np.ndarray | None, name: str | None = None) -> str:
        params: dict[int, Any] = {0: int(weight.shape[0]), 1: int(bias is not None), 2: int(weight.size)}
        fp16 = self._store_fp16(weight)
        if not fp16:
            params[31] = FEATMASK_NO_FP16  # a weight fp16 storage would round
        ws = [tagged(weight, fp16=fp16)] + ([raw(bias)] if bias is not None else [])
        return self.g.layer("InnerProduct", [x], params=params, weights=ws, name=name)

    def layer_norm(self, x: str, prefix: str) -> str:
        gamma, beta = self.w(prefix + ".weight"), self.w(prefix + ".bias")
        return self.g.layer("LayerNorm", [x], params={0: int(gamma.size), 1: 1e-5, 2: 1},
                            weights=[raw(gamma), raw(beta)])

    def conv(self, x: str, prefix: str, stride: int) -> str:
        w, b = self.w(prefix + ".weight"), self.w(prefix + ".bias")
        out, _, k = w.shape
        params: dict[int, Any] = {0: int(out), 1: int(k), 2: 1, 3: stride, 4: 1, 15: 1, 5: 1, 6: int(w.size)}
        fp16 = self._store_fp16(w)
        if not fp16:
            params[31] = FEATMASK_NO_FP16
        return self.g.layer("Convolution1D", [x], params=params, weights=[tagged(w, fp16=fp16), raw(b)])

    def gelu(self, x: str) -> str:
        return self.g.layer("GELU", [x], params={0: 0})  # exact (erf) GELU, as torch's nn.functional.gelu

    def add(self, a: str, b: str) -> str:
        return self.g.layer("BinaryOp", [a, b], params={0: 0})

    def heads(self, t: str, heads: int, head_dim: int) -> str:
        """(heads*hd,) or (L, heads*hd) -> ncnn Mat w=hd, h=L, c=heads (SDPA's layout)."""
        t = self.g.layer("Reshape", [t], params={0: head_dim, 1: heads, 2: -1})
        return self.g.layer("Permute", [t], params={0: 2})

    def merge_heads(self, att: str, d: int, squeeze: bool) -> str:
        att = self.g.layer("Permute", [att], params={0: 2})  # (L, heads, hd)
        att = self.g.layer("Reshape", [att], params={0: d, 1: -1})
        if squeeze:
            att = self.g.layer("Squeeze", [att], params={1: 1})  # one row -> vector (GEMV kernel)
        return att

    def bias(self, name: str) -> np.ndarray | None:
        return self.w(name) if name in self.weights else None

    def mlp(self, x: str, p: str) -> str:
        h = self.layer_norm(x, p + "final_layer_norm")
        h = self.gelu(self.linear(h, self.w(p + "fc1.weight"), self.w(p + "fc1.bias")))
        return self.add(x, self.linear(h, self.w(p + "fc2.weight"), self.w(p + "fc2.bias")))

    def qkv(self, h: str, a: str, d: int) -> list[str]:
        """q, k, v of one self-attention (k_proj has no bias in Whisper: zeros in the fused InnerProduct)."""
        w = np.concatenate([self.w(a + "q_proj.weight"), self.w(a + "k_proj.weight"), self.w(a + "v_proj.weight")])
        zeros = np.zeros(d, np.float32)
        b = np.concatenate([self.w(a + "q_proj.bias"), self.bias(a + "k_proj.bias") if self.bias(a + "k_proj.bias")
                            is not None else zeros, self.w(a + "v_proj.bias")])
        qkv = self.linear(h, w, b)
        return self.g.layer_outputs("Slice", [qkv], outputs=3, params={0: [d, d, d], 1: -1})


def _encoder_graph(weights: SafetensorsFile, s: WhisperSpec, precision: str, report) -> Graph:
    g = Graph()
    b = _Builder(g, weights, precision)
    e = "model.encoder."
    hd = s.d_model // s.encoder_heads
    x = b.gelu(b.conv(g.input("features"), e + "conv1", 1))
    x = b.gelu(b.conv(x, e + "conv2", 2))
    x = g.layer("Permute", [x], params={0: 1})  # (d, 1500) -> (1500, d)
    pos = weights.get(e + "embed_positions.weight")
    pos_blob = g.layer("MemoryData", [], params={0: int(pos.shape[1]), 1: int(pos.shape[0])}, weights=[raw(pos)])
    x = b.add(x, pos_blob)
    for i in range(s.encoder_layers):
        report(i / (s.encoder_layers + 1), f"encoder layers ({i}/{s.encoder_layers})")
        p = f"{e}layers.{i}."
        h = b.layer_norm(x, p + "self_attn_layer_norm")
        q, k, v = (b.heads(t, s.encoder_heads, hd) for t in b.qkv(h, p + "self_attn.", s.d_model))
        att = g.layer("SDPA", [q, k, v], params={5: 0, 6: float(hd ** -0.5), 7: 0})
        att = b.merge_heads(att, s.d_model, squeeze=False)
        x = b.add(x, b.linear(att, b.w(p + "self_attn.out_proj.weight"), b.w(p + "self_attn.out_proj.bias")))
        x = b.mlp(x, p)
    enc = g.output(g.layer("LayerNorm", [x], name="encoder", params={0: s.d_model, 1: 1e-5, 2: 1},
                           weights=[raw(b.w(e + "layer_norm.weight")), raw(b.w(e + "layer_norm.bias"))]))
    dhd = s.d_model // s.decoder_heads
    for i in range(s.decoder_layers):
        a = f"model.decoder.layers.{i}.encoder_attn."
        for kv in ("k", "v"):
            t = b.linear(enc, b.w(f"{a}{kv}_proj.weight"), b.bias(f"{a}{kv}_proj.bias"))
            t = g.layer("Reshape", [t], params={0: dhd, 1: s.decoder_heads, 2: -1})
            g.output(g.layer("Permute", [t], params={0: 2}, name=f"x{kv}_{i}"))
    return g


def _decoder_graph(weights: SafetensorsFile, s: WhisperSpec, precision: str, output: np.ndarray, report) -> Graph:
    g = Graph()
    b = _Builder(g, weights, precision)
    hd = s.d_model // s.decoder_heads
    scale = float(hd ** -0.5)
    x = g.input("in0")
    for i in range(s.decoder_layers):
        g.input(f"k_in_{i}")
        g.input(f"v_in_{i}")
        g.input(f"xk_{i}")
        g.input(f"xv_{i}")
    for i in range(s.decoder_layers):
        report(i / (s.decoder_layers + 1), f"decoder layers ({i}/{s.decoder_layers})")
        p = f"model.decoder.layers.{i}."
        h = b.layer_norm(x, p + "self_attn_layer_norm")
        q, k, v = (b.heads(t, s.decoder_heads, hd) for t in b.qkv(h, p + "self_attn.", s.d_model))
        att, _, _ = g.layer_outputs("SDPA", [q, k, v, f"k_in_{i}", f"v_in_{i}"],
                                    outputs=[f"self_att_{i}", f"k_out_{i}", f"v_out_{i}"],
                                    params={5: 0, 6: scale, 7: 1})
        g.output(f"k_out_{i}")
        g.output(f"v_out_{i}")
        att = b.merge_heads(att, s.d_model, squeeze=True)
        x = b.add(x, b.linear(att, b.w(p + "self_attn.out_proj.weight"), b.w(p + "self_attn.out_proj.bias")))
        a = p + "encoder_attn."
        h = b.layer_norm(x, p + "encoder_attn_layer_norm")
        q = b.heads(b.linear(h, b.w(a + "q_proj.weight"), b.bias(a + "q_proj.bias")), s.decoder_heads, hd)
        att = g.layer("SDPA", [q, f"xk_{i}", f"xv_{i}"], params={5: 0, 6: scale, 7: 0})
        att = b.merge_heads(att, s.d_model, squeeze=True)
        x = b.add(x, b.linear(att, b.w(a + "out_proj.weight"), b.bias(a + "out_proj.bias")))
        x = b.mlp(x, p)
    h = b.layer_norm(x, "model.decoder.layer_norm")
    b.linear(h, output, None, name="logits")
    g.output("logits")
    return g


def convert(src: Path, writer, options) -> None:
    """Write a Whisper bundle from checkpoint folder `src` through `writer` (a BundleWriter)."""
    if options.precision not in PRECISIONS:
        raise ConvertError(f"Whisper models convert to {' or '.join(PRECISIONS)}, not {options.precision}")
    missing = [f for f in REQUIRED_FILES if not (src / f).is_file()]
    if missing:
        raise ConvertError(f"{src} is incomplete: missing {', '.join(missing)}")
    config = read_json_object(src / "config.json", ConvertError)
    generation = read_json_object(src / "generation_config.json", ConvertError)
    preprocessor = read_json_object(src / "preprocessor_config.json", ConvertError)
    spec = whisper_spec(config)
    front_end = {k: preprocessor.get(k) for k in FRONT_END}
    for key, value in front_end.items():
        if value is not None and (type(value) is not int or value < 1):
            raise ConvertError(f"{src}/preprocessor_config.json: {key} is {value!r}, not a positive whole number")
    for key in ("decoder_start_token_id", "eos_token_id", "no_timestamps_token_id"):
        if not isinstance(generation.get(key), int):
            raise ConvertError(f"{src}/generation_config.json has no {key}; it is not a Whisper generation config")
    weights = SafetensorsFile(src / "model.safetensors")
    try:
        tokens = weights.get("model.decoder.embed_tokens.weight")
        if tokens.shape != (spec.vocab_size, spec.d_model):
            raise ConvertError(f"model.safetensors: the token table is {tokens.shape}, the config says "
                               f"({spec.vocab_size}, {spec.d_model})")
        output = weights.get("proj_out.weight") if "proj_out.weight" in weights else tokens
        options.report(0.0, "encoder")
        writer.add_graph(ENCODER_GRAPH, _encoder_graph(weights, spec, options.precision,
                                                       lambda f, m: options.report(0.5 * f, m)))
        options.report(0.5, "decoder")
        writer.add_graph(DECODER_GRAPH, _decoder_graph(weights, spec, options.precision, output,
                                                       lambda f, m: options.report(0.5 + 0.4 * f, m)))
        options.report(0.9, "tables and tokenizer")
        writer.add_table(TOKEN_TABLE, (tokens * np.float32(spec.embed_scale)).astype(np.float32))
        writer.add_table(POSITION_TABLE, weights.get("model.decoder.embed_positions.weight"))
    finally:
        weights.close()
    for name in TOKENIZER_FILES:
        if (src / name).is_file():
            writer.copy_file(src / name, f"tokenizer/{name}")
    writer.manifest["model"] = WhisperPart.PART
    writer.manifest["precision"] = options.precision
    writer.manifest["config"] = config
    writer.manifest["generation_config"] = generation
    writer.write_record(WhisperPart(ENCODER_GRAPH, DECODER_GRAPH, TOKEN_TABLE, POSITION_TABLE, spec, front_end))
    options.report(1.0, "done")
