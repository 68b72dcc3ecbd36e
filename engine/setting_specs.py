"""Every generation setting a user can set, declared once: its GenerationSettings field, its kind of value, the rule
the engine checks it by, its label and its help, and the range and step an input box offers. The engine's check
(GenerationSettings.check), the command line's arguments, the app's settings form, a take's description and the
speech server's request fields are all built from GENERATION_SETTINGS (SAMPLING_SETTINGS: the sampling ones), so
adding a setting is this declaration and the code that uses the value.

The rules (the engine's range) are wider than what a box offers (a comfortable range for a person): a temperature
of 5 is valid, a box stops at 2; any seed up to 2**63 - 1 is, the app's seed box (a 32-bit spin box) stops at
2**31 - 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# the rules a value is checked by, each with the words that say it
POSITIVE = "a finite number greater than 0"
WHOLE_OR_OFF = "a whole number, 0 (off) or more"
PROBABILITY = "greater than 0 and at most 1"
MAX_SEED = 2**63 - 1  # numpy's PCG64 takes any non-negative int; a signed 64-bit int is what settings and files hold
SEED_RANGE = f"a whole number from 0 to {MAX_SEED}"
AT_LEAST_ONE = "a whole number, 1 or more"
SWITCH = "true or false"  # on or off: a command-line switch, a check box


@dataclass(frozen=True)
class SettingSpec:
    name: str  # the GenerationSettings field (and the command line's --name with dashes)
    whole: bool  # a whole number (else any number, or a SWITCH)
    rule: str  # POSITIVE, WHOLE_OR_OFF, PROBABILITY, SEED_RANGE, AT_LEAST_ONE or SWITCH
    label: str  # "Top-k": in messages, the app's form and a take's description
    help: str  # one line: the command line's help and the app's tooltip
    low: float  # what an input box offers: its range, step and decimals
    high: float
    step: float = 1.0
    decimals: int = 0
    random: bool = False  # shapes random sampling only: greedy (argmax) ignores it

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def switch(self) -> bool:
        """On or off (a command-line switch, a check box), not a number."""
        return self.rule == SWITCH

    def problem(self, value: object, called: str | None = None) -> str | None:
        """None when `value` follows this setting's rule, else one sentence naming the setting (`called`: as the
        caller's user wrote it, e.g. a jobs file's "seed"; the label by default), the rule and the value."""
        if _follows(value, self.rule):
            return None
        return f"{called or self.label} must be {self.rule}, not {value!r}."


SAMPLING_SETTINGS: tuple[SettingSpec, ...] = (
    SettingSpec("temperature", False, POSITIVE, "Temperature",
                "sampling temperature of the talker: higher is livelier, lower steadier (default: the model's)",
                0.05, 2.0, 0.05, 2, random=True),
    SettingSpec("top_k", True, WHOLE_OR_OFF, "Top-k",
                "sample from the k most likely codes only; 0 turns it off (default: the model's)", 1, 2048,
                random=True),
    SettingSpec("top_p", False, PROBABILITY, "Top-p",
                "sample from the most likely codes that make up this much probability (default: the model's)",
                0.05, 1.0, 0.05, 2, random=True),
    SettingSpec("repetition_penalty", False, POSITIVE, "Repetition penalty",
                "how much a code already said is held back (1: not at all; default: the model's)",
                1.0, 2.0, 0.01, 2),
    SettingSpec("subtalker_temperature", False, POSITIVE, "Code predictor temperature",
                "sampling temperature of the code predictor (codes 1-15 of each frame; default: the model's)",
                0.05, 2.0, 0.05, 2, random=True),
    SettingSpec("subtalker_top_k", True, WHOLE_OR_OFF, "Code predictor top-k",
                "top-k of the code predictor; 0 turns it off (default: the model's)", 1, 2048, random=True),
    SettingSpec("subtalker_top_p", False, PROBABILITY, "Code predictor top-p",
                "top-p of the code predictor (default: the model's)", 0.05, 1.0, 0.05, 2, random=True),
)
GREEDY = SettingSpec("greedy", False, SWITCH, "Greedy",
                     "argmax decoding: always the most likely code, so the same text and voice give the same take "
                     "(reproducible, parity mode)", 0, 1)
SEED = SettingSpec("seed", True, SEED_RANGE, "Seed",
                   "the seed of the random sampling: the same seed, text and voice give the same take (default: a "
                   "fresh one, recorded)", 0, 2**31 - 1)
# a box at 0 says "Automatic" (the engine's limit from the length of the text); steps of 64 frames (5.1 s)
MAX_FRAMES = SettingSpec("max_frames", True, AT_LEAST_ONE, "Max frames",
                         "at most this many 80 ms frames (for a long text: per chunk; default: a limit from the "
                         "length of the text)", 0, 32768, 64)
# in the command line's order: --greedy, --seed, the sampling settings, --max-frames
GENERATION_SETTINGS: tuple[SettingSpec, ...] = (GREEDY, SEED, *SAMPLING_SETTINGS, MAX_FRAMES)
SETTING = {s.name: s for s in GENERATION_SETTINGS}


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def _is_whole(value: object) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _follows(value: object, rule: str) -> bool:
    if rule == SWITCH:
        return isinstance(value, (bool, np.bool_))
    if rule == WHOLE_OR_OFF:
        return _is_whole(value) and value >= 0  # type: ignore[operator]
    if rule == SEED_RANGE:
        return _is_whole(value) and 0 <= value <= MAX_SEED  # type: ignore[operator]
    if rule == AT_LEAST_ONE:
        return _is_whole(value) and value >= 1  # type: ignore[operator]
    if not _is_number(value):
        return False
    number = float(value)  # type: ignore[arg-type]
    return 0 < number <= 1 if rule == PROBABILITY else math.isfinite(number) and number > 0
