"""Text -> token ids: Qwen2 byte-level BPE (built with `tokenizers`) and the Qwen3-TTS prompt templates.

The official processor loads `Qwen2TokenizerFast` from vocab.json + merges.txt + tokenizer_config.json (no
tokenizer.json), which transformers converts into: NFC normalizer, the Qwen2 split regex (isolated), ByteLevel
without its own regex, a plain BPE model, and the added tokens of tokenizer_config.json. We build exactly that.
"""

from __future__ import annotations

import os
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

from ..errors import BundleError, TextError
from ..io.json_file import read_json_object
from ..runtime.bundle import Bundle
from ..runtime.manifest_parts import TextPart

# Qwen2's pre-tokenizer split pattern (as in transformers' Qwen2 converter).
QWEN2_SPLIT = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
# The pattern transformers 4.57.3 substitutes when the official wrapper passes fix_mistral_regex=True and the
# checkpoint looks affected (base vocabulary > 100000 and config.json transformers_version in (4.57.2, 5.0.0)).
MISTRAL_FIX_SPLIT = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|"
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|"
    r"\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
SPLIT_PATTERNS = {"qwen2": QWEN2_SPLIT, "mistral_fix": MISTRAL_FIX_SPLIT}

TOKENIZER_FILES = ("vocab.json", "merges.txt", "tokenizer_config.json")


def target_template(text: str) -> str:
    """The assistant turn the official wrapper builds around the text to speak."""
    return f"<|im_start|>assistant\n{text}<|im_end|>\n<|im_start|>assistant\n"


def reference_template(ref_text: str) -> str:
    """The ICL reference transcript turn."""
    return f"<|im_start|>assistant\n{ref_text}<|im_end|>\n"


def instruct_template(instruct: str) -> str:
    """The user turn of an instruction (VoiceDesign / 1.7B CustomVoice)."""
    return f"<|im_start|>user\n{instruct}<|im_end|>\n"


def split_pattern_for(config: dict[str, Any], base_vocab_size: int) -> str:
    """Which split regex the official processor ends up with for this checkpoint (see MISTRAL_FIX_SPLIT).

    Mirrors transformers 4.57.3 `_patch_mistral_regex` for a local folder loaded with fix_mistral_regex=True.
    """
    if base_vocab_size <= 100000:
        return "qwen2"
    version = str(config.get("transformers_version") or "")
    model_type = config.get("model_type")
    parsed = _parse_version(version) if version else None
    if parsed is not None and parsed <= (4, 57, 2):
        return "mistral_fix" if model_type in ("mistral", "mistral3", "voxtral", "ministral", "pixtral") else "qwen2"
    if parsed is not None and parsed >= (5, 0, 0):
        return "qwen2"
    return "mistral_fix"


def _parse_version(v: str) -> tuple[int, ...] | None:
    parts = []
    for p in v.split(".")[:3]:
        digits = "".join(ch for ch in p if ch.isdigit()) if p else ""
        if not digits:
            break
        parts.append(int(digits))
    while len(parts) < 3:
        parts.append(0)
    return tuple(parts) if parts else None


def read_merges(path: Path) -> list[tuple[str, str]]:
    """merges.txt as the Qwen2 slow tokenizer reads it (skip the #version line and blank lines)."""
    merges = []
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f):
            line = line.strip()
            if (i == 0 and line.startswith("#version:")) or not line:
                continue
            a, b = line.split()
            merges.append((a, b))
    return merges


@dataclass
class AddedTokenSpec:
    id: int
    content: str
    special: bool
    normalized: bool
    lstrip: bool
    rstrip: bool
    single_word: bool


def added_tokens(tokenizer_config: dict[str, Any]) -> list[AddedTokenSpec]:
    out = []
    for key, t in (tokenizer_config.get("added_tokens_decoder") or {}).items():
        out.append(
            AddedTokenSpec(
                id=int(key), content=t["content"], special=bool(t.get("special", False)),
                normalized=bool(t.get("normalized", not t.get("special", False))), lstrip=bool(t.get("lstrip", False)),
                rstrip=bool(t.get("rstrip", False)), single_word=bool(t.get("single_word", False)),
            )
        )
    return sorted(out, key=lambda t: t.id)


def build_tokenizer(folder: str | os.PathLike, split: str = "qwen2") -> Tokenizer:
    """A `tokenizers.Tokenizer` equivalent to the official Qwen2TokenizerFast for this folder."""
    folder = Path(folder)
    vocab = read_json_object(folder / "vocab.json", BundleError, f"The text tokenizer's {folder / 'vocab.json'}")
    config = read_json_object(folder / "tokenizer_config.json", BundleError,
                              f"The text tokenizer's {folder / 'tokenizer_config.json'}")
    try:
        merges = read_merges(folder / "merges.txt")
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise BundleError(f"text tokenizer files in {folder} are unreadable: {e}") from None
    specs = added_tokens(config)
    # Added tokens get their declared ids (HF appends them in id order, which is the same when contiguous).
    full_vocab = dict(vocab)
    for t in specs:
        full_vocab.setdefault(t.content, t.id)
    tok = Tokenizer(
        models.BPE(
            vocab=full_vocab, merges=merges, dropout=None, unk_token=None, continuing_subword_prefix="",
            end_of_word_suffix="", fuse_unk=False, byte_fallback=False,
        )
    )
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(SPLIT_PATTERNS[split]), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    if specs:
        tok.add_tokens(
            [
                AddedToken(t.content, single_word=t.single_word, lstrip=t.lstrip, rstrip=t.rstrip,
                           normalized=t.normalized, special=t.special)
                for t in specs
            ]
        )
    for t in specs:
        if tok.token_to_id(t.content) != t.id:
            raise BundleError(f"text tokenizer: added token {t.content!r} does not get its id {t.id}")
    return tok


class TextTokenizer:
    """Token ids for the talker, identical to the official processor's."""

    def __init__(self, bundle_or_folder: Any, split: str | None = None):
        if isinstance(bundle_or_folder, Bundle):
            folder = bundle_or_folder.path / "tokenizer"
            if split is None:
                split = bundle_or_folder.record(TextPart).split_regex
        else:
            folder = Path(bundle_or_folder)
        self.split = split or "qwen2"
        if self.split not in SPLIT_PATTERNS:
            raise BundleError(f"unknown tokenizer split rule {self.split!r}")
        self._tok = build_tokenizer(folder, self.split)

    def encode(self, text: str) -> list[int]:
        """Ids of `text` exactly as `processor(text=...)` gives them (specials inside the text are recognised)."""
        return list(self._tok.encode(text, add_special_tokens=True).ids)

    def decode(self, ids: list[int]) -> str:
        return self._tok.decode(list(ids), skip_special_tokens=False)

    def target_ids(self, text: str) -> list[int]:
        return self.encode(target_template(text))

    def reference_ids(self, ref_text: str) -> list[int]:
        return self.encode(reference_template(ref_text))

    def instruct_ids(self, instruct: str) -> list[int]:
        return self.encode(instruct_template(instruct))


def clean_text(text: str, what: str = "text") -> str:
    """Refuse text that would give an empty prompt; the text itself is passed on unchanged."""
    if not isinstance(text, str):
        raise TextError(f"the {what} must be a string")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # e.g. bytes that were not UTF-8 on the command line (kept as surrogates)
        raise TextError(f"The {what} is not valid UTF-8 text; check the terminal's or the file's encoding.") from None
    if not unicodedata.normalize("NFC", text).strip():
        raise TextError(f"the {what} is empty; type something to speak" if what == "text" else f"the {what} is empty")
    return text
