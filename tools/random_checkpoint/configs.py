"""The config.json files of the checkpoint and of its speech tokenizer, in the hub layout."""

from __future__ import annotations

from typing import Any

from .presets import CODEC_OFFSETS, LANGUAGE_OFFSETS, TRANSFORMERS_VERSION, Preset


def codec_ids(p: Preset) -> dict[str, int]:
    return {k: p.codebook + v for k, v in CODEC_OFFSETS.items()}


def main_config(p: Preset, special_ids: dict[str, int], assistant_id: int, text_vocab: int,
                dtype: str) -> dict[str, Any]:
    cid = codec_ids(p)
    cp = {
        "attention_bias": False, "attention_dropout": 0, "do_sample": False, "eos_token_id": None,
        "head_dim": p.cp_head_dim, "hidden_act": "silu", "hidden_size": p.cp_hidden, "initializer_range": 0.02,
        "intermediate_size": p.cp_inter, "layer_types": ["full_attention"] * p.cp_layers, "max_length": 20,
        "max_position_embeddings": p.cp_max_pos, "max_window_layers": 28,
        "model_type": "qwen3_tts_talker_code_predictor", "num_attention_heads": p.cp_heads, "num_code_groups": 16,
        "num_hidden_layers": p.cp_layers, "num_key_value_heads": p.cp_kv, "repetition_penalty": 1.0,
        "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 1000000, "sliding_window": None,
        "suppress_tokens": None, "temperature": 1.0, "top_k": 50, "top_p": 1.0, "use_cache": True,
        "use_sliding_window": False, "vocab_size": p.codebook,
    }
    talker = {
        "attention_bias": False, "attention_dropout": 0, "code_predictor_config": cp,
        "codec_bos_id": cid["bos"], "codec_eos_token_id": cid["eos"],
        "codec_language_id": {k: p.codebook + v for k, v in LANGUAGE_OFFSETS.items()},
        "codec_nothink_id": cid["nothink"], "codec_pad_id": cid["pad"], "codec_think_bos_id": cid["think_bos"],
        "codec_think_eos_id": cid["think_eos"], "codec_think_id": cid["think"], "head_dim": p.t_head_dim,
        "hidden_act": "silu", "hidden_size": p.t_hidden, "initializer_range": 0.02, "intermediate_size": p.t_inter,
        "max_position_embeddings": 32768, "model_type": "qwen3_tts_talker", "num_attention_heads": p.t_heads,
        "num_code_groups": 16, "num_hidden_layers": p.t_layers, "num_key_value_heads": p.t_kv,
        "position_id_per_seconds": 13, "rms_norm_eps": 1e-06,
        "rope_scaling": {"interleaved": True, "mrope_section": list(p.mrope), "rope_type": "default",
                         "type": "default"},
        "rope_theta": 1000000, "sliding_window": None, "spk_id": {}, "spk_is_dialect": {},
        "text_hidden_size": p.text_hidden, "text_vocab_size": text_vocab, "use_cache": True,
        "use_sliding_window": False, "vocab_size": p.codebook + 1024,
    }
    spk: dict[str, Any] = {"enc_dim": p.t_hidden, "sample_rate": 24000}
    if p.spk_channels is not None:
        spk.update(
            mel_dim=128, enc_channels=list(p.spk_channels), enc_kernel_sizes=[5, 3, 3, 3, 1],
            enc_dilations=[1, 2, 3, 4, 1], enc_attention_channels=p.spk_att, enc_res2net_scale=p.spk_scale,
            enc_se_channels=p.spk_se,
        )
    return {
        "architectures": ["Qwen3TTSForConditionalGeneration"],
        "assistant_token_id": assistant_id,
        "dtype": {"bf16": "bfloat16", "fp32": "float32"}[dtype],
        "im_end_token_id": special_ids["<|im_end|>"],
        "im_start_token_id": special_ids["<|im_start|>"],
        "model_type": "qwen3_tts",
        "speaker_encoder_config": spk,
        "talker_config": talker,
        "tokenizer_type": "qwen3_tts_tokenizer_12hz",
        "transformers_version": TRANSFORMERS_VERSION,
        "tts_bos_token_id": special_ids["<tts_text_bos>"],
        "tts_eos_token_id": special_ids["<tts_text_eod>"],
        "tts_model_size": p.size,
        "tts_model_type": "base",
        "tts_pad_token_id": special_ids["<tts_pad>"],
    }


def speech_config(p: Preset) -> dict[str, Any]:
    enc = {
        "_frame_rate": 12.5, "attention_bias": False, "attention_dropout": 0.0, "audio_channels": 1,
        "codebook_dim": p.e_codebook_dim, "codebook_size": p.codebook, "compress": 2, "dilation_growth_rate": 2,
        "head_dim": p.e_head_dim, "hidden_act": "gelu", "hidden_size": p.e_hidden, "initializer_range": 0.02,
        "intermediate_size": p.e_inter, "kernel_size": 7, "last_kernel_size": 3, "layer_scale_initial_scale": 0.01,
        "max_position_embeddings": 8000, "model_type": "mimi", "norm_eps": 1e-05,
        "num_attention_heads": p.e_heads, "num_filters": p.e_filters, "num_hidden_layers": p.e_layers,
        "num_key_value_heads": p.e_heads, "num_quantizers": 32, "num_residual_layers": 1,
        "num_semantic_quantizers": 1, "pad_mode": "constant", "residual_kernel_size": 3, "rope_theta": 10000.0,
        "sampling_rate": 24000, "sliding_window": p.e_window, "trim_right_ratio": 1.0,
        "upsample_groups": p.e_hidden, "upsampling_ratios": [8, 6, 5, 4], "use_cache": False,
        "use_causal_conv": True, "use_conv_shortcut": False, "use_streaming": False,
        "vector_quantization_hidden_dimension": p.e_codebook_dim,
    }
    dec = {
        "attention_bias": False, "attention_dropout": 0.0, "codebook_dim": p.d_codebook_dim,
        "codebook_size": p.codebook, "decoder_dim": p.d_dim, "head_dim": p.d_head_dim, "hidden_act": "silu",
        "hidden_size": p.d_hidden, "intermediate_size": p.d_inter, "latent_dim": p.d_latent,
        "layer_scale_initial_scale": 0.01, "max_position_embeddings": 8000, "num_attention_heads": p.d_heads,
        "num_hidden_layers": p.d_layers, "num_key_value_heads": p.d_heads, "num_quantizers": 16,
        "num_semantic_quantizers": 1, "rms_norm_eps": 1e-05, "rope_theta": 10000,
        "semantic_codebook_size": 2 * p.codebook, "sliding_window": p.d_window, "upsample_rates": [8, 5, 4, 3],
        "upsampling_ratios": [2, 2], "vector_quantization_hidden_dimension": p.d_codebook_dim,
    }
    return {
        "architectures": ["Qwen3TTSTokenizerV2Model"],
        "decode_upsample_rate": 1920,
        "decoder_config": dec,
        "dtype": "float32",
        "encode_downsample_rate": 1920,
        "encoder_config": enc,
        "encoder_valid_num_quantizers": 16,
        "input_sample_rate": 24000,
        "model_type": "qwen3_tts_tokenizer_12hz",
        "output_sample_rate": 24000,
        "transformers_version": TRANSFORMERS_VERSION,
    }


SPEECH_PREPROCESSOR_CONFIG = {
    "chunk_length_s": None,
    "feature_extractor_type": "EncodecFeatureExtractor",
    "feature_size": 1,
    "overlap": None,
    "padding_side": "right",
    "padding_value": 0.0,
    "return_attention_mask": True,
    "sampling_rate": 24000,
}
ROOT_PREPROCESSOR_CONFIG = {"processor_class": "Qwen3TTSProcessor"}
