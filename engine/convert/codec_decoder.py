"""Speech-tokenizer decoder (16 codes per frame -> 24 kHz audio) -> one stateful ncnn graph + a numpy table.

Layout of the result (sizes come from speech_tokenizer/config.json `decoder_config`, never from defaults):
  table `codec_decoder_codebooks` (sum of codebook sizes, codebook_dim): dequantised codebook rows already
      multiplied by their group's output projection, so a frame's latent is the sum of its 16 rows.
  graph `codec_decoder`: latent (w=T, h=codebook_dim) -> pre-conv -> sliding-window transformer ->
      x2 upsamplers with ConvNeXt -> SnakeBeta vocoder -> clamp -> wav (T * upsample,).

Every layer of the decoder is causal, so the graph is written in streaming form: each convolution with a
left context takes its previous input columns as an extra input blob (`state<i>`) and returns the new tail
(`state<i>_out`), and each attention layer takes the previous keys/values (`k<l>`, `v<l>`, P rows, masked by
the caller) and returns the last P rows (`k<l>_out`, `v<l>_out`). Zero states are exactly the zero padding of
a fresh forward, so one graph serves whole-sequence decoding (in blocks) and streaming alike.

Mixed precision: the same graph runs in fp32 or, with ncnn's use_bf16_storage, with its big convolutions in bf16
(BF16_ROLES). Every other layer carries featmask bit 2 (FEATMASK_NO_BF16), which keeps it in fp32, and each bf16
convolution is followed by an identity Cast (fp32 -> fp32) without the bit and without bf16 support, so ncnn casts
the convolution's bf16 output back to fp32 before it (a layer with the bit would read the bf16 blob as fp32:
tested, it crashes). The state tails, SnakeBeta, the residual adds and the transformer thus stay exact fp32; only the
marked convolutions round their inputs, weights and outputs to bf16. The manifest's `bf16_layers` flag tells the
runtime a bundle has these marks; older bundles must never run with bf16 storage (everything would be bf16).
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np

from ..errors import ConvertError
from ..runtime.manifest_parts import CodecDecoderPart, ConvState
from ..runtime.ncnn_graph import Graph, raw
from .checkpoint import Checkpoint
from .codec_decoder_layers import FEATMASK_NO_BF16, PREFIX, DecoderBuilder, cfg

GRAPH = "codec_decoder"
TABLE = "codec_decoder_codebooks"
FEATMASK_ONE_THREAD = 1 << 7  # ncnn per-layer featmask bit: run this layer on one thread
HEAVY = {"Input", "InnerProduct", "Convolution", "ConvolutionDepthWise", "Deconvolution"}


def _one_thread(g: Graph, which) -> None:
    # param 31 (the featmask) is always an int flag word; ParamValue allows arrays too
    for layer in g.layers:
        if which(layer):
            layer.params[31] = int(cast(int, layer.params.get(31, 0))) | FEATMASK_ONE_THREAD


def _fp32_except(g: Graph, bf16_layers: set[str]) -> None:
    """Featmask bit 2 on every layer (and every Split the writer adds) but the bf16 convolutions and their Casts."""
    for layer in g.layers:
        if layer.name not in bf16_layers and not (layer.type == "Cast" and layer.inputs[0] in bf16_layers):
            layer.params[31] = int(cast(int, layer.params.get(31, 0))) | FEATMASK_NO_BF16
    g.split_params = {31: FEATMASK_NO_BF16}


def _codebook_tables(ckpt: Checkpoint, dc: dict[str, Any]) -> tuple[np.ndarray, list[int], list[int]]:
    """Dequantised rows of all groups, each multiplied by its split's output projection (exact: linear)."""
    nq = int(cfg(dc, "num_quantizers"))
    n_sem = int(dc.get("num_semantic_quantizers", 1) or 1)
    if n_sem != 1:
        raise ConvertError(f"decoder has {n_sem} semantic quantizers; only 1 is supported (as upstream)")
    parts = []
    sizes = []
    for g in range(nq):
        split, level = ("rvq_first", g) if g < n_sem else ("rvq_rest", g - n_sem)
        base = f"{PREFIX}quantizer.{split}"
        cb = f"{base}.vq.layers.{level}._codebook"
        emb_sum = ckpt.speech.get(cb + ".embedding_sum")
        usage = ckpt.speech.get(cb + ".cluster_usage")
        emb = emb_sum / np.maximum(usage, np.float32(1e-5))[:, None]  # fp32, as EuclideanCodebook.decode
        proj = ckpt.speech.get(base + ".output_proj.weight")  # (out, dim, 1) 1x1 conv, no bias
        proj = proj.reshape(proj.shape[0], proj.shape[1])
        if proj.shape[1] != emb.shape[1]:
            raise ConvertError(f"decoder codebook {g}: width {emb.shape[1]} does not match its projection")
        parts.append((emb.astype(np.float64) @ proj.astype(np.float64).T).astype(np.float32))
        sizes.append(int(emb.shape[0]))
    offsets = [int(x) for x in np.concatenate([[0], np.cumsum(sizes)[:-1]])]
    return np.concatenate(parts, axis=0), sizes, offsets


def build_graph(ckpt: Checkpoint, fp16: bool, sizes: list[int], offsets: list[int]) -> tuple[Graph, CodecDecoderPart]:
    """The decoder's graph and its manifest part (sizes, offsets: the codebooks' in the table)."""
    dc = ckpt.speech_config.get("decoder_config")
    if not isinstance(dc, dict):
        raise ConvertError("speech_tokenizer/config.json has no decoder_config")
    if str(dc.get("hidden_act", "silu")) != "silu":
        raise ConvertError(f"decoder hidden_act {dc.get('hidden_act')!r} is not supported (expected silu)")
    rs = dc.get("rope_scaling")
    if isinstance(rs, dict) and rs.get("rope_type", rs.get("type", "default")) != "default":
        raise ConvertError("decoder rope_scaling is not supported")

    b = DecoderBuilder(ckpt, fp16)
    b.hidden = int(cfg(dc, "hidden_size"))
    b.heads = int(cfg(dc, "num_attention_heads"))
    b.kv_heads = int(dc.get("num_key_value_heads") or b.heads)
    b.head_dim = int(dc.get("head_dim") or b.hidden // b.heads)
    n_layers = int(cfg(dc, "num_hidden_layers"))
    window = dc.get("sliding_window")
    upsampling_ratios = [int(r) for r in cfg(dc, "upsampling_ratios")]
    upsample_rates = [int(r) for r in cfg(dc, "upsample_rates")]
    b._strides = {f"upsample.{i}.0.conv": r for i, r in enumerate(upsampling_ratios)}
    b._strides.update({f"decoder.{i + 1}.block.1.conv": r for i, r in enumerate(upsample_rates)})
    # P = rows of past keys a block needs: window-1 (sliding) or a whole official chunk (no window).
    b.past = max(1, int(window) - 1) if window else 325

    g = b.g
    x = g.input("latent")  # (c=codebook_dim, h=1, w=T)
    cos = g.input("cos")  # (w=head_dim/2, h=T)
    sin = g.input("sin")
    mask = g.input("mask")  # (w=P+T, h=T) additive

    x = b.causal_conv(x, "pre_conv.conv")
    latent_dim = int(cfg(dc, "latent_dim"))
    x = b.to_rows(x, latent_dim)  # (w=latent, h=T)
    x = b.linear(x, b.w("pre_transformer.input_proj.weight"), b.w("pre_transformer.input_proj.bias"))
    for layer in range(n_layers):
        x = b.attention_layer(x, layer, dc, cos, sin, mask)
    x = g.layer("RMSNorm", [x], params={0: b.hidden, 1: float(cfg(dc, "rms_norm_eps")), 2: 1},
                weights=[raw(b.w("pre_transformer.norm.weight"))])
    x = b.linear(x, b.w("pre_transformer.output_proj.weight"), b.w("pre_transformer.output_proj.bias"))
    x = b.to_channels(x, latent_dim)

    b.role = "upsampler"
    for i in range(len(upsampling_ratios)):
        x = b.causal_trans_conv(x, f"upsample.{i}.0.conv")
        x = b.convnext(x, f"upsample.{i}.1")

    # Up to here (transformer and upsamplers: at most 4 rows per frame) every layer but the matrix products is
    # small: one thread each, as are the state tails everywhere; a parallel region per layer (an OpenMP wake-up
    # each with passive waiting) costs more than such work, most of all when a push holds one frame.
    _one_thread(g, lambda layer: layer.type not in HEAVY)
    b.role = "vocoder_in"  # little arithmetic (4 columns per frame) and early: every later layer amplifies its error
    x = b.causal_conv(x, "decoder.0.conv")
    b.role = "vocoder"
    for i in range(len(upsample_rates)):
        p = f"decoder.{i + 1}.block"
        x = b.snake(x, f"{p}.0")
        x = b.causal_trans_conv(x, f"{p}.1.conv")
        for j, dilation in enumerate((1, 3, 9)):
            u = f"{p}.{j + 2}"
            y = b.snake(x, f"{u}.act1")
            # conv1 feeds only act2: its outputs carry act2's 2a, and conv2's inputs undo it.
            two_a = 2 * b.snake_params(f"{u}.act2")[0]
            y = b.causal_conv(y, f"{u}.conv1.conv", dilation=dilation, out_scale=two_a)
            y = b.snake_prescaled(y, f"{u}.act2")
            y = b.causal_conv(y, f"{u}.conv2.conv", in_scale=1.0 / two_a)
            x = b.add(y, x)
    last = len(upsample_rates) + 1
    x = b.snake(x, f"decoder.{last}")
    b.role = "vocoder_out"  # one output channel: next to no arithmetic, and in bf16 it would round the audio itself
    x = b.causal_conv(x, f"decoder.{last + 1}.conv")
    x = g.layer("Clip", [x], params={0: -1.0, 1: 1.0})
    g.layer("Reshape", [x], params={0: -1}, name="wav")
    g.output("wav")

    _one_thread(g, lambda layer: layer.type == "Crop")
    _fp32_except(g, b.bf16_layers)
    upsample = int(np.prod(upsampling_ratios + upsample_rates))
    part = CodecDecoderPart(
        graph=GRAPH, table=TABLE, num_quantizers=int(cfg(dc, "num_quantizers")),
        codebook_dim=int(cfg(dc, "codebook_dim")), layers=n_layers, heads=b.heads, kv_heads=b.kv_heads,
        head_dim=b.head_dim, rope_theta=float(cfg(dc, "rope_theta")),
        sliding_window=int(window) if window else None, past=b.past, upsample=upsample,
        states=tuple(ConvState(s["name"], s["channels"], s["width"]) for s in b.states),
        outputs=(*b.outputs, "wav"),
        bf16_layers=True,  # the graph carries the per-layer marks that make bf16 storage safe to turn on
        codebook_sizes=tuple(sizes), codebook_offsets=tuple(offsets),
    )
    return g, part


def convert(ckpt: Checkpoint, writer, options) -> None:
    dc: dict[str, Any] = ckpt.speech_config.get("decoder_config") or {}
    options.report(0.0, "codebooks")
    table, sizes, offsets = _codebook_tables(ckpt, dc)
    width = int(table.shape[1])
    if int(dc.get("codebook_dim", width)) != width:
        raise ConvertError("decoder codebook_dim does not match the output projection width")
    # fp16 bundles store the table in fp16 when it fits (rows are widened to fp32 when read).
    if options.precision == "fp16" and np.abs(table).max() < 60000:
        table = table.astype(np.float16)
    writer.add_table(TABLE, table)
    options.report(0.2, "network")
    graph, part = build_graph(ckpt, options.precision == "fp16", sizes, offsets)
    options.report(0.7, "writing")
    writer.add_graph(GRAPH, graph)
    writer.write_record(part)
    options.report(1.0, "done")
