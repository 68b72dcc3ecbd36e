"""Tensor layout of the speech tokenizer: the Mimi-style encoder and the codec decoder."""

from __future__ import annotations

from .presets import Preset
from .tensor_specs import TensorSpec, _b, _conv, _norm, _snake, _uni, _w


def speech_tensors(p: Preset) -> list[TensorSpec]:
    return mimi_encoder_tensors(p) + codec_decoder_tensors(p)


def mimi_encoder_tensors(p: Preset) -> list[TensorSpec]:
    t: list[TensorSpec] = []
    e = "encoder.encoder.layers"
    nf, idx, mult = p.e_filters, 0, 1
    t += _conv(f"{e}.{idx}.conv", nf, 1, 7)
    idx += 1
    for ratio in reversed([8, 6, 5, 4]):
        dim = mult * nf
        t += _conv(f"{e}.{idx}.block.1.conv", dim // 2, dim, 3)  # residual unit: ELU, conv k3, ELU, conv k1
        t += _conv(f"{e}.{idx}.block.3.conv", dim, dim // 2, 1)
        idx += 2  # the ELU after the residual unit has no weights
        t += _conv(f"{e}.{idx}.conv", dim * 2, dim, 2 * ratio)
        idx += 1
        mult *= 2
    idx += 1  # final ELU
    t += _conv(f"{e}.{idx}.conv", p.e_hidden, mult * nf, 3)
    h, hd = p.e_hidden, p.e_head_dim * p.e_heads
    for i in range(p.e_layers):
        L = f"encoder.encoder_transformer.layers.{i}"
        t += [
            _w(f"{L}.self_attn.q_proj.weight", hd, h), _w(f"{L}.self_attn.k_proj.weight", hd, h),
            _w(f"{L}.self_attn.v_proj.weight", hd, h), _w(f"{L}.self_attn.o_proj.weight", h, hd),
            _w(f"{L}.mlp.fc1.weight", p.e_inter, h), _w(f"{L}.mlp.fc2.weight", h, p.e_inter),
            _norm(f"{L}.input_layernorm.weight", h), _b(f"{L}.input_layernorm.bias", h),
            _norm(f"{L}.post_attention_layernorm.weight", h), _b(f"{L}.post_attention_layernorm.bias", h),
            _uni(f"{L}.self_attn_layer_scale.scale", h, 0.05, 0.3), _uni(f"{L}.mlp_layer_scale.scale", h, 0.05, 0.3),
        ]
    t += _conv("encoder.downsample.conv", h, h, 4, bias=False)
    for branch, n in (("semantic", 1), ("acoustic", 31)):
        q = f"encoder.quantizer.{branch}_residual_vector_quantizer"
        for i in range(n):
            cb = f"{q}.layers.{i}.codebook"
            t += [
                TensorSpec(f"{cb}.initialized", (1,), "ones"),
                TensorSpec(f"{cb}.cluster_usage", (p.codebook,), "usage"),
                TensorSpec(f"{cb}.embed_sum", (p.codebook, p.e_codebook_dim), "codesum", 1.0,
                           pair=f"{cb}.cluster_usage"),
            ]
        t += _conv(f"{q}.input_proj", p.e_codebook_dim, h, 1, bias=False)
        t += _conv(f"{q}.output_proj", h, p.e_codebook_dim, 1, bias=False)
    return t


def codec_decoder_tensors(p: Preset) -> list[TensorSpec]:
    t: list[TensorSpec] = []
    h, hd, lat = p.d_hidden, p.d_heads * p.d_head_dim, p.d_latent
    for i in range(p.d_layers):
        L = f"decoder.pre_transformer.layers.{i}"
        t += [
            _w(f"{L}.self_attn.q_proj.weight", hd, h), _w(f"{L}.self_attn.k_proj.weight", hd, h),
            _w(f"{L}.self_attn.v_proj.weight", hd, h), _w(f"{L}.self_attn.o_proj.weight", h, hd),
            _w(f"{L}.mlp.gate_proj.weight", p.d_inter, h), _w(f"{L}.mlp.up_proj.weight", p.d_inter, h),
            _w(f"{L}.mlp.down_proj.weight", h, p.d_inter),
            _norm(f"{L}.input_layernorm.weight", h), _norm(f"{L}.post_attention_layernorm.weight", h),
            _uni(f"{L}.self_attn_layer_scale.scale", h, 0.05, 0.3), _uni(f"{L}.mlp_layer_scale.scale", h, 0.05, 0.3),
        ]
    t += [
        _norm("decoder.pre_transformer.norm.weight", h),
        _w("decoder.pre_transformer.input_proj.weight", h, lat), _b("decoder.pre_transformer.input_proj.bias", h),
        _w("decoder.pre_transformer.output_proj.weight", lat, h), _b("decoder.pre_transformer.output_proj.bias", lat),
    ]
    cd, dim = p.d_codebook_dim, p.d_codebook_dim // 2
    for branch, n in (("rvq_first", 1), ("rvq_rest", 15)):
        q = f"decoder.quantizer.{branch}"
        t += _conv(f"{q}.input_proj", dim, cd, 1, bias=False)
        t += _conv(f"{q}.output_proj", cd, dim, 1, bias=False)
        for i in range(n):
            cb = f"{q}.vq.layers.{i}._codebook"
            t += [
                TensorSpec(f"{cb}.cluster_usage", (p.codebook,), "usage"),
                TensorSpec(f"{cb}.embedding_sum", (p.codebook, dim), "codesum", 1.0, pair=f"{cb}.cluster_usage"),
            ]
    t += _conv("decoder.pre_conv.conv", lat, cd, 3)
    for u in range(2):
        U = f"decoder.upsample.{u}"
        t += [_w(f"{U}.0.conv.weight", lat, lat, 2, fan_in=lat * 2 / 2), _b(f"{U}.0.conv.bias", lat)]
        t += [
            _uni(f"{U}.1.gamma", lat, 0.05, 0.3),
            _w(f"{U}.1.dwconv.conv.weight", lat, 1, 7), _b(f"{U}.1.dwconv.conv.bias", lat),
            _norm(f"{U}.1.norm.weight", lat), _b(f"{U}.1.norm.bias", lat),
            _w(f"{U}.1.pwconv1.weight", 4 * lat, lat), _b(f"{U}.1.pwconv1.bias", 4 * lat),
            _w(f"{U}.1.pwconv2.weight", lat, 4 * lat), _b(f"{U}.1.pwconv2.bias", lat),
        ]
    t += _conv("decoder.decoder.0.conv", p.d_dim, lat, 7)
    for i, rate in enumerate([8, 5, 4, 3]):
        cin, cout = p.d_dim // 2**i, p.d_dim // 2 ** (i + 1)
        B = f"decoder.decoder.{i + 1}.block"
        t += _snake(f"{B}.0", cin)
        t += [_w(f"{B}.1.conv.weight", cin, cout, 2 * rate, fan_in=cin * 2 * rate / rate), _b(f"{B}.1.conv.bias", cout)]
        for r in range(3):
            R = f"{B}.{r + 2}"
            t += _snake(f"{R}.act1", cout) + _conv(f"{R}.conv1.conv", cout, cout, 7)
            # residual branches scaled down so 12 stacked units do not blow the signal up
            t += _snake(f"{R}.act2", cout) + _conv(f"{R}.conv2.conv", cout, cout, 1, gain=p.res_gain)
    out_dim = p.d_dim // 2**4
    t += _snake("decoder.decoder.5", out_dim)
    t += [_w("decoder.decoder.6.conv.weight", 1, out_dim, 7, gain=p.out_gain),
          TensorSpec("decoder.decoder.6.conv.bias", (1,), "const", p.out_bias)]
    return t
