"""One rule for a file that is already there: every command that writes a file the user names (synth, batch,
decode, voice create) refuses it in one line, before any work, unless --overwrite is given; the app asks
(tests/gui). `synth -o existing.wav` used to replace the file silently while batch refused."""

from __future__ import annotations

import json

import numpy as np
import pytest

from qwen3tts_cli.main import main
from tests.bundles import bundle_for

from .conftest import REF, one_line


def run(capsys, *args) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(scope="module")
def bundle():
    return bundle_for("tiny06b", "fp32")


def commands(bundle, tmp_path) -> dict[str, tuple[list, object]]:
    """command -> (arguments, the file it writes)."""
    codes = tmp_path / "codes.npy"
    np.save(codes, np.zeros((3, 16), np.int64))
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text(json.dumps({"name": "a", "text": "Hello.", "ref": str(REF), "x_vector_only": True}) + "\n")
    (tmp_path / "batch").mkdir()
    common = ["--model", bundle, "--threads", "1"]
    return {
        "synth": (["synth", *common, "--text", "Hello.", "--ref", REF, "--x-vector-only", "--greedy", "--max-frames",
                   "2", "-o", tmp_path / "s.wav"], tmp_path / "s.wav"),
        "synth --codes-out": (["synth", *common, "--text", "Hello.", "--ref", REF, "--x-vector-only", "--greedy",
                               "--max-frames", "2", "-o", tmp_path / "new.wav", "--codes-out", tmp_path / "c.npy"],
                              tmp_path / "c.npy"),
        "batch": (["batch", *common, "--jobs", jobs, "--out-dir", tmp_path / "batch", "--greedy"],
                  tmp_path / "batch" / "a.wav"),
        "decode": (["decode", "--model", bundle, "--codes", codes, "-o", tmp_path / "d.wav"], tmp_path / "d.wav"),
        "voice create": (["voice", "create", REF, *common, "-o", tmp_path / "v.qvoice"], tmp_path / "v.qvoice"),
    }


@pytest.mark.parametrize("command", ["synth", "synth --codes-out", "batch", "decode", "voice create"])
def test_an_existing_output_is_refused_without_overwrite_and_replaced_with_it(bundle, tmp_path, capsys, command):
    args, target = commands(bundle, tmp_path)[command]
    target.write_bytes(b"the user's file")
    code, out, err = run(capsys, *args)
    said = out if command == "batch" else err  # batch lists each line's failure; the others stop in one line
    assert code != 0 and f"{target} already exists; add --overwrite to replace it." in said, (out, err)
    if command != "batch":
        one_line(err)
    assert target.read_bytes() == b"the user's file"
    assert not (tmp_path / "new.wav").exists()  # refused before any work
    code, out, err = run(capsys, *args, "--overwrite")
    assert code == 0, (out, err)
    assert target.read_bytes() != b"the user's file"
