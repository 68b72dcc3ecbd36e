"""The speech decoder's layers as ncnn graph pieces, for engine/convert/codec_decoder.py (its docstring describes
the graph): causal convolutions that carry their left context as streaming state, transposed convolutions,
SnakeBeta, the sliding-window attention layers and the ConvNeXt blocks, each marked for bf16 or kept fp32."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ConvertError
from ..runtime.ncnn_graph import Graph, raw, tagged
from .checkpoint import Checkpoint

PREFIX = "decoder."
CROP_TO_END = 1 << 30  # Crop 'ends' past the last column
FEATMASK_NO_BF16 = 1 << 2  # ncnn per-layer featmask bit: this layer ignores use_bf16_storage (stays fp32)
# Convolutions that run in bf16 when the decoder runs with bf16 storage (see the module doc; docs/performance.md, "Decoder"):
# the vocoder's convolutions but its first and last (the residual units' k7 and k1 convolutions and the
# transposed convolutions in polyphase form) hold ~85 % of the decoder's arithmetic.
BF16_ROLES = frozenset({"vocoder"})


def cfg(dc: dict[str, Any], key: str) -> Any:
    if key not in dc or dc[key] is None:
        raise ConvertError(f"speech_tokenizer/config.json decoder_config has no '{key}'")
    return dc[key]


class DecoderBuilder:
    """Adds decoder pieces to a Graph; tracks the streaming state blobs it creates."""

    # the transformer's shape and the upsampling strides, set from the config before the first layer is added
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    past: int
    _strides: dict[str, int]

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
        eps = float(cfg(dc, "rms_norm_eps"))
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
