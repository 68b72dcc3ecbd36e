"""The text tokenizer files: a small Qwen2-shaped byte-level BPE learnt from a fixed corpus, with the special
tokens at their real ids."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.text.byte_level import bytes_to_unicode

from .json_files import write_json, write_text
from .presets import Preset

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
        write_json(dest / "vocab.json", self.vocab, indent=None)
        write_text(dest / "merges.txt", "#version: 0.2\n" + "\n".join(self.merges) + "\n")
        write_json(dest / "tokenizer_config.json", self.tokenizer_config)


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
