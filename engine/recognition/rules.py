"""What a Whisper model's generation_config.json says about greedy decoding, read once and checked: the prompt
(start, language, task, <|notimestamps|>), the tokens never generated (suppress_tokens) and never first
(begin_suppress_tokens), the language tokens, the end token and the length limit.

The prompt follows transformers' WhisperGenerationMixin._retrieve_init_tokens for task "transcribe" without
timestamps: without a language, forced_decoder_ids fill the positions after the start token and an unset language
position is filled by language detection (the start token's logits over the language tokens only).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import BundleError, LanguageError
from .languages import LANGUAGE_NAMES


def _int(value: Any, what: str) -> int:
    if type(value) is not int or value < 0:
        raise BundleError(f"The Whisper bundle's generation config has a bad {what}: {value!r}; convert it again.")
    return value


def _ids(value: Any, what: str) -> tuple[int, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise BundleError(f"The Whisper bundle's generation config has a bad {what}; convert it again.")
    return tuple(_int(v, what) for v in value)


@dataclass(frozen=True)
class DecodingRules:
    start: int
    end: int
    no_timestamps: int
    transcribe: int | None
    languages: dict[str, int]  # code ("en") -> token id, in token order
    forced: tuple[tuple[int, int | None], ...]  # forced_decoder_ids: (position, token or None)
    suppress: tuple[int, ...]
    begin_suppress: tuple[int, ...]
    max_length: int  # the generation config's max_length (the prompt's length less one is added, up to positions)
    vocab_size: int

    @classmethod
    def from_configs(cls, generation: dict[str, Any], vocab_size: int) -> DecodingRules:
        lang_to_id = generation.get("lang_to_id") or {}
        task_to_id = generation.get("task_to_id") or {}
        if not isinstance(lang_to_id, dict) or not isinstance(task_to_id, dict):
            raise BundleError("The Whisper bundle's generation config has bad language or task tables; convert it "
                              "again.")
        languages = {}
        for token, tid in lang_to_id.items():
            code = str(token).removeprefix("<|").removesuffix("|>")
            languages[code] = _int(tid, f"language token {token}")
        languages = dict(sorted(languages.items(), key=lambda item: item[1]))  # the JSON's order is by name
        forced = []
        for pair in generation.get("forced_decoder_ids") or []:
            if not isinstance(pair, list) or len(pair) != 2:
                raise BundleError("The Whisper bundle's generation config has bad forced_decoder_ids; convert it again.")
            forced.append((_int(pair[0], "forced position"),
                           None if pair[1] is None else _int(pair[1], "forced token")))
        rules = cls(
            start=_int(generation.get("decoder_start_token_id"), "decoder_start_token_id"),
            end=_int(generation.get("eos_token_id"), "eos_token_id"),
            no_timestamps=_int(generation.get("no_timestamps_token_id"), "no_timestamps_token_id"),
            transcribe=None if "transcribe" not in task_to_id else _int(task_to_id["transcribe"], "task token"),
            languages=languages,
            forced=tuple(forced),
            suppress=_ids(generation.get("suppress_tokens"), "suppress_tokens"),
            begin_suppress=_ids(generation.get("begin_suppress_tokens"), "begin_suppress_tokens"),
            max_length=_int(generation.get("max_length", 448), "max_length"),
            vocab_size=vocab_size,
        )
        every = (rules.start, rules.end, rules.no_timestamps, *languages.values(), *rules.suppress,
                 *rules.begin_suppress)
        if any(t >= vocab_size for t in every):
            raise BundleError("The Whisper bundle's generation config names tokens past its vocabulary; convert it "
                              "again.")
        return rules

    @property
    def multilingual(self) -> bool:
        return bool(self.languages)

    def language_code(self, language: str) -> str:
        """A language as the model's code: "de", "<|de|>" or "german" (any letter case) -> "de"; a LanguageError
        naming what it knows otherwise."""
        key = language.strip().lower().removeprefix("<|").removesuffix("|>")
        if not self.multilingual:
            raise LanguageError("This Whisper model understands English only; leave the language out.")
        if key not in self.languages:
            by_name = {name: code for code, name in LANGUAGE_NAMES.items() if code in self.languages}
            if key not in by_name:
                raise LanguageError(f"Whisper does not know the language {language!r}; use a code such as en, de, "
                                    f"fr, zh or ja ({len(self.languages)} are known).")
            key = by_name[key]
        return key

    def prompt(self, language: str | None) -> list[int | None]:
        """The prompt before detection: None where the language is still to be detected."""
        init: list[int | None] = [self.start]
        if language is None:
            position = 1
            for pos, token in self.forced:
                if pos != position:
                    break
                init.append(token)
                position += 1
        if language is not None:
            code = self.language_code(language)
            if len(init) > 1:
                init[1] = self.languages[code]
            else:
                init.append(self.languages[code])
            if self.transcribe is not None and self.transcribe not in init:
                init.append(self.transcribe)
        elif self.multilingual and (len(init) <= 1 or init[1] is None):
            if len(init) <= 1:
                init.append(None)
        if init[-1] != self.no_timestamps:
            init.append(self.no_timestamps)
        return init

    def language_mask(self) -> np.ndarray:
        """True at the language tokens (detection takes the best of these only)."""
        mask = np.zeros(self.vocab_size, bool)
        mask[list(self.languages.values())] = True
        return mask

    def code_of(self, token: int) -> str | None:
        for code, tid in self.languages.items():
            if tid == token:
                return code
        return None

    def total_length(self, prompt_length: int, positions: int) -> int:
        """Tokens in the whole sequence, prompt included (transformers: max_length + prompt - 1, at most the
        decoder's positions)."""
        return min(self.max_length + prompt_length - 1, positions)
