"""Speech-tokenizer encoder (the HF Mimi encoder inside the 12 Hz tokenizer) -> four ncnn graphs + codebooks.

Graphs (all sizes from speech_tokenizer/config.json "encoder_config"):
  codec_encoder_conv  in0 audio (1, 1, L) -> out0 (hidden, 1, ceil(L / hop)) at 25 Hz. The causal SEANet stack.
      Every conv pads `k_eff - stride` zeros on the left and `stride - 1` zeros on the right. Mimi's "extra
      padding" (right zeros up to the next multiple of the stride) only ever reaches into those zeros and the
      conv drops the unused tail, so one static graph is exact for every input length.
  codec_encoder_tf    in0 latent rows (B, hidden) of one block, mask (B, past + B), cos/sin (B, head_dim/2),
      k_in_<i>/v_in_<i> (KV cache of the earlier rows, opaque) -> out0 (B, hidden), k_out_<i>/v_out_<i>.
      The transformer runs block by block so memory stays linear in the length (the mask and the attention
      scores are B x past, not T x T); a block attends to every earlier row, exactly like one full pass.
  codec_encoder_down  in0 (T25, hidden) -> sem, ac (T12, codebook_dim): stride-2 downsample (replicate
      padding, same static-pad argument), then the semantic and acoustic input_proj.
      The nearest-codebook search runs on the host in fp32 (engine/nets/codec_encoder.py) with torch.cdist's
      arithmetic; its one matrix product per level runs in
  codec_encoder_rvq   x (T, dim + 2), b (size, dim + 2) -> out0 (T, size) = x @ b^T, always fp32 (a Gemm
      with no weights: numpy's BLAS threads spin and stall on a busy machine).
Table codec_encoder_codebooks (levels, codebook_size, codebook_dim) float32 = embed_sum / clamp(usage, 1e-5)
for the kept levels: semantic levels first, then acoustic levels. Always fp32, whatever the bundle precision.

Attention mask: transformers 4.57.3's MimiTransformerModel builds its mask with masking_utils.create_causal_mask,
which never reads config.sliding_window (only create_sliding_window_causal_mask does), and the encoder runs
with use_cache=False, so no sliding-window cache trims the keys either. The encoder therefore attends over a
plain causal mask at every length; we record sliding_window=None in the part metadata and the runtime builds
the full causal mask.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ConvertError
from ..runtime.manifest_parts import CodecEncoderPart
from ..runtime.ncnn_graph import Graph, raw, tagged
from .checkpoint import Checkpoint

CONV_NET = "codec_encoder_conv"
TF_NET = "codec_encoder_tf"
DOWN_NET = "codec_encoder_down"
RVQ_NET = "codec_encoder_rvq"
CODEBOOKS = "codec_encoder_codebooks"
PREFIX = "encoder."
DOWNSAMPLE_STRIDE = 2  # fixed in MimiModel
FEATMASK_ONE_THREAD = 1 << 7  # ncnn per-layer featmask bit: run this layer on one thread
CODEBOOK_EPS = 1e-5  # MimiEuclideanCodebook epsilon

# MimiConfig defaults, for keys a config.json might leave out.
_DEFAULTS: dict[str, Any] = dict(
    audio_channels=1, num_filters=64, kernel_size=7, residual_kernel_size=3, last_kernel_size=3,
    num_residual_layers=1, dilation_growth_rate=2, compress=2, upsampling_ratios=[8, 6, 5, 4],
    use_causal_conv=True, pad_mode="constant", use_conv_shortcut=False, hidden_size=512,
    num_hidden_layers=8, num_attention_heads=8, num_key_value_heads=8, head_dim=None,
    intermediate_size=2048, hidden_act="gelu", norm_eps=1e-5, rope_theta=10000.0, rope_scaling=None,
    attention_bias=False, num_quantizers=32, num_semantic_quantizers=1, codebook_size=2048,
    sliding_window=250, sampling_rate=24000,
)


@dataclass
class EncoderSpec:
    audio_channels: int
    num_filters: int
    kernel_size: int
    residual_kernel_size: int
    last_kernel_size: int
    num_residual_layers: int
    dilation_growth_rate: int
    compress: int
    ratios: list[int]  # encoder strides, in encoder order (reversed upsampling_ratios)
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    norm_eps: float
    rope_theta: float
    semantic_levels: int
    levels: int  # kept codes per frame (encoder_valid_num_quantizers)
    codebook_size: int
    samples_per_frame: int  # at the 12.5 Hz output rate

    @property
    def hop(self) -> int:
        """Input samples per 25 Hz latent frame."""
        return math.prod(self.ratios)


def encoder_spec(speech_config: dict[str, Any]) -> EncoderSpec:
    """Validate and collect the encoder's config values (speech_tokenizer/config.json)."""
    enc = speech_config.get("encoder_config")
    if not isinstance(enc, dict):
        raise ConvertError("speech_tokenizer/config.json has no encoder_config; is this the 12 Hz tokenizer?")
    c = {**_DEFAULTS, **enc}
    unsupported = []
    if not c["use_causal_conv"]:
        unsupported.append("use_causal_conv=false")
    if c["pad_mode"] != "constant":
        unsupported.append(f"pad_mode={c['pad_mode']!r}")
    if c["use_conv_shortcut"]:
        unsupported.append("use_conv_shortcut=true")
    if c["audio_channels"] != 1:
        unsupported.append(f"audio_channels={c['audio_channels']}")
    if c["hidden_act"] != "gelu":
        unsupported.append(f"hidden_act={c['hidden_act']!r}")
    if c["attention_bias"]:
        unsupported.append("attention_bias=true")
    rs = c["rope_scaling"]
    if isinstance(rs, dict) and rs.get("rope_type", rs.get("type", "default")) != "default":
        unsupported.append(f"rope_scaling={rs!r}")
    if c["sampling_rate"] != 24000:
        unsupported.append(f"sampling_rate={c['sampling_rate']}")
    if unsupported:
        raise ConvertError(f"unsupported speech encoder config: {', '.join(unsupported)}")
    ratios = [int(r) for r in reversed(c["upsampling_ratios"])]
    heads = int(c["num_attention_heads"])
    spec = EncoderSpec(
        audio_channels=1,
        num_filters=int(c["num_filters"]),
        kernel_size=int(c["kernel_size"]),
        residual_kernel_size=int(c["residual_kernel_size"]),
        last_kernel_size=int(c["last_kernel_size"]),
        num_residual_layers=int(c["num_residual_layers"]),
        dilation_growth_rate=int(c["dilation_growth_rate"]),
        compress=int(c["compress"]),
        ratios=ratios,
        hidden=int(c["hidden_size"]),
        layers=int(c["num_hidden_layers"]),
        heads=heads,
        kv_heads=int(c["num_key_value_heads"]),
        head_dim=int(c["head_dim"] or int(c["hidden_size"]) // heads),
        intermediate=int(c["intermediate_size"]),
        norm_eps=float(c["norm_eps"]),
        rope_theta=float(c["rope_theta"]),
        semantic_levels=int(c["num_semantic_quantizers"]),
        levels=int(speech_config.get("encoder_valid_num_quantizers", 16)),
        codebook_size=int(c["codebook_size"]),
        samples_per_frame=int(speech_config.get("encode_downsample_rate", 1920)),
    )
    if spec.hop * DOWNSAMPLE_STRIDE != spec.samples_per_frame:
        raise ConvertError(
            f"speech encoder strides {spec.ratios} x {DOWNSAMPLE_STRIDE} do not give "
            f"encode_downsample_rate {spec.samples_per_frame}"
        )
    if not spec.semantic_levels <= spec.levels <= int(c["num_quantizers"]):
        raise ConvertError(
            f"encoder_valid_num_quantizers {spec.levels} is outside {spec.semantic_levels}..{c['num_quantizers']}"
        )
    if spec.heads % spec.kv_heads or spec.head_dim % 2:
        raise ConvertError(f"unsupported speech encoder attention: {spec.heads} heads, {spec.kv_heads} kv heads, "
                           f"head_dim {spec.head_dim}")
    return spec


class _Builder:
    """Shared pieces: read tensors, add ncnn layers with the bundle's weight precision."""

    def __init__(self, ckpt: Checkpoint, fp16: bool):
        self.ckpt = ckpt
        self.fp16 = fp16

    def get(self, name: str, shape: tuple[int, ...] | None = None) -> np.ndarray:
        key = PREFIX + name
        if key not in self.ckpt.speech:
            raise ConvertError(f"speech_tokenizer/model.safetensors has no tensor {key}; is this the 12 Hz tokenizer?")
        arr = self.ckpt.speech.get(key)
        if shape is not None and arr.shape != shape:
            raise ConvertError(f"speech tokenizer tensor {key} has shape {arr.shape}, config implies {shape}")
        return arr

    def conv(self, g: Graph, x: str, name: str, cin: int, cout: int, k: int, stride: int = 1, dilation: int = 1,
             bias: bool = True, pad_left: int | None = None, pad_right: int | None = None) -> str:
        """A causal MimiConv1d: k_eff - stride zeros on the left, stride - 1 on the right (see module doc).

        Runs as a 2-D Convolution over (channels, 1, length) blobs: ncnn's im2col/gemm path there is 1.2-2.7x
        faster than Convolution1D for these shapes (measured, one thread)."""
        w = self.get(f"{name}.weight", (cout, cin, k))
        k_eff = (k - 1) * dilation + 1
        left = k_eff - stride if pad_left is None else pad_left
        right = stride - 1 if pad_right is None else pad_right
        params: dict[int, Any] = {0: cout, 1: k, 11: 1, 2: dilation, 12: 1, 3: stride, 13: 1, 4: left, 15: right,
                                  14: 0, 16: 0, 18: 0.0, 5: int(bias), 6: w.size}
        weights = [tagged(w, fp16=self.fp16)]
        if bias:
            weights.append(raw(self.get(f"{name}.bias", (cout,))))
        return g.layer("Convolution", [x], params=params, weights=weights)

    def linear(self, g: Graph, x: str, name: str, cin: int, cout: int, out: str | None = None) -> str:
        """y = x @ W^T for a (rows, cin) blob; Gemm with a constant B is 2-3x faster than InnerProduct here."""
        w = self.get(f"{name}.weight", (cout, cin))
        return gemm(g, x, w, self.fp16, out)


def gemm(g: Graph, x: str, w: np.ndarray, fp16: bool, name: str | None = None) -> str:
    cout, cin = w.shape
    params = {0: 1.0, 1: 1.0, 2: 0, 3: 1, 4: 0, 5: 1, 6: 1, 7: 0, 8: cout, 9: cin, 10: -1}
    return g.layer("Gemm", [x], params=params, weights=[tagged(w, fp16=fp16)], name=name)


def _elu(g: Graph, x: str) -> str:
    return g.layer("ELU", [x], params={0: 1.0})


def build_conv_graph(b: _Builder, s: EncoderSpec) -> tuple[Graph, int]:
    """The SEANet encoder (MimiEncoder). Returns the graph and its left receptive field in input samples."""
    g = Graph()
    x = g.input("in0")
    reach = 0  # how far back (in input samples) the last output frame's inputs go
    scale = 1  # input samples per position at the current layer

    def conv(x: str, name: str, cin: int, cout: int, k: int, stride: int = 1, dilation: int = 1) -> str:
        nonlocal reach, scale
        reach += ((k - 1) * dilation + 1 - stride) * scale
        y = b.conv(g, x, name, cin, cout, k, stride, dilation)
        scale *= stride
        return y

    idx = 0
    x = conv(x, f"encoder.layers.{idx}.conv", 1, s.num_filters, s.kernel_size)
    idx += 1
    mult = 1
    for ratio in s.ratios:
        ch = mult * s.num_filters
        for j in range(s.num_residual_layers):
            hid = ch // s.compress
            base = f"encoder.layers.{idx}.block"
            h = conv(_elu(g, x), f"{base}.1.conv", ch, hid, s.residual_kernel_size, dilation=s.dilation_growth_rate**j)
            h = conv(_elu(g, h), f"{base}.3.conv", hid, ch, 1)
            x = g.layer("BinaryOp", [x, h], params={0: 0})
            idx += 1
        x = _elu(g, x)
        idx += 1
        x = conv(x, f"encoder.layers.{idx}.conv", ch, ch * 2, ratio * 2, stride=ratio)
        idx += 1
        mult *= 2
    x = _elu(g, x)
    idx += 1
    x = conv(x, f"encoder.layers.{idx}.conv", mult * s.num_filters, s.hidden, s.last_kernel_size)
    g.layer("Noop", [x], name="out0")
    return g, reach


def _one_thread(g: Graph):
    def op(type: str, inputs: list[str], params: dict[int, Any], weights=(), name: str | None = None) -> str:
        """A cheap elementwise/layout layer: one thread (an OpenMP barrier per layer costs more than the work
        at 25 Hz lengths and stalls badly on a busy machine)."""
        return g.layer(type, inputs, params={**params, 31: FEATMASK_ONE_THREAD}, weights=weights, name=name)
    return op


def build_tf_graph(b: _Builder, s: EncoderSpec) -> Graph:
    """MimiTransformerModel (no final norm) over one block of query rows, with a KV cache of earlier rows."""
    g = Graph()
    op = _one_thread(g)
    x = g.input("in0")  # (B, hidden) rows at positions past .. past + B - 1
    mask = g.input("mask")  # (B, past + B) additive
    cos = g.input("cos")  # (B, head_dim/2)
    sin = g.input("sin")
    H, nh, nkv, hd = s.hidden, s.heads, s.kv_heads, s.head_dim
    tf = "encoder_transformer.layers"

    def norm(x: str, name: str) -> str:
        return op("LayerNorm", [x], params={0: H, 1: s.norm_eps, 2: 1},
                  weights=[raw(b.get(f"{name}.weight", (H,))), raw(b.get(f"{name}.bias", (H,)))])

    def scale(x: str, name: str) -> str:
        # a (1, H) row broadcasts over the B rows; a 1-D blob would be ambiguous when B == H
        sc = op("MemoryData", [], params={0: H, 1: 1}, weights=[raw(b.get(name, (H,)).reshape(1, H))])
        return op("BinaryOp", [x, sc], params={0: 2})

    def heads(x: str, n: int) -> str:
        x = op("Reshape", [x], params={0: hd, 1: n, 2: -1})  # (B, n, hd)
        return op("Permute", [x], params={0: 2})  # (n, B, hd)

    for i in range(s.layers):
        p = f"{tf}.{i}"
        h = norm(x, f"{p}.input_layernorm")
        q = heads(b.linear(g, h, f"{p}.self_attn.q_proj", H, nh * hd), nh)
        k = heads(b.linear(g, h, f"{p}.self_attn.k_proj", H, nkv * hd), nkv)
        v = heads(b.linear(g, h, f"{p}.self_attn.v_proj", H, nkv * hd), nkv)
        q = op("RotaryEmbed", [q, cos, sin], params={0: 0})
        k = op("RotaryEmbed", [k, cos, sin], params={0: 0})
        a, _, _ = g.layer_outputs("SDPA", [q, k, v, mask, g.input(f"k_in_{i}"), g.input(f"v_in_{i}")],
                                  outputs=[f"att_{i}", f"k_out_{i}", f"v_out_{i}"],
                                  params={5: 1, 6: 1.0 / math.sqrt(hd), 7: 1})
        g.output(f"k_out_{i}")
        g.output(f"v_out_{i}")
        a = op("Permute", [a], params={0: 2})  # (B, nh, hd)
        a = op("Reshape", [a], params={0: nh * hd, 1: -1})
        a = b.linear(g, a, f"{p}.self_attn.o_proj", nh * hd, H)
        x = op("BinaryOp", [x, scale(a, f"{p}.self_attn_layer_scale.scale")], params={0: 0})
        h = norm(x, f"{p}.post_attention_layernorm")
        h = b.linear(g, h, f"{p}.mlp.fc1", H, s.intermediate)
        h = op("GELU", [h], params={0: 0})
        h = b.linear(g, h, f"{p}.mlp.fc2", s.intermediate, H)
        x = op("BinaryOp", [x, scale(h, f"{p}.mlp_layer_scale.scale")], params={0: 0})
    op("Noop", [x], params={}, name="out0")
    return g


def build_down_graph(b: _Builder, s: EncoderSpec) -> tuple[Graph, dict[str, int]]:
    """Downsample 25 -> 12.5 Hz (causal conv, replicate padding: left k - 2, right "extra" <= 1) and the two
    RVQ input projections, over the whole sequence."""
    g = Graph()
    op = _one_thread(g)
    H = s.hidden
    x = g.input("in0")  # (T25, H)
    k_down = b.ckpt.speech.shape(PREFIX + "downsample.conv.weight")[-1]
    x = op("Permute", [x], params={0: 1})  # (H, T25)
    x = op("Reshape", [x], params={0: -1, 1: 1, 2: H})  # (H, 1, T25)
    x = op("Padding", [x], params={2: k_down - DOWNSAMPLE_STRIDE, 3: DOWNSAMPLE_STRIDE - 1, 4: 1})
    x = b.conv(g, x, "downsample.conv", H, H, k_down, DOWNSAMPLE_STRIDE, bias=False, pad_left=0, pad_right=0)
    x = op("Reshape", [x], params={0: -1, 1: H})  # (H, T12)
    x = op("Permute", [x], params={0: 1})  # (T12, H)

    dims = {}
    for branch, out in (("semantic", "sem"), ("acoustic", "ac")):
        name = f"quantizer.{branch}_residual_vector_quantizer.input_proj.weight"
        if PREFIX + name in b.ckpt.speech:  # absent when vector_quantization_hidden_dimension == hidden_size
            shape = b.ckpt.speech.shape(PREFIX + name)
            w = b.get(name, (shape[0], H, 1)).reshape(shape[0], H)
            gemm(g, x, w, b.fp16, out)
            dims[out] = shape[0]
        else:
            g.layer("Noop", [x], name=out)
            dims[out] = H
    return g, dims


def build_rvq_graph() -> Graph:
    g = Graph()
    x, b = g.input("x"), g.input("b")
    g.layer("Gemm", [x, b], params={0: 1.0, 1: 1.0, 2: 0, 3: 1, 4: 0, 5: 0, 6: 1, 7: 0, 8: 0, 9: 0, 10: -1},
            name="out0")
    return g


def codebooks(b: _Builder, s: EncoderSpec) -> np.ndarray:
    """The kept codebooks, semantic levels first: embed_sum / clamp(cluster_usage, eps) in fp32 like Mimi."""
    rows = []
    for level in range(s.levels):
        if level < s.semantic_levels:
            name = f"quantizer.semantic_residual_vector_quantizer.layers.{level}.codebook"
        else:
            name = f"quantizer.acoustic_residual_vector_quantizer.layers.{level - s.semantic_levels}.codebook"
        usage = b.get(f"{name}.cluster_usage", (s.codebook_size,))
        embed_sum = b.get(f"{name}.embed_sum")
        if embed_sum.ndim != 2 or embed_sum.shape[0] != s.codebook_size:
            raise ConvertError(f"speech tokenizer {name}.embed_sum has shape {embed_sum.shape}")
        rows.append(embed_sum / np.maximum(usage, np.float32(CODEBOOK_EPS))[:, None])
    return np.stack(rows).astype(np.float32)


def convert(ckpt: Checkpoint, writer, options) -> None:
    spec = encoder_spec(ckpt.speech_config)
    b = _Builder(ckpt, fp16=options.precision == "fp16")
    options.report(0.0, "convolution stack")
    conv_graph, reach = build_conv_graph(b, spec)
    writer.add_graph(CONV_NET, conv_graph)
    options.report(0.4, "transformer")
    writer.add_graph(TF_NET, build_tf_graph(b, spec))
    down_graph, dims = build_down_graph(b, spec)
    writer.add_graph(DOWN_NET, down_graph)
    options.report(0.8, "codebooks")
    books = codebooks(b, spec)
    if books.shape[2] != dims["sem"] or books.shape[2] != dims["ac"]:
        raise ConvertError(f"speech encoder codebook dim {books.shape[2]} does not match its input_proj {dims}")
    writer.add_table(CODEBOOKS, books)
    writer.add_graph(RVQ_NET, build_rvq_graph())
    writer.write_record(CodecEncoderPart(
        conv_net=CONV_NET, tf_net=TF_NET, down_net=DOWN_NET, layers=spec.layers, rvq_net=RVQ_NET,
        codebooks=CODEBOOKS, hidden=spec.hidden, heads=spec.heads, head_dim=spec.head_dim,
        rope_theta=spec.rope_theta,
        sliding_window=None,  # plain causal attention, see module docstring
        hop=spec.hop, downsample_stride=DOWNSAMPLE_STRIDE, samples_per_frame=spec.samples_per_frame,
        receptive_field=reach, semantic_levels=spec.semantic_levels, levels=spec.levels,
        codebook_size=spec.codebook_size, codebook_dim=int(books.shape[2]),
    ))
    options.report(1.0, "done")
