"""The jobs file of `qwen3tts batch`: a line may give itself any generation setting, checked by its declaration
(engine/setting_specs.py): the engine's rule, in the engine's words, with the field as the line wrote it."""

from __future__ import annotations

import json

import pytest

from engine import GenerationSettings, TextError
from engine.setting_specs import MAX_SEED
from qwen3tts_cli.batch_jobs import LINE_SETTINGS, read_jobs

BAD = {"max_frames": [0, -3, 2.5, True, "40"], "seed": [-1, MAX_SEED + 1, 1.5, False, "7"],
       "temperature": [0, -1.0, float("inf"), "hot"], "top_k": [-1, 2.5], "top_p": [0, 1.5], "greedy": [1, "yes"]}
GOOD = {"max_frames": [1, 4096], "seed": [0, MAX_SEED], "temperature": [0.7, 2], "top_k": [0, 50], "top_p": [1.0],
        "greedy": [True]}


def _one_line(tmp_path, **fields):
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text(json.dumps({"name": "a", "text": "Hello.", "voice": "v.qvoice", **fields}) + "\n",
                    encoding="utf-8")
    (line,) = read_jobs(jobs)
    return line


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_lines_settings_are_checked_by_the_engines_rule(tmp_path, name):
    spec = next(spec for spec in LINE_SETTINGS if spec.name == name)
    for value in BAD[spec.name]:
        line = _one_line(tmp_path, **{spec.name: value})
        with pytest.raises(TextError) as engine_says:
            GenerationSettings(**{spec.name: value}).check()
        rule = str(engine_says.value).removeprefix(spec.label)  # " must be <rule>, not <value>."
        assert line.error == f'Line 1: "{spec.name}"{rule}', value
    for value in GOOD[spec.name]:
        line = _one_line(tmp_path, **{spec.name: value})
        assert line.error is None and line.settings == {spec.name: value}

