"""Speaker encoder (ECAPA-TDNN variant, Base models only) -> one ncnn graph `speaker_encoder`.

Graph: input `mel` (w=frames, h=mel_dim) -> output `xvector` (enc_dim,). Any number of frames (no fixed window).
Blobs are (w=time, h=channels). Mirrors qwen_tts Qwen3TTSSpeakerEncoder:
  TDNN = Conv1d(padding='same', padding_mode='reflect') + ReLU -> Padding(type reflect) + Convolution1D(relu);
      kernel-1 convolutions (no padding) -> Gemm + ReLU
  SE-Res2Net block: tdnn1 1x1 -> Res2Net (static Slice of `scale` equal chunks; chunk 0 passes, chunk i>1 gets the
      previous output added) -> tdnn2 1x1 -> SE (time mean, two InnerProducts relu/sigmoid, Scale) -> + input
  MFA: concat of SE-Res2Net outputs -> TDNN
  Attentive statistics pooling: the first TDNN over cat[x, mean, std] is split into a 1x1 conv on x plus a
      per-channel bias InnerProduct(cat[mean, std]) (the same sums, without materialising the broadcast);
      std = sqrt(max(var, 1e-12)); softmax over time; weighted mean/std (same clamp)
  fc: InnerProduct(2C -> enc_dim).
Sizes come from config.json `speaker_encoder_config`; missing keys take Qwen3TTSSpeakerEncoderConfig's defaults.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ConvertError
from ..runtime.manifest_parts import SpeakerPart
from ..runtime.ncnn_graph import Graph, raw, tagged
from .checkpoint import Checkpoint

GRAPH = "speaker_encoder"
PREFIX = "speaker_encoder."
INPUT = "mel"
OUTPUT = "xvector"
STD_EPS = 1e-12
FP16_MAX = 65504.0

# Qwen3TTSSpeakerEncoderConfig.__init__ defaults (configuration_qwen3_tts.py).
DEFAULTS: dict[str, Any] = {
    "mel_dim": 128,
    "enc_dim": 1024,
    "enc_channels": [512, 512, 512, 512, 1536],
    "enc_kernel_sizes": [5, 3, 3, 3, 1],
    "enc_dilations": [1, 2, 3, 4, 1],
    "enc_attention_channels": 128,
    "enc_res2net_scale": 8,
    "enc_se_channels": 128,
    "sample_rate": 24000,
}

# ncnn constants
_RELU, _SIGMOID = 1, 4
_PAD_REFLECT = 2
_OP_ADD, _OP_SUB, _OP_MUL, _OP_MAX = 0, 1, 2, 4
_RED_SUM, _RED_MEAN = 0, 3
_UN_SQUARE, _UN_SQRT = 4, 5


@dataclass(frozen=True)
class SpeakerSpec:
    mel_dim: int
    enc_dim: int
    channels: tuple[int, ...]
    kernels: tuple[int, ...]
    dilations: tuple[int, ...]
    attention: int
    scale: int
    se: int
    sample_rate: int

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> SpeakerSpec:
        raw_cfg = config.get("speaker_encoder_config") or {}
        cfg = {k: (raw_cfg[k] if raw_cfg.get(k) is not None else v) for k, v in DEFAULTS.items()}
        try:
            spec = cls(
                mel_dim=int(cfg["mel_dim"]),
                enc_dim=int(cfg["enc_dim"]),
                channels=tuple(int(c) for c in cfg["enc_channels"]),
                kernels=tuple(int(k) for k in cfg["enc_kernel_sizes"]),
                dilations=tuple(int(d) for d in cfg["enc_dilations"]),
                attention=int(cfg["enc_attention_channels"]),
                scale=int(cfg["enc_res2net_scale"]),
                se=int(cfg["enc_se_channels"]),
                sample_rate=int(cfg["sample_rate"]),
            )
        except (TypeError, ValueError) as e:
            raise ConvertError(f"config.json: speaker_encoder_config has a bad value: {e}") from None
        n = len(spec.channels)
        if n < 2 or len(spec.kernels) != n or len(spec.dilations) != n:
            raise ConvertError("config.json: speaker_encoder_config enc_channels, enc_kernel_sizes and enc_dilations "
                               "must have the same length (at least 2)")
        if spec.mel_dim != 128 or spec.sample_rate != 24000:
            raise ConvertError(f"config.json: speaker encoder expects {spec.mel_dim} mels at {spec.sample_rate} Hz; "
                               "only 128 mels at 24000 Hz (the official front end) are supported")
        for c in spec.channels[1:-1]:
            if spec.scale < 1 or c % spec.scale:
                raise ConvertError(f"config.json: speaker encoder channels {c} not divisible by res2net scale {spec.scale}")
        return spec

    @property
    def max_pad(self) -> int:
        """Largest one-sided reflect padding; reflect needs more frames than this."""
        return max(d * (k - 1) - d * (k - 1) // 2 for k, d in zip(self.kernels, self.dilations, strict=True))


def has_speaker_encoder(ckpt: Checkpoint) -> bool:
    return any(k.startswith(PREFIX) for k in ckpt.main.keys())


class _Builder:
    def __init__(self, ckpt: Checkpoint, fp16: bool):
        self.g = Graph()
        self.main = ckpt.main
        self.fp16 = fp16

    def w(self, name: str, shape: tuple[int, ...]) -> np.ndarray:
        full = PREFIX + name
        if full not in self.main:
            raise ConvertError(f"model.safetensors has no tensor {full}; the speaker encoder is incomplete")
        arr = self.main.get(full)
        if tuple(arr.shape) != tuple(shape):
            raise ConvertError(f"model.safetensors: {full} has shape {tuple(arr.shape)}, config says {tuple(shape)}")
        if not np.isfinite(arr).all():
            raise ConvertError(f"model.safetensors: {full} contains NaN or infinity")
        if self.fp16 and np.abs(arr).max(initial=0.0) > FP16_MAX:
            raise ConvertError(f"{full} has values beyond the fp16 range; convert with --precision fp32 or bf16")
        return arr

    def tw(self, arr: np.ndarray):
        return tagged(arr, fp16=self.fp16)

    def conv(self, x: str, prefix: str, cin: int, cout: int, k: int, d: int, relu: bool, bias: bool = True) -> str:
        """Conv1d(padding='same', reflect) [+ ReLU]; torch puts the odd extra pad on the right."""
        total = d * (k - 1)
        left = total // 2
        if total:
            x = self.g.layer("Padding", [x], params={2: left, 3: total - left, 4: _PAD_REFLECT})
        weight = self.w(prefix + ".weight", (cout, cin, k))
        if k == 1:
            b = self.w(prefix + ".bias", (cout,)) if bias else None
            return self.pointwise(x, weight[:, :, 0], b, relu)
        ws = [self.tw(weight)]
        if bias:
            ws.append(raw(self.w(prefix + ".bias", (cout,))))
        params = {0: cout, 1: k, 2: d, 3: 1, 4: 0, 15: 0, 5: int(bias), 6: int(weight.size)}
        if relu:
            params[9] = _RELU
        return self.g.layer("Convolution1D", [x], params=params, weights=ws)

    def pointwise(self, x: str, weight: np.ndarray, bias: np.ndarray | None, relu: bool) -> str:
        """Kernel-1 Conv1d as Gemm: weight (cout, cin) @ x (h=cin, w=T) + bias per row. ncnn's tiled Gemm runs
        these 2-6x faster than Convolution1D at the widths and lengths here (the 1536-wide MFA dominates)."""
        cout, cin = weight.shape
        b = np.zeros(cout, np.float32) if bias is None else bias
        y = self.g.layer("Gemm", [x], params={0: 1.0, 1: 1.0, 2: 0, 3: 0, 4: 1, 5: 0, 6: 1, 7: cout, 8: 0, 9: cin, 10: 1},
                         weights=[self.tw(np.ascontiguousarray(weight)), tagged(b)])
        return self.g.layer("ReLU", [y]) if relu else y

    def linear(self, x: str, weight: np.ndarray, bias: np.ndarray, act: int = 0) -> str:
        params = {0: int(weight.shape[0]), 1: 1, 2: int(weight.size)}
        if act:
            params[9] = act
        return self.g.layer("InnerProduct", [x], params=params, weights=[self.tw(weight), raw(bias)])

    def time_reduce(self, x: str, op: int, keepdims: bool) -> str:
        """Sum/mean over w (time) of a (w, h) blob -> (1, h) with keepdims, else (h,)."""
        return self.g.layer("Reduction", [x], params={0: op, 1: 0, 3: [1], 4: int(keepdims), 5: 1})

    def binary(self, a: str, b: str, op: int) -> str:
        return self.g.layer("BinaryOp", [a, b], params={0: op})

    def std(self, sq_sum: str) -> str:
        clamped = self.g.layer("BinaryOp", [sq_sum], params={0: _OP_MAX, 1: 1, 2: STD_EPS})
        return self.g.layer("UnaryOp", [clamped], params={0: _UN_SQRT})

    def se_res2net(self, x: str, i: int, spec: SpeakerSpec) -> str:
        p = f"blocks.{i}"
        cin, c = spec.channels[i - 1], spec.channels[i]
        if cin != c:
            raise ConvertError(f"speaker encoder block {i}: residual needs equal channels, got {cin} -> {c}")
        h = self.conv(x, f"{p}.tdnn1.conv", cin, c, 1, 1, relu=True)
        s = spec.scale
        if s > 1:
            chunk = c // s
            parts = self.g.layer("Slice", [h], outputs=s, params={0: [chunk] * s, 1: 0})
            outs = [parts[0]]
            prev = None
            for j in range(1, s):
                inp = parts[j] if prev is None else self.binary(parts[j], prev, _OP_ADD)
                prev = self.conv(inp, f"{p}.res2net_block.blocks.{j - 1}.conv", chunk, chunk,
                                 spec.kernels[i], spec.dilations[i], relu=True)
                outs.append(prev)
            h = self.g.layer("Concat", outs, params={0: 0})
        h = self.conv(h, f"{p}.tdnn2.conv", c, c, 1, 1, relu=True)
        # squeeze-excitation: kernel-1 convs on the time mean are plain Linear layers
        m = self.time_reduce(h, _RED_MEAN, keepdims=False)
        w1 = self.w(f"{p}.se_block.conv1.weight", (spec.se, c, 1))[:, :, 0]
        m = self.linear(m, w1, self.w(f"{p}.se_block.conv1.bias", (spec.se,)), act=_RELU)
        w2 = self.w(f"{p}.se_block.conv2.weight", (c, spec.se, 1))[:, :, 0]
        m = self.linear(m, w2, self.w(f"{p}.se_block.conv2.bias", (c,)), act=_SIGMOID)
        h = self.g.layer("Scale", [h, m], params={0: -233, 1: 0})
        return self.binary(h, x, _OP_ADD)

    def pooling(self, x: str, spec: SpeakerSpec) -> str:
        c, a = spec.channels[-1], spec.attention
        g = self.g
        # global statistics (uniform weights)
        mu = self.time_reduce(x, _RED_MEAN, keepdims=True)
        dev = g.layer("UnaryOp", [self.binary(x, mu, _OP_SUB)], params={0: _UN_SQUARE})
        sd = self.std(self.time_reduce(dev, _RED_MEAN, keepdims=False))
        mu1 = g.layer("Reshape", [mu], params={0: c})
        stats = g.layer("Concat", [mu1, sd], params={0: 0})
        w = self.w("asp.tdnn.conv.weight", (a, 3 * c, 1))[:, :, 0]
        b = self.w("asp.tdnn.conv.bias", (a,))
        per_channel = self.linear(stats, np.ascontiguousarray(w[:, c:]), b)
        per_channel = g.layer("Reshape", [per_channel], params={0: 1, 1: a})
        att = self.pointwise(x, w[:, :c], None, relu=False)
        att = g.layer("ReLU", [self.binary(att, per_channel, _OP_ADD)])
        att = g.layer("TanH", [att])
        att = self.conv(att, "asp.conv", a, c, 1, 1, relu=False)
        att = g.layer("Softmax", [att], params={0: 1, 1: 1})  # over time
        # attention-weighted statistics
        mean = self.time_reduce(self.binary(att, x, _OP_MUL), _RED_SUM, keepdims=True)
        dev = g.layer("UnaryOp", [self.binary(x, mean, _OP_SUB)], params={0: _UN_SQUARE})
        sd = self.std(self.time_reduce(self.binary(att, dev, _OP_MUL), _RED_SUM, keepdims=False))
        mean1 = g.layer("Reshape", [mean], params={0: c})
        return g.layer("Concat", [mean1, sd], params={0: 0})

    def build(self, spec: SpeakerSpec) -> Graph:
        ch, ks, ds = spec.channels, spec.kernels, spec.dilations
        x = self.g.input(INPUT)
        h = self.conv(x, "blocks.0.conv", spec.mel_dim, ch[0], ks[0], ds[0], relu=True)
        feats = []
        for i in range(1, len(ch) - 1):
            h = self.se_res2net(h, i, spec)
            feats.append(h)
        cat = feats[0] if len(feats) == 1 else self.g.layer("Concat", feats, params={0: 0})
        cat_ch = sum(ch[1:-1])
        if cat_ch != ch[-1]:
            raise ConvertError(f"speaker encoder: MFA input has {cat_ch} channels, enc_channels[-1] is {ch[-1]}")
        h = self.conv(cat, "mfa.conv", ch[-1], ch[-1], ks[-1], ds[-1], relu=True)
        pooled = self.pooling(h, spec)
        fc_w = self.w("fc.weight", (spec.enc_dim, 2 * ch[-1], 1))[:, :, 0]
        out = self.g.layer("InnerProduct", [pooled],
                           params={0: spec.enc_dim, 1: 1, 2: int(fc_w.size)},
                           weights=[self.tw(np.ascontiguousarray(fc_w)), raw(self.w("fc.bias", (spec.enc_dim,)))],
                           name=OUTPUT)
        self.g.output(out)
        return self.g


def convert(ckpt: Checkpoint, writer, options) -> None:
    if not has_speaker_encoder(ckpt):
        # CustomVoice / VoiceDesign checkpoints carry no speaker encoder (tts_model_type != "base")
        writer.write_record(SpeakerPart(False, ckpt.config.get("tts_model_type")))
        options.report(1.0, "no speaker encoder in this model")
        return
    spec = SpeakerSpec.from_config(ckpt.config)
    options.report(0.0, "building graph")
    graph = _Builder(ckpt, fp16=options.precision == "fp16").build(spec)
    options.report(0.7, "writing weights")
    writer.add_graph(GRAPH, graph)
    writer.write_record(SpeakerPart(True, None, GRAPH, INPUT, OUTPUT, spec.mel_dim, spec.enc_dim, spec.sample_rate,
                                    spec.max_pad + 1, tuple(spec.channels)))
    options.report(1.0, "done")
