"""Random-weight Qwen3-TTS 12 Hz Base checkpoints in the hub layout, written with numpy only (a development tool:
the app ships the demo checkpoint this writes, engine/demo_checkpoint/, and converts it at run time).

Presets: "demo" (tiny, every code path: GQA, head_dim != hidden/heads, talker wider than the code predictor,
16 code groups, 12.5 Hz frames, sliding windows), "0.6b" and "1.7b" (the real shapes and tensor names, for speed
runs and full-size parity checks). Tensors are streamed to the safetensors file, so full-size checkpoints need
little RAM. Values are seeded per tensor name: the same (preset, seed) always gives the same bytes.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import struct
import tempfile
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from engine.errors import EngineError
from engine.io.fileio import current_umask, write_atomic

Progress = Callable[[float, str], None]
DEMO_CHECKPOINT = Path(__file__).resolve().parents[1] / "engine" / "demo_checkpoint"  # shipped with the app
DEMO_SEED = 0

# ---------------------------------------------------------------------------------------------------------------
# Presets
# ---------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ModelShape:
    """The sizes of a Qwen3-TTS model, network by network: the one description of a random model's shape, which
    this tool's presets and the test oracle's tiny models (tests/reference/oracle.py TinySpec) both extend."""

    # talker
    t_hidden: int
    t_inter: int
    t_layers: int
    t_heads: int
    t_kv: int
    t_head_dim: int
    mrope: Sequence[int]  # the three multimodal RoPE sections
    text_hidden: int
    # code predictor
    cp_hidden: int
    cp_inter: int
    cp_layers: int
    cp_heads: int
    cp_kv: int
    cp_head_dim: int
    # speaker encoder (None fields: leave the class default out of config.json, like the real file)
    spk_channels: Sequence[int] | None
    spk_att: int | None
    spk_scale: int | None
    spk_se: int | None
    # speech tokenizer decoder
    d_hidden: int
    d_inter: int
    d_layers: int
    d_heads: int
    d_head_dim: int
    d_window: int
    d_latent: int
    d_dim: int
    d_codebook_dim: int
    # speech tokenizer encoder (HF Mimi)
    e_filters: int
    e_hidden: int
    e_inter: int
    e_layers: int
    e_heads: int
    e_head_dim: int
    e_window: int
    e_codebook_dim: int
    out_gain: float = 1.0  # the decoder's last conv gain (calibrated per model against the official code)
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class Preset(ModelShape):
    name: str
    size: str  # tts_model_size
    codebook: int  # codec codebook rows (2048 real); talker vocab = codebook + 1024
    real_text_ids: bool  # special text tokens at the real Qwen ids (151643...), vocab padded to match
    main_dtype: str  # default storage of model.safetensors ("bf16" like the real files, or "fp32")
    text_vocab: int | None  # None: the tokenizer size rounded up to 64
    cp_max_pos: int
    # constants found once against the official implementation (benchmarks/calibrate_demo.py): out_gain and
    # out_bias make the random voice audible noise (std ~0.2, no DC), neither silent nor clipped
    out_bias: float = 0.0  # cancels the DC that SnakeBeta's sin^2 term builds up
    res_gain: float = 0.3  # vocoder residual-unit output conv gain
    eos_gain: float = 1.0  # talker codec_head EOS row gain: makes sampled runs end on their own


_SPK_DEFAULT = dict(spk_channels=None, spk_att=None, spk_scale=None, spk_se=None)
_CODEC_REAL = dict(
    d_hidden=512, d_inter=1024, d_layers=8, d_heads=16, d_head_dim=64, d_window=72, d_latent=1024, d_dim=1536,
    d_codebook_dim=512,
    e_filters=64, e_hidden=512, e_inter=2048, e_layers=8, e_heads=8, e_head_dim=64, e_window=250, e_codebook_dim=256,
)
_CP_REAL = dict(cp_hidden=1024, cp_inter=3072, cp_layers=5, cp_heads=16, cp_kv=8, cp_head_dim=128, cp_max_pos=65536)

PRESETS: dict[str, Preset] = {
    "demo": Preset(
        name="demo", size="0b6", codebook=256, real_text_ids=False, main_dtype="fp32",
        t_hidden=64, t_inter=128, t_layers=2, t_heads=4, t_kv=2, t_head_dim=32, mrope=(6, 5, 5),
        text_hidden=48, text_vocab=None,
        cp_hidden=48, cp_inter=96, cp_layers=2, cp_heads=4, cp_kv=2, cp_head_dim=16, cp_max_pos=65536,
        spk_channels=(32, 32, 32, 32, 96), spk_att=16, spk_scale=4, spk_se=16,
        d_hidden=32, d_inter=64, d_layers=2, d_heads=4, d_head_dim=16, d_window=8, d_latent=32, d_dim=64,
        d_codebook_dim=32,
        e_filters=4, e_hidden=32, e_inter=64, e_layers=2, e_heads=2, e_head_dim=16, e_window=16, e_codebook_dim=16,
        out_gain=0.05924, out_bias=-0.09148, eos_gain=2.0,  # sampled runs end after ~2-4 s (median)
    ),
    "0.6b": Preset(
        name="0.6b", size="0b6", codebook=2048, real_text_ids=True, main_dtype="bf16",
        t_hidden=1024, t_inter=3072, t_layers=28, t_heads=16, t_kv=8, t_head_dim=128, mrope=(24, 20, 20),
        text_hidden=2048, text_vocab=151936, **_CP_REAL, **_SPK_DEFAULT, **_CODEC_REAL,
        out_gain=0.07193, out_bias=0.01455,
    ),
    "1.7b": Preset(
        name="1.7b", size="1b7", codebook=2048, real_text_ids=True, main_dtype="bf16",
        t_hidden=2048, t_inter=6144, t_layers=28, t_heads=16, t_kv=8, t_head_dim=128, mrope=(24, 20, 20),
        text_hidden=2048, text_vocab=151936, **_CP_REAL, **_SPK_DEFAULT, **_CODEC_REAL,
        out_gain=0.07193, out_bias=0.01455,
    ),
}

# Speaker-encoder class defaults (used when the preset leaves them out of config.json, as the real file does).
SPK_DEFAULTS = dict(channels=(512, 512, 512, 512, 1536), att=128, scale=8, se=128)

# Codec control ids relative to the codebook size (real: codebook 2048 -> pad 2148 ... languages 2050...).
CODEC_OFFSETS = {"pad": 100, "bos": 101, "eos": 102, "think": 106, "nothink": 107, "think_bos": 108, "think_eos": 109}
LANGUAGE_OFFSETS = {
    "chinese": 7, "english": 2, "german": 5, "italian": 22, "portuguese": 23, "spanish": 6, "japanese": 10,
    "korean": 16, "french": 13, "russian": 21,
}

GENERATION_CONFIG = {
    "do_sample": True,
    "repetition_penalty": 1.05,
    "temperature": 0.9,
    "top_p": 1.0,
    "top_k": 50,
    "subtalker_dosample": True,
    "subtalker_temperature": 0.9,
    "subtalker_top_p": 1.0,
    "subtalker_top_k": 50,
    "max_new_tokens": 8192,
}

TRANSFORMERS_VERSION = "4.57.3"


def get_preset(preset: str | Preset) -> Preset:
    if isinstance(preset, Preset):
        return preset
    try:
        return PRESETS[preset.lower()]
    except KeyError:
        raise EngineError(f"unknown checkpoint preset {preset!r}; choose one of {', '.join(PRESETS)}") from None


# ---------------------------------------------------------------------------------------------------------------
# Text tokenizer: a small Qwen2-shaped byte-level BPE
# ---------------------------------------------------------------------------------------------------------------

# Qwen2's pre-tokenizer split pattern.
QWEN2_SPLIT = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)

# (surface, special) in the Qwen3 / Qwen3-TTS order; the first sits right after the BPE vocabulary (151643 real).
SPECIAL_TOKENS: list[tuple[str, bool]] = [
    ("<|endoftext|>", True), ("<|im_start|>", True), ("<|im_end|>", True), ("<|object_ref_start|>", True),
    ("<|object_ref_end|>", True), ("<|box_start|>", True), ("<|box_end|>", True), ("<|quad_start|>", True),
    ("<|quad_end|>", True), ("<|vision_start|>", True), ("<|vision_end|>", True), ("<|vision_pad|>", True),
    ("<|image_pad|>", True), ("<|video_pad|>", True), ("<tool_call>", False), ("</tool_call>", False),
    ("<|fim_prefix|>", False), ("<|fim_middle|>", False), ("<|fim_suffix|>", False), ("<|fim_pad|>", False),
    ("<|repo_name|>", False), ("<|file_sep|>", False), ("<tool_response>", False), ("</tool_response>", False),
    ("<think>", False), ("</think>", False), ("<|audio_start|>", True), ("<|audio_end|>", True),
    ("<tts_pad>", True), ("<tts_text_bos>", True), ("<tts_text_eod>", True), ("<tts_text_bos_single>", True),
    ("<|audio_pad|>", True),
]
REAL_VOCAB_BASE = 151643  # ids of the BPE vocabulary proper in Qwen2/Qwen3; specials follow
REAL_WORD_IDS = {"assistant": 77091, "user": 872, "system": 8948}

CHAT_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>'"
    " + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

# A few lines in each of the ten languages plus digits, emoji and odd whitespace: enough merges that common words
# are single tokens, small enough to train in a fraction of a second.
CORPUS = """\
system
user
assistant
user: Can you read this aloud? assistant: Of course, here it is.
assistant: Hello! user: Thanks. assistant: You are welcome. system: Be brief.
The weather is lovely today, so we walked along the river and talked about music.
Please read the following sentence slowly and clearly: the rain in Spain stays mainly in the plain.
Our train leaves at 7:45 on platform 12; tickets cost $23.50 or 19,99 EUR.
I can't believe it's already 2026! We've waited so long, haven't we? You'll see, they'd agree.
Speech synthesis turns written words into sound; a good voice has rhythm, stress and melody.
Call me at +1 (555) 010-2233, or write to hello@example.org before 5 p.m.
Numbers: 0 1 2 3 4 5 6 7 8 9 10 100 1000 3.14159 2.71828 42% 1/2 3/4.
今天天气很好，我们一起去公园散步吧。
请慢慢地、清楚地朗读下面这句话。语音合成把文字变成声音。
他说：“明天早上八点见！”我回答：“好的，没问题。”
北京、上海、广州和深圳都是很大的城市。二〇二六年十月一日。
今日はとても良い天気ですね。一緒に散歩に行きましょう。
音声合成は文字を音声に変えます。ゆっくり、はっきり読んでください。
カタカナ、ひらがな、そして漢字を混ぜて書きます。
오늘 날씨가 정말 좋네요. 같이 산책하러 가요.
음성 합성은 글자를 소리로 바꿉니다. 천천히 또렷하게 읽어 주세요.
Das Wetter ist heute herrlich, also gehen wir am Fluss spazieren. Grüße aus München!
Bitte lesen Sie den folgenden Satz langsam und deutlich vor. Straße, Größe, schön.
Il fait très beau aujourd'hui ; allons nous promener au bord de la rivière. Ça va très bien, merci.
Lisez la phrase suivante lentement et clairement, s'il vous plaît. Où est la gare ? À bientôt !
Hoy hace muy buen tiempo, así que paseamos junto al río. ¿Dónde está la estación? ¡Muchas gracias!
Oggi il tempo è bellissimo, quindi facciamo una passeggiata lungo il fiume. Perché no? Così è.
Hoje o tempo está ótimo, então vamos passear perto do rio. Não sei, talvez amanhã. Obrigado!
Сегодня прекрасная погода, давайте погуляем у реки. Пожалуйста, читайте медленно и чётко.
Mixed: 我们用 English 和中文 together, 日本語も, 한국어도, and emoji 😀🎶👍🌍🚀❤️✨ too.
Tabs\tand  double  spaces,   triple spaces, trailing spaces\x20\x20\x20
windows\r\nline endings and a blank line

Combining marks: e\u0301 a\u0308 n\u0303; full width: ＡＢＣ１２３！？
"""


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character map (byte order = Qwen2's first 256 ids)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, (chr(c) for c in cs), strict=True))


@dataclass
class TextTokenizerFiles:
    vocab: dict[str, int]  # BPE vocabulary (specials excluded, as in the real vocab.json)
    merges: list[str]  # "a b" lines, rank order
    special_ids: dict[str, int]  # surface -> id
    tokenizer_config: dict[str, Any]

    @property
    def size(self) -> int:
        return max(max(self.vocab.values()), max(self.special_ids.values())) + 1

    def write(self, dest: Path) -> None:
        _write_json(dest / "vocab.json", self.vocab, indent=None)
        _write_text(dest / "merges.txt", "#version: 0.2\n" + "\n".join(self.merges) + "\n")
        _write_json(dest / "tokenizer_config.json", self.tokenizer_config)


def build_text_tokenizer(preset: Preset, vocab_size: int = 1024) -> TextTokenizerFiles:
    """Train the BPE with the `tokenizers` library and lay it out like Qwen2's files."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, min_frequency=2, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=[],
    )
    lines = CORPUS.split("\n")
    tok.train_from_iterator(lines * 4, trainer=trainer)
    model = json.loads(tok.to_str())["model"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]

    # Qwen2 order: the 256 byte characters in GPT-2 order (so "\n" = 198), then merge results in rank order.
    order = list(bytes_to_unicode().values())
    seen = set(order)
    for m in merges:
        t = m.replace(" ", "")
        if t not in seen:
            seen.add(t)
            order.append(t)
    missing = set(model["vocab"]) - seen
    if missing:  # never happens with an initial alphabet; keep every trained token anyway
        order.extend(sorted(missing))
    vocab = {t: i for i, t in enumerate(order)}

    if preset.real_text_ids:
        vocab = _pad_to_real_ids(vocab)
    base = max(vocab.values()) + 1
    special_ids = {s: base + i for i, (s, _) in enumerate(SPECIAL_TOKENS)}
    return TextTokenizerFiles(vocab, merges, special_ids, _tokenizer_config(special_ids))


def _pad_to_real_ids(vocab: dict[str, int]) -> dict[str, int]:
    """Move role words to their real Qwen ids and fill the gaps with unreachable filler tokens."""
    by_id: dict[int, str] = {}
    pinned = {w: i for w, i in REAL_WORD_IDS.items() if w in vocab}
    rest = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1]) if t not in pinned]
    for w, i in pinned.items():
        by_id[i] = w
    next_id = 0
    for t in rest:
        while next_id in by_id:
            next_id += 1
        by_id[next_id] = t
        next_id += 1
    out: dict[str, int] = {}
    for i in range(REAL_VOCAB_BASE):
        # fillers are never produced: no merge builds them and they are not single byte characters
        out[by_id.get(i, f"<|unused_{i}|>")] = i
    return out


def _tokenizer_config(special_ids: dict[str, int]) -> dict[str, Any]:
    special = dict(SPECIAL_TOKENS)
    decoder = {
        str(i): {"content": s, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False,
                 "special": special[s]}
        for s, i in special_ids.items()
    }
    return {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": decoder,
        "additional_special_tokens": [s for s, sp in SPECIAL_TOKENS if sp and s != "<|endoftext|>"],
        "bos_token": None,
        "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "extra_special_tokens": {},
        "model_max_length": 131072,
        "pad_token": "<|endoftext|>",
        "processor_class": "Qwen3TTSProcessor",
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    }


# ---------------------------------------------------------------------------------------------------------------
# config.json files
# ---------------------------------------------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------------------------------------------
# Tensor layout: names, shapes and how each is initialised
# ---------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TensorSpec:
    name: str
    shape: tuple[int, ...]
    init: str  # "normal" (std), "norm" (1 + 0.1 N), "uniform" (lo, hi), "usage", "codesum" (std), "ones", "const"
    a: float = 0.0
    b: float = 0.0
    pair: str = ""  # for "codesum": the matching cluster_usage tensor
    gain: float = 1.0
    rows: tuple[tuple[int, float], ...] = ()  # (row, extra gain) pairs, e.g. the talker's EOS row

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


def _w(name: str, *shape: int, fan_in: float | None = None, gain: float = 1.0) -> TensorSpec:
    """Linear / conv weight, std 1/sqrt(fan_in) (fan_in = prod(shape[1:]) unless given)."""
    fi = fan_in if fan_in is not None else math.prod(shape[1:])
    return TensorSpec(name, tuple(shape), "normal", 1.0 / math.sqrt(fi), gain=gain)


def _b(name: str, n: int) -> TensorSpec:
    return TensorSpec(name, (n,), "normal", 0.05)


def _norm(name: str, n: int) -> TensorSpec:
    return TensorSpec(name, (n,), "norm")


def _emb(name: str, rows: int, dim: int) -> TensorSpec:
    return TensorSpec(name, (rows, dim), "normal", 1.0)


def _uni(name: str, n: int, lo: float, hi: float) -> TensorSpec:
    return TensorSpec(name, (n,), "uniform", lo, hi)


def _snake(prefix: str, n: int) -> list[TensorSpec]:
    return [TensorSpec(f"{prefix}.alpha", (n,), "normal", 0.3), TensorSpec(f"{prefix}.beta", (n,), "normal", 0.3)]


def _conv(prefix: str, cout: int, cin: int, k: int, bias: bool = True, gain: float = 1.0) -> list[TensorSpec]:
    out = [_w(f"{prefix}.weight", cout, cin, k, gain=gain)]
    if bias:
        out.append(_b(f"{prefix}.bias", cout))
    return out


def _qwen3_layer(prefix: str, hidden: int, heads: int, kv: int, head_dim: int, inter: int) -> list[TensorSpec]:
    a = f"{prefix}.self_attn"
    return [
        _w(f"{a}.q_proj.weight", heads * head_dim, hidden),
        _w(f"{a}.k_proj.weight", kv * head_dim, hidden),
        _w(f"{a}.v_proj.weight", kv * head_dim, hidden),
        _w(f"{a}.o_proj.weight", hidden, heads * head_dim),
        _norm(f"{a}.q_norm.weight", head_dim),
        _norm(f"{a}.k_norm.weight", head_dim),
        _w(f"{prefix}.mlp.gate_proj.weight", inter, hidden),
        _w(f"{prefix}.mlp.up_proj.weight", inter, hidden),
        _w(f"{prefix}.mlp.down_proj.weight", hidden, inter),
        _norm(f"{prefix}.input_layernorm.weight", hidden),
        _norm(f"{prefix}.post_attention_layernorm.weight", hidden),
    ]


def main_tensors(p: Preset, text_vocab: int) -> list[TensorSpec]:
    t: list[TensorSpec] = []
    m = "talker.model"
    t.append(_emb(f"{m}.text_embedding.weight", text_vocab, p.text_hidden))
    t.append(_emb(f"{m}.codec_embedding.weight", p.codebook + 1024, p.t_hidden))
    for i in range(p.t_layers):
        t += _qwen3_layer(f"{m}.layers.{i}", p.t_hidden, p.t_heads, p.t_kv, p.t_head_dim, p.t_inter)
    t.append(_norm(f"{m}.norm.weight", p.t_hidden))
    t += [
        _w("talker.text_projection.linear_fc1.weight", p.text_hidden, p.text_hidden),
        _b("talker.text_projection.linear_fc1.bias", p.text_hidden),
        _w("talker.text_projection.linear_fc2.weight", p.t_hidden, p.text_hidden),
        _b("talker.text_projection.linear_fc2.bias", p.t_hidden),
        replace(_w("talker.codec_head.weight", p.codebook + 1024, p.t_hidden),
                rows=((codec_ids(p)["eos"], p.eos_gain),) if p.eos_gain != 1.0 else ()),
    ]
    c = "talker.code_predictor"
    for g in range(15):
        t.append(_emb(f"{c}.model.codec_embedding.{g}.weight", p.codebook, p.t_hidden))
    for i in range(p.cp_layers):
        t += _qwen3_layer(f"{c}.model.layers.{i}", p.cp_hidden, p.cp_heads, p.cp_kv, p.cp_head_dim, p.cp_inter)
    t.append(_norm(f"{c}.model.norm.weight", p.cp_hidden))
    for g in range(15):
        t.append(_w(f"{c}.lm_head.{g}.weight", p.codebook, p.cp_hidden))
    if p.t_hidden != p.cp_hidden:
        t += [_w(f"{c}.small_to_mtp_projection.weight", p.cp_hidden, p.t_hidden),
              _b(f"{c}.small_to_mtp_projection.bias", p.cp_hidden)]
    t += speaker_tensors(p)
    return t


def speaker_tensors(p: Preset) -> list[TensorSpec]:
    ch = p.spk_channels or SPK_DEFAULTS["channels"]
    att = p.spk_att or SPK_DEFAULTS["att"]
    scale = p.spk_scale or SPK_DEFAULTS["scale"]
    se = p.spk_se or SPK_DEFAULTS["se"]
    kernels, s = [5, 3, 3, 3, 1], "speaker_encoder"
    t = _conv(f"{s}.blocks.0.conv", ch[0], 128, kernels[0])
    for i in range(1, len(ch) - 1):
        b = f"{s}.blocks.{i}"
        t += _conv(f"{b}.tdnn1.conv", ch[i], ch[i - 1], 1)
        for j in range(scale - 1):
            t += _conv(f"{b}.res2net_block.blocks.{j}.conv", ch[i] // scale, ch[i] // scale, kernels[i])
        t += _conv(f"{b}.tdnn2.conv", ch[i], ch[i], 1)
        t += _conv(f"{b}.se_block.conv1", se, ch[i], 1)
        t += _conv(f"{b}.se_block.conv2", ch[i], se, 1)
    t += _conv(f"{s}.mfa.conv", ch[-1], ch[-1], kernels[-1])
    t += _conv(f"{s}.asp.tdnn.conv", att, ch[-1] * 3, 1)
    t += _conv(f"{s}.asp.conv", ch[-1], att, 1)
    t += _conv(f"{s}.fc", p.t_hidden, ch[-1] * 2, 1)
    return t


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


# ---------------------------------------------------------------------------------------------------------------
# Values and the streaming safetensors writer
# ---------------------------------------------------------------------------------------------------------------

_ST_DTYPE = {"fp32": ("F32", 4), "bf16": ("BF16", 2)}
_CHUNK = 1 << 22  # elements generated at a time: bounded memory for the 311 M-element text table
_TABLE_SEED = 0x51A7  # the shared pool of standard-normal draws (see _normal_table)


def _rng(seed: int, name: str) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(name.encode())])


def _normal_table() -> np.ndarray:
    """65536 fixed standard-normal draws. Big tensors pick from it with 16 random bits per element: one gather
    instead of a normal sample and a bf16 rounding per element (5x faster; full-size presets write in seconds)."""
    return np.random.default_rng(_TABLE_SEED).standard_normal(1 << 16, dtype=np.float32)


def tensor_chunks(spec: TensorSpec, seed: int, dtype: str = "fp32", table: np.ndarray | None = None
                  ) -> Iterator[np.ndarray]:
    """The tensor's values in row-major chunks, as float32 or bf16 bits (uint16) for dtype "bf16".

    Deterministic per (seed, name); the bf16 chunks are exactly the float32 ones rounded to nearest even."""
    n = spec.numel
    if spec.init in ("normal", "norm"):
        base = _normal_table() if table is None else table
        vals = base * np.float32(0.1) + np.float32(1.0) if spec.init == "norm" else base * np.float32(spec.a * spec.gain)
        lookup = _to_bf16(vals) if dtype == "bf16" else vals
        bits = np.random.SFC64(np.random.SeedSequence([seed, zlib.crc32(spec.name.encode())]))
        cols = n // spec.shape[0]
        done = 0
        while done < n:
            k = min(_CHUNK, n - done)
            idx = bits.random_raw((k + 3) // 4).view(np.uint16)[:k]
            out = lookup[idx]
            for row, g in spec.rows:  # a few rows with their own gain (e.g. the talker's EOS row)
                lo, hi = max(row * cols - done, 0), min((row + 1) * cols - done, k)
                if lo < hi:
                    v = vals[idx[lo:hi]] * np.float32(g)
                    out[lo:hi] = _to_bf16(v) if dtype == "bf16" else v
            yield out
            done += k
        return
    rng = _rng(seed, spec.name)
    if spec.init in ("ones", "const"):
        v = np.full(n, 1.0 if spec.init == "ones" else spec.a, np.float32)
    elif spec.init in ("usage", "uniform"):
        lo, hi = (0.5, 2.0) if spec.init == "usage" else (spec.a, spec.b)
        v = (lo + (hi - lo) * rng.random(n, dtype=np.float32)).astype(np.float32)
    elif spec.init == "codesum":
        # embedding_sum = codebook vector * usage, so that sum / usage is a N(0, std) row
        usage = tensor_values(TensorSpec(spec.pair, (spec.shape[0],), "usage"), seed)
        v = rng.standard_normal(n, dtype=np.float32) * np.float32(spec.a)
        v = (v.reshape(spec.shape[0], -1) * usage[:, None]).reshape(-1)
    else:
        raise ValueError(f"unknown init {spec.init!r} for {spec.name}")
    yield _to_bf16(v) if dtype == "bf16" else v


def tensor_values(spec: TensorSpec, seed: int) -> np.ndarray:
    """The whole tensor as float32, in its shape (for small tensors and tests)."""
    return np.concatenate(list(tensor_chunks(spec, seed))).reshape(spec.shape)


def _to_bf16(v: np.ndarray) -> np.ndarray:
    """Round float32 to bfloat16 (nearest even), returned as uint16 bits."""
    u = v.view(np.uint32)
    return ((u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)).astype(np.uint16)


def safetensors_header(specs: list[TensorSpec], dtype: str) -> bytes:
    """The exact header the writer produces: 8-byte length + JSON padded with spaces to 8 bytes."""
    st, size = _ST_DTYPE[dtype]
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    off = 0
    for s in specs:
        nbytes = s.numel * size
        header[s.name] = {"dtype": st, "shape": list(s.shape), "data_offsets": [off, off + nbytes]}
        off += nbytes
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    return struct.pack("<Q", len(raw)) + raw


def write_safetensors(path: Path, specs: list[TensorSpec], dtype: str, seed: int,
                      progress: Callable[[float], None] | None = None) -> None:
    """Stream every tensor to `path` (atomically: temp file + rename)."""
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise ValueError("duplicate tensor names")
    total = sum(s.numel for s in specs) or 1
    done = 0
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(safetensors_header(specs, dtype))
            table = _normal_table()
            for s in specs:
                for chunk in tensor_chunks(s, seed, dtype, table):
                    f.write(memoryview(np.ascontiguousarray(chunk)))
                    done += chunk.size
                    if progress is not None:
                        progress(done / total)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


# ---------------------------------------------------------------------------------------------------------------
# Public entry points
# ---------------------------------------------------------------------------------------------------------------


@dataclass
class CheckpointLayout:
    """Everything a preset writes, without the tensor data (cheap even for full-size presets)."""

    preset: Preset
    tokenizer: TextTokenizerFiles
    config: dict[str, Any]
    speech_config: dict[str, Any]
    main: list[TensorSpec]
    speech: list[TensorSpec]
    main_dtype: str

    def headers(self) -> dict[str, bytes]:
        return {
            "model.safetensors": safetensors_header(self.main, self.main_dtype),
            "speech_tokenizer/model.safetensors": safetensors_header(self.speech, "fp32"),
        }


def checkpoint_layout(preset: str | Preset = "demo", dtype: str | None = None) -> CheckpointLayout:
    p = get_preset(preset)
    dtype = dtype or p.main_dtype
    if dtype not in _ST_DTYPE:
        raise EngineError(f"unknown storage dtype {dtype!r}; choose fp32 or bf16")
    tok = build_text_tokenizer(p)
    text_vocab = p.text_vocab or int(math.ceil(tok.size / 64) * 64)
    if text_vocab < tok.size:
        raise EngineError(f"preset {p.name}: tokenizer has {tok.size} ids but the text table only {text_vocab}")
    assistant = tok.vocab.get("assistant")
    if assistant is None:
        raise EngineError("the demo tokenizer did not learn 'assistant' as one token")
    cfg = main_config(p, tok.special_ids, assistant, text_vocab, dtype)
    return CheckpointLayout(p, tok, cfg, speech_config(p), main_tensors(p, text_vocab), speech_tensors(p), dtype)


def write_random_checkpoint(
    dest: str | os.PathLike,
    preset: str | Preset = "demo",
    seed: int = 0,
    progress: Progress | None = None,
    dtype: str | None = None,
    overwrite: bool = False,
) -> Path:
    """Write a random-weight checkpoint folder in the hub layout; returns its path.

    dtype: storage of model.safetensors ("bf16" like the real files, default for full-size presets, or "fp32");
    the speech tokenizer is always fp32, like the real one. The folder appears only when complete.
    """
    dest = Path(dest)
    if dest.exists() and not overwrite and not (dest.is_dir() and not any(dest.iterdir())):
        raise EngineError(f"{dest} already exists; choose a new folder or remove it")
    layout = checkpoint_layout(preset, dtype)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    report = progress or (lambda _f, _m: None)
    try:
        report(0.0, "writing configs and tokenizer")
        _write_json(tmp / "config.json", layout.config)
        _write_json(tmp / "generation_config.json", GENERATION_CONFIG)
        _write_json(tmp / "preprocessor_config.json", ROOT_PREPROCESSOR_CONFIG)
        layout.tokenizer.write(tmp)
        (tmp / "speech_tokenizer").mkdir()
        _write_json(tmp / "speech_tokenizer/config.json", layout.speech_config)
        _write_json(tmp / "speech_tokenizer/preprocessor_config.json", SPEECH_PREPROCESSOR_CONFIG)
        n_main = sum(s.numel for s in layout.main)
        n_all = n_main + sum(s.numel for s in layout.speech)
        write_safetensors(tmp / "model.safetensors", layout.main, layout.main_dtype, seed,
                          lambda f: report(0.01 + 0.99 * f * n_main / n_all, "writing model.safetensors"))
        write_safetensors(tmp / "speech_tokenizer/model.safetensors", layout.speech, "fp32", seed + 1,
                          lambda f: report(0.01 + 0.99 * (n_main + f * (n_all - n_main)) / n_all,
                                           "writing speech_tokenizer/model.safetensors"))
        os.chmod(tmp, 0o777 & ~current_umask())  # mkdtemp makes it 0700; an ordinary folder is wanted
        if dest.exists():
            shutil.rmtree(dest)
        os.replace(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    report(1.0, "done")
    return dest


def main(argv: list[str] | None = None) -> int:
    """Regenerate the demo checkpoint the app ships: python -m tools.random_checkpoint [DEST]."""
    import argparse

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("dest", type=Path, nargs="?", default=DEMO_CHECKPOINT)
    args = ap.parse_args(argv)
    out = write_random_checkpoint(args.dest, "demo", seed=DEMO_SEED, overwrite=True)
    print(f"wrote {out}")
    return 0


# ---------------------------------------------------------------------------------------------------------------


def _write_text(path: Path, text: str) -> None:
    write_atomic(path, text.encode("utf-8"))


def _write_json(path: Path, obj: Any, indent: int | None = 2) -> None:
    _write_text(path, json.dumps(obj, indent=indent, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    raise SystemExit(main())
