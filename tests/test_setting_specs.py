"""Each generation setting is declared once (engine/setting_specs.py): the engine checks it by its rule and names it
by its label, and the command line offers it as an argument with its help, so a setting added to the declaration
reaches them all."""

from __future__ import annotations

import re

import pytest

from engine import GENERATION_SETTINGS, GenerationSettings, TextError
from engine.setting_specs import (
    AT_LEAST_ONE,
    MAX_SEED,
    POSITIVE,
    PROBABILITY,
    SEED_RANGE,
    SWITCH,
    WHOLE_OR_OFF,
)

BAD = {POSITIVE: 0.0, WHOLE_OR_OFF: -1, PROBABILITY: 1.5, SEED_RANGE: MAX_SEED + 1, AT_LEAST_ONE: 0, SWITCH: 1}
GOOD = {POSITIVE: 0.7, WHOLE_OR_OFF: 0, PROBABILITY: 1.0, SEED_RANGE: MAX_SEED, AT_LEAST_ONE: 1, SWITCH: True}


@pytest.mark.parametrize("spec", GENERATION_SETTINGS, ids=lambda s: s.name)
def test_the_engine_checks_each_setting_by_its_declared_rule(spec):
    GenerationSettings(**{spec.name: GOOD[spec.rule]}).check()
    with pytest.raises(TextError, match="^" + re.escape(f"{spec.label} must be {spec.rule}, not")):
        GenerationSettings(**{spec.name: BAD[spec.rule]}).check()


def test_the_command_line_offers_every_declared_setting():
    import argparse

    from qwen3tts_cli.main import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    synth, batch, serve = sub.choices["synth"], sub.choices["batch"], sub.choices["serve"]
    assert {"--greedy", "--seed", "--max-frames"} <= {spec.flag for spec in GENERATION_SETTINGS}
    for command in (synth, batch, serve):  # batch, serve: every job's and request's, where it gives none of its own
        options = {a.option_strings[0]: a for a in command._actions if a.option_strings}
        for spec in GENERATION_SETTINGS:
            action = options[spec.flag]
            assert action.help == spec.help
            if spec.switch:
                assert isinstance(action, argparse._StoreTrueAction)
            else:
                assert action.type is (int if spec.whole else float)
