"""The command line does what the app does with the same request: a reference without its transcript gives a
timbre-only voice (with a one-line note), a VoiceDesign model needs a description, `models list --available`
prints the catalogue where a script reads it (stdout), and the app's demo model is listed as the demo."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from engine.store import CATALOGUE, WHISPER_CATALOGUE
from qwen3tts_cli.main import main
from tests.bundles import FIXTURES, bundle_for, fixture_models

REF = FIXTURES / "audio" / "en_24k_mono_2s.wav"


def run(capsys, *args) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def synth(bundle, out, *extra):
    return ["synth", "--model", bundle, "--text", "Hello there.", "-o", out, "--greedy", "--max-frames", "6",
            "--language", "english", "--codes-out", out.with_suffix(".npy"), *extra]


def test_ref_without_transcript_clones_the_timbre_with_a_note(tmp_path, capsys):
    bundle = bundle_for(fixture_models()[0], "fp32")
    code, _, err = run(capsys, *synth(bundle, tmp_path / "plain.wav", "--ref", REF))
    assert code == 0, err
    notes = [ln for ln in err.splitlines() if "timbre only" in ln]
    assert len(notes) == 1 and "--ref-text" in notes[0], err
    code, _, err = run(capsys, *synth(bundle, tmp_path / "xv.wav", "--ref", REF, "--x-vector-only"))
    assert code == 0 and "timbre only" not in err, err  # asked for explicitly: nothing to point out
    np.testing.assert_array_equal(np.load(tmp_path / "plain.npy"), np.load(tmp_path / "xv.npy"))


def test_a_jobs_line_with_a_reference_and_no_transcript_runs_timbre_only(tmp_path, capsys):
    bundle = bundle_for(fixture_models()[0], "fp32")
    jobs = tmp_path / "jobs.jsonl"
    base = {"text": "Hello there.", "language": "english", "ref": str(REF), "max_frames": 6}
    jobs.write_text(json.dumps({"name": "plain", **base}) + "\n"
                    + json.dumps({"name": "xv", **base, "x_vector_only": True}) + "\n", encoding="utf-8")
    code, out, err = run(capsys, "batch", "--model", bundle, "--jobs", jobs, "--out-dir", tmp_path / "out",
                         "--greedy", "--codes")
    assert code == 0, out + err
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "plain.codes.npy"),
                                  np.load(tmp_path / "out" / "xv.codes.npy"))


def test_voice_design_without_a_description_is_refused_like_in_the_app(tmp_path, capsys):
    bundle = bundle_for("tinyvd17b", parts=["text", "talker", "codec_decoder"])
    out = tmp_path / "x.wav"
    for extra in ([], ["--instruct", "   "]):
        code, _, err = run(capsys, *synth(bundle, out, *extra))
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1 and "description" in lines[0] and "--instruct" in lines[0], err
        assert not out.exists() and not out.with_suffix(".npy").exists()
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text(json.dumps({"name": "nameless", "text": "Hi."}) + "\n", encoding="utf-8")
    code, stdout, _ = run(capsys, "batch", "--model", bundle, "--jobs", jobs, "--out-dir", tmp_path / "out")
    assert code == 1 and stdout.startswith("failed  nameless: Line 1:") and "description" in stdout, stdout
    assert not (tmp_path / "out" / "nameless.wav").exists()


def test_models_list_available_prints_the_catalogue_on_stdout(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("QWEN3TTS_MODELS_DIR", str(tmp_path / "models"))
    code, out, err = run(capsys, "models", "list", "--available")
    assert code == 0
    names = [ln.split()[0] for ln in out.splitlines()]
    assert names == [e.name for e in CATALOGUE + WHISPER_CATALOGUE], out  # voice models, then speech recognition
    assert all("available" in ln for ln in out.splitlines())
    assert "No models installed" in err and not any(e.name in err for e in CATALOGUE + WHISPER_CATALOGUE)


def test_the_demo_model_is_listed_as_the_demo_not_as_imported(tmp_path, monkeypatch, capsys):
    from engine import make_demo_bundle

    store = tmp_path / "models"
    monkeypatch.setenv("QWEN3TTS_MODELS_DIR", str(store))
    make_demo_bundle(store / "demo")
    shutil.copytree(bundle_for("tiny06b", "fp16"), store / "mine")  # a converted local checkpoint
    code, out, _ = run(capsys, "models", "list")
    assert code == 0
    sources = {ln.split()[0]: ln.split()[-1] for ln in out.splitlines()}
    assert sources == {"demo": "demo", "mine": "imported"}, out


@pytest.mark.parametrize("source", ["demo", "imported"])
def test_the_store_says_where_each_model_came_from(source, tmp_path):
    from engine import make_demo_bundle
    from engine.store import ModelStore

    root = tmp_path / "models"
    if source == "demo":
        make_demo_bundle(root / "m")
    else:
        shutil.copytree(bundle_for("tiny06b", "fp16"), root / "m")
    (model,) = ModelStore(root).installed()
    assert model.source == source and model.demo == (source == "demo")
