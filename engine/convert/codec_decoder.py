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

from typing import Any

import numpy as np

from ..errors import ConvertError
from ..runtime.ncnn_graph import Graph, raw, tagged
from .checkpoint import Checkpoint

GRAPH = "codec_decoder"
TABLE = "codec_decoder_codebooks"
PREFIX = "decoder."
CROP_TO_END = 1 << 30  # Crop 'ends' past the last column
FEATMASK_ONE_THREAD = 1 << 7  # ncnn per-layer featmask bit: run this layer on one thread
FEATMASK_NO_BF16 = 1 << 2  # ncnn per-layer featmask bit: this layer ignores use_bf16_storage (stays fp32)
# Convolutions that run in bf16 when the decoder runs with bf16 storage (see the module doc; docs/performance.md, "Decoder"):
# the vocoder's convolutions but its first and last (the residual units' k7 and k1 convolutions and the
# transposed convolutions in polyphase form) hold ~85 % of the decoder's arithmetic.
BF16_ROLES = frozenset({"vocoder"})
HEAVY = {"Input", "InnerProduct", "Convolution", "ConvolutionDepthWise", "Deconvolution"}


def _cfg(dc: dict[str, Any], key: str) -> Any:
    if key not in dc or dc[key] is None:
        raise ConvertError(f"speech_tokenizer/config.json decoder_config has no '{key}'")
    return dc[key]


class _Builder:
    """Adds decoder pieces to a Graph; tracks the streaming state blobs it creates."""

    def __init__(self, ckpt: Checkpoint, fp16: bool):
        self.g = Graph()
        self.st = ckpt.speech
        self.fp16 = fp16
        self.states: list[dict[str, Any]] = []
        self.bf16_layers: set[str] = set()  # layers allowed to run in bf16 (all others get FEATMASK_NO_BF16)
        self.role = "pre_conv"  # which part of the decoder is being built (matched against BF16_ROLES)
        self.outputs: list[str] = []  # state outputs in graph order (the runtime extracts in this order)

    def w(self, name: str) -> np.ndarray:
        return self.st.get(PREFIX + name)

    def has(self, name: str) -> bool:
        return PREFIX + name in self.st

    def tw(self, arr: np.ndarray):
        return tagged(arr, fp16=self.fp16)

    def conv_out(self, name: str) -> str:
        """A convolution's output: in a bf16 role the layer may run in bf16 and an identity Cast (no bf16 support,
        so ncnn casts its input to fp32) hands fp32 to the layers after it."""
        if self.role not in BF16_ROLES:
            return name
        self.bf16_layers.add(name)
        return self.g.layer("Cast", [name], params={0: 1, 1: 1}, name=f"{name}_fp32")

    # -- time axis tools ------------------------------------------------------------------------------
    # Convolution blobs are 3-D (c=channels, h=1, w=time): ncnn's 2-D Convolution/Deconvolution kernels are
    # several times faster than its 1-D ones (measured: k7 conv 3x, transposed conv 12x).

    def _with_state(self, x: str, channels: int, width: int) -> str:
        """Prepend the previous `width` input columns (a graph input) and export the new tail."""
        i = len(self.states)
        name = f"state{i}"
        self.states.append({"name": name, "channels": int(channels), "width": int(width)})
        s_in = self.g.input(name)  # (c=channels, h=1, w=width)
        cat = self.g.layer("Concat", [s_in, x], params={0: 2})
        tail = self.g.layer("Crop", [cat], params={9: [-width], 10: [CROP_TO_END], 11: [2]}, name=f"{name}_out")
        self.g.output(tail)
        self.outputs.append(tail)
        return cat

    def causal_conv(self, x: str, prefix: str, dilation: int = 1, depthwise: bool = False,
                    out_scale: np.ndarray | None = None, in_scale: np.ndarray | None = None) -> str:
        """Qwen3TTSTokenizerV2CausalConvNet (stride 1): left zero padding (k-1)*d == the carried state.
        out_scale multiplies each output channel, in_scale each input channel (folded into the weights)."""
        weight = self.w(prefix + ".weight")
        bias = self.w(prefix + ".bias")
        if out_scale is not None:
            weight = (weight * out_scale[:, None, None].astype(np.float64)).astype(np.float32)
            bias = (bias * out_scale.astype(np.float64)).astype(np.float32)
        if in_scale is not None:
            weight = (weight * in_scale[None, :, None].astype(np.float64)).astype(np.float32)
        cout, cin_g, k = weight.shape
        cin = cout if depthwise else cin_g
        ctx = (k - 1) * dilation
        if ctx > 0:
            x = self._with_state(x, cin, ctx)
        params = {0: cout, 1: k, 11: 1, 2: dilation, 12: 1, 3: 1, 13: 1, 5: 1, 6: int(weight.size)}
        if depthwise:
            params[7] = cout
            # ncnn's x86 depthwise convolution has no bf16 kernel: it stays fp32 (and is small)
            return self.g.layer("ConvolutionDepthWise", [x], params=params, weights=[self.tw(weight), raw(bias)])
        return self.conv_out(self.g.layer("Convolution", [x], params=params, weights=[self.tw(weight), raw(bias)]))

    def pointwise(self, x: str, weight: np.ndarray, bias: np.ndarray) -> str:
        """A Linear over channels as a 1x1 convolution (faster than InnerProduct on many rows)."""
        params = {0: int(weight.shape[0]), 1: 1, 5: 1, 6: int(weight.size)}
        return self.conv_out(self.g.layer("Convolution", [x], params=params, weights=[self.tw(weight), raw(bias)]))

    def causal_trans_conv(self, x: str, prefix: str) -> str:
        """ConvTranspose1d (stride s, kernel k) then drop the last k-s outputs, written as s interleaved ordinary
        convolutions (polyphase): output m*s+p = sum_j x[m-j] w[p+j*s] over the J = ceil(k/s) taps j. One
        Convolution of kernel J with s*out channels (out channel o, phase p at o*s+p), then a per-channel
        transpose interleaves the phases. The same products as ncnn's Deconvolution, about 2x faster as single fp32
        layers at the decoder's shapes (level in the whole decoder), and with a fast bf16 kernel (ncnn's bf16
        Deconvolution is slower than its fp32 one).
        The J-1 earlier inputs that reach a block's outputs come from state."""
        weight = self.w(prefix + ".weight")  # torch layout (in, out, k)
        bias = self.w(prefix + ".bias")
        cin, cout, k = weight.shape
        stride = self._strides[prefix]
        taps = -(-k // stride)
        ctx = taps - 1  # earlier input frames that reach this block's outputs
        if ctx > 0:
            x = self._with_state(x, cin, ctx)
        w_poly = np.zeros((cout, stride, cin, taps), np.float32)
        for p in range(stride):
            for j in range(taps):
                if p + j * stride < k:  # taps past the kernel stay zero (exact)
                    w_poly[:, p, :, taps - 1 - j] = weight[:, :, p + j * stride].T
        w_poly = w_poly.reshape(cout * stride, cin, taps)
        params = {0: cout * stride, 1: taps, 11: 1, 5: 1, 6: int(w_poly.size)}
        y = self.conv_out(self.g.layer("Convolution", [x], params=params,
                                       weights=[self.tw(w_poly), raw(np.repeat(bias, stride))]))
        y = self.g.layer("Reshape", [y], params={0: -1, 1: stride, 2: cout})  # (c=out, h=s, w=T)
        y = self.g.layer("Permute", [y], params={0: 1})  # (c=out, h=T, w=s)
        return self.g.layer("Reshape", [y], params={0: -1, 1: 1, 2: cout})  # (c=out, h=1, w=T*s)

    def snake_params(self, prefix: str) -> tuple[np.ndarray, np.ndarray]:
        """SnakeBeta's exp(alpha) and 1/(exp(beta)+1e-9), in float64."""
        alpha = np.exp(self.w(prefix + ".alpha").astype(np.float64))
        inv_beta = 1.0 / (np.exp(self.w(prefix + ".beta").astype(np.float64)) + 1e-9)
        return alpha, inv_beta

    def snake(self, x: str, prefix: str) -> str:
        """SnakeBeta: x + b*sin(a*x)^2 written as x + b/2 - b/2*cos(2a*x): four passes over the data, not five
        (sin^2 = (1-cos 2z)/2; Scale's bias carries the constant). a = exp(alpha), b = 1/(exp(beta)+1e-9)."""
        alpha, inv_beta = self.snake_params(prefix)
        c = alpha.shape[0]
        a = self.g.layer("Scale", [x], params={0: c, 1: 0}, weights=[raw(2 * alpha)])
        a = self.g.layer("UnaryOp", [a], params={0: 10})  # cos
        a = self.g.layer("Scale", [a], params={0: c, 1: 1}, weights=[raw(-inv_beta / 2), raw(inv_beta / 2)])
        return self.g.layer("BinaryOp", [x, a], params={0: 0})

    def snake_prescaled(self, w: str, prefix: str) -> str:
        """SnakeBeta of x given w = 2a*x (the producer's weights carry 2a); returns 2a*snake(x) = w + a*b -
        a*b*cos(w), so the consumer divides its input channels by 2a. Three passes instead of five."""
        alpha, inv_beta = self.snake_params(prefix)
        ab = alpha * inv_beta
        a = self.g.layer("UnaryOp", [w], params={0: 10})  # cos
        a = self.g.layer("Scale", [a], params={0: ab.shape[0], 1: 1}, weights=[raw(-ab), raw(ab)])
        return self.g.layer("BinaryOp", [w, a], params={0: 0})

    def linear(self, x: str, weight: np.ndarray, bias: np.ndarray | None = None) -> str:
        """InnerProduct on (w=in, h=rows)."""
        params = {0: int(weight.shape[0]), 1: int(bias is not None), 2: int(weight.size)}
        ws = [self.tw(weight)] + ([raw(bias)] if bias is not None else [])
        return self.g.layer("InnerProduct", [x], params=params, weights=ws)

    def to_rows(self, x: str, channels: int) -> str:
        """(c=C, h=1, w=T) -> (w=C, h=T)."""
        x = self.g.layer("Reshape", [x], params={0: -1, 1: channels})
        return self.g.layer("Permute", [x], params={0: 1})

    def to_channels(self, x: str, channels: int) -> str:
        """(w=C, h=T) -> (c=C, h=1, w=T)."""
        x = self.g.layer("Permute", [x], params={0: 1})
        return self.g.layer("Reshape", [x], params={0: -1, 1: 1, 2: channels})

    def add(self, a: str, b: str) -> str:
        return self.g.layer("BinaryOp", [a, b], params={0: 0})

    # -- modules ---------------------------------------------------------------------------------

    def attention_layer(self, x: str, layer: int, dc: dict[str, Any], cos: str, sin: str, mask: str) -> str:
        """Pre-norm attention + SwiGLU with LayerScale folded into o_proj / down_proj. x: (w=hidden, h=T)."""
        p = f"pre_transformer.layers.{layer}."
        heads, kv_heads, hd = self.heads, self.kv_heads, self.head_dim
        eps = float(_cfg(dc, "rms_norm_eps"))
        hidden = self.hidden

        def proj_bias(name: str) -> np.ndarray | None:
            return self.w(p + name + ".bias") if self.has(p + name + ".bias") else None

        h = self.g.layer("RMSNorm", [x], params={0: hidden, 1: eps, 2: 1},
                         weights=[raw(self.w(p + "input_layernorm.weight"))])

        def heads_of(name: str, n: int, rope: bool) -> str:
            y = self.linear(h, self.w(p + f"self_attn.{name}.weight"), proj_bias(f"self_attn.{name}"))
            y = self.g.layer("Reshape", [y], params={0: hd, 1: n, 2: -1})  # (w=hd, h=n, c=T)
            y = self.g.layer("Permute", [y], params={0: 2})  # (w=hd, h=T, c=n)
            if rope:
                y = self.g.layer("RotaryEmbed", [y, cos, sin], params={0: 0})
            return y

        q = heads_of("q_proj", heads, True)
        k = heads_of("k_proj", kv_heads, True)
        v = heads_of("v_proj", kv_heads, False)
        kv = []
        for tag, cur in (("k", k), ("v", v)):
            past = self.g.input(f"{tag}{layer}")
            cat = self.g.layer("Concat", [past, cur], params={0: 1})  # along T
            tail = self.g.layer("Crop", [cat], params={9: [-self.past], 10: [CROP_TO_END], 11: [1]},
                                name=f"{tag}{layer}_out")
            self.g.output(tail)
            self.outputs.append(tail)
            kv.append(cat)
        att = self.g.layer("SDPA", [q, kv[0], kv[1], mask], params={5: 1, 6: float(hd) ** -0.5})
        att = self.g.layer("Permute", [att], params={0: 2})  # (w=hd, h=heads, c=T)
        att = self.g.layer("Reshape", [att], params={0: heads * hd, 1: -1})
        scale = self.w(p + "self_attn_layer_scale.scale")
        o_w = self.w(p + "self_attn.o_proj.weight") * scale[:, None]
        o_b = proj_bias("self_attn.o_proj")
        att = self.linear(att, o_w, None if o_b is None else o_b * scale)
        x = self.add(x, att)

        h = self.g.layer("RMSNorm", [x], params={0: hidden, 1: eps, 2: 1},
                         weights=[raw(self.w(p + "post_attention_layernorm.weight"))])
        gate = self.linear(h, self.w(p + "mlp.gate_proj.weight"))
        gate = self.g.layer("Swish", [gate])
        up = self.linear(h, self.w(p + "mlp.up_proj.weight"))
        m = self.g.layer("BinaryOp", [gate, up], params={0: 2})
        d_w = self.w(p + "mlp.down_proj.weight") * self.w(p + "mlp_layer_scale.scale")[:, None]
        m = self.linear(m, d_w)
        return self.add(x, m)

    def convnext(self, x: str, prefix: str) -> str:
        """dwconv k7 (causal) -> LayerNorm(1e-6) -> Linear 4C -> GELU(erf) -> Linear (gamma folded) -> + x."""
        y = self.causal_conv(x, prefix + ".dwconv.conv", depthwise=True)
        c = self.w(prefix + ".norm.weight").shape[0]
        y = self.to_rows(y, c)  # LayerNorm normalises along w
        y = self.g.layer("LayerNorm", [y], params={0: c, 1: 1e-6, 2: 1},
                         weights=[raw(self.w(prefix + ".norm.weight")), raw(self.w(prefix + ".norm.bias"))])
        y = self.to_channels(y, c)
        y = self.pointwise(y, self.w(prefix + ".pwconv1.weight"), self.w(prefix + ".pwconv1.bias"))
        y = self.g.layer("GELU", [y], params={0: 0})
        gamma = self.w(prefix + ".gamma")
        y = self.pointwise(y, self.w(prefix + ".pwconv2.weight") * gamma[:, None],
                           self.w(prefix + ".pwconv2.bias") * gamma)
        return self.add(x, y)


def _one_thread(g: Graph, which) -> None:
    for layer in g.layers:
        if which(layer):
            layer.params[31] = int(layer.params.get(31, 0)) | FEATMASK_ONE_THREAD


def _fp32_except(g: Graph, bf16_layers: set[str]) -> None:
    """Featmask bit 2 on every layer (and every Split the writer adds) but the bf16 convolutions and their Casts."""
    for layer in g.layers:
        if layer.name not in bf16_layers and not (layer.type == "Cast" and layer.inputs[0] in bf16_layers):
            layer.params[31] = int(layer.params.get(31, 0)) | FEATMASK_NO_BF16
    g.split_params = {31: FEATMASK_NO_BF16}


def _codebook_tables(ckpt: Checkpoint, dc: dict[str, Any]) -> tuple[np.ndarray, list[int], list[int]]:
    """Dequantised rows of all groups, each multiplied by its split's output projection (exact: linear)."""
    nq = int(_cfg(dc, "num_quantizers"))
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


def build_graph(ckpt: Checkpoint, fp16: bool) -> tuple[Graph, dict[str, Any]]:
    dc = ckpt.speech_config.get("decoder_config")
    if not isinstance(dc, dict):
        raise ConvertError("speech_tokenizer/config.json has no decoder_config")
    if str(dc.get("hidden_act", "silu")) != "silu":
        raise ConvertError(f"decoder hidden_act {dc.get('hidden_act')!r} is not supported (expected silu)")
    rs = dc.get("rope_scaling")
    if isinstance(rs, dict) and rs.get("rope_type", rs.get("type", "default")) != "default":
        raise ConvertError("decoder rope_scaling is not supported")

    b = _Builder(ckpt, fp16)
    b.hidden = int(_cfg(dc, "hidden_size"))
    b.heads = int(_cfg(dc, "num_attention_heads"))
    b.kv_heads = int(dc.get("num_key_value_heads") or b.heads)
    b.head_dim = int(dc.get("head_dim") or b.hidden // b.heads)
    n_layers = int(_cfg(dc, "num_hidden_layers"))
    window = dc.get("sliding_window")
    upsampling_ratios = [int(r) for r in _cfg(dc, "upsampling_ratios")]
    upsample_rates = [int(r) for r in _cfg(dc, "upsample_rates")]
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
    latent_dim = int(_cfg(dc, "latent_dim"))
    x = b.to_rows(x, latent_dim)  # (w=latent, h=T)
    x = b.linear(x, b.w("pre_transformer.input_proj.weight"), b.w("pre_transformer.input_proj.bias"))
    for layer in range(n_layers):
        x = b.attention_layer(x, layer, dc, cos, sin, mask)
    x = g.layer("RMSNorm", [x], params={0: b.hidden, 1: float(_cfg(dc, "rms_norm_eps")), 2: 1},
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
    meta = {
        "graph": GRAPH,
        "table": TABLE,
        "num_quantizers": int(_cfg(dc, "num_quantizers")),
        "codebook_dim": int(_cfg(dc, "codebook_dim")),
        "layers": n_layers,
        "heads": b.heads,
        "kv_heads": b.kv_heads,
        "head_dim": b.head_dim,
        "rope_theta": float(_cfg(dc, "rope_theta")),
        "sliding_window": int(window) if window else None,
        "past": b.past,
        "upsample": upsample,
        "states": b.states,
        "outputs": b.outputs + ["wav"],
        "bf16_layers": True,  # the graph carries the per-layer marks that make bf16 storage safe to turn on
    }
    return g, meta


def convert(ckpt: Checkpoint, writer, options) -> None:
    dc = ckpt.speech_config.get("decoder_config") or {}
    options.report(0.0, "codebooks")
    table, sizes, offsets = _codebook_tables(ckpt, dc)
    if int(dc.get("codebook_dim", table.shape[1])) != table.shape[1]:
        raise ConvertError("decoder codebook_dim does not match the output projection width")
    # fp16 bundles store the table in fp16 when it fits (rows are widened to fp32 when read).
    if options.precision == "fp16" and np.abs(table).max() < 60000:
        table = table.astype(np.float16)
    writer.add_table(TABLE, table)
    options.report(0.2, "network")
    graph, meta = build_graph(ckpt, fp16=options.precision == "fp16")
    options.report(0.7, "writing")
    writer.add_graph(GRAPH, graph)
    meta["codebook_sizes"] = sizes
    meta["codebook_offsets"] = offsets
    writer.set_part("codec_decoder", meta)
    options.report(1.0, "done")
