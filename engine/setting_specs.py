"""Every sampling setting a user can set, declared once: its GenerationSettings field, its kind of number, the rule
the engine checks it by, its label and its help, and the range and step an input box offers. The engine's check
(GenerationSettings.check), the command line's arguments, the app's spin boxes and a take's description are all
built from SAMPLING_SETTINGS, so adding a setting is this declaration and the code that uses the value.

The rules (the engine's range) are wider than what a box offers (a comfortable range for a person): a temperature
of 5 is valid, a box stops at 2.
"""

from __future__ import annotations

from dataclasses import dataclass

# the rules a value is checked by, each with the words that say it
POSITIVE = "a finite number greater than 0"
WHOLE_OR_OFF = "a whole number, 0 (off) or more"
PROBABILITY = "greater than 0 and at most 1"


@dataclass(frozen=True)
class SettingSpec:
    name: str  # the GenerationSettings field (and the command line's --name with dashes)
    whole: bool  # a whole number (else any number)
    rule: str  # POSITIVE, WHOLE_OR_OFF or PROBABILITY
    label: str  # "Top-k": in messages, the app's form and a take's description
    help: str  # one line: the command line's help and the app's tooltip
    low: float  # what an input box offers: its range, step and decimals
    high: float
    step: float = 1.0
    decimals: int = 0

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


SAMPLING_SETTINGS: tuple[SettingSpec, ...] = (
    SettingSpec("temperature", False, POSITIVE, "Temperature",
                "sampling temperature of the talker: higher is livelier, lower steadier (default: the model's)",
                0.05, 2.0, 0.05, 2),
    SettingSpec("top_k", True, WHOLE_OR_OFF, "Top-k",
                "sample from the k most likely codes only; 0 turns it off (default: the model's)", 1, 2048),
    SettingSpec("top_p", False, PROBABILITY, "Top-p",
                "sample from the most likely codes that make up this much probability (default: the model's)",
                0.05, 1.0, 0.05, 2),
    SettingSpec("repetition_penalty", False, POSITIVE, "Repetition penalty",
                "how much a code already said is held back (1: not at all; default: the model's)",
                1.0, 2.0, 0.01, 2),
    SettingSpec("subtalker_temperature", False, POSITIVE, "Code predictor temperature",
                "sampling temperature of the code predictor (codes 1-15 of each frame; default: the model's)",
                0.05, 2.0, 0.05, 2),
    SettingSpec("subtalker_top_k", True, WHOLE_OR_OFF, "Code predictor top-k",
                "top-k of the code predictor; 0 turns it off (default: the model's)", 1, 2048),
    SettingSpec("subtalker_top_p", False, PROBABILITY, "Code predictor top-p",
                "top-p of the code predictor (default: the model's)", 0.05, 1.0, 0.05, 2),
)
SETTING = {s.name: s for s in SAMPLING_SETTINGS}
