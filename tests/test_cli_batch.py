"""`qwen3tts batch`: jobs from JSONL, one status line per job, exit codes, a bad line fails only itself."""

from __future__ import annotations

import json

import numpy as np

from qwen3tts_cli.main import main
from tests.bundles import OUTPUTS, bundle_for
from tests.test_synth_parity import AUDIO, load_case


def test_batch_command(tmp_path, capsys):
    model = "tiny06b"
    bundle = bundle_for(model, "fp32")
    xv = load_case(OUTPUTS / model / "synth_xv_en_16k.npz")
    icl = load_case(OUTPUTS / model / "synth_icl_en_22k.npz")
    jobs = tmp_path / "jobs.jsonl"
    (tmp_path / "a.wav").write_bytes((AUDIO / xv["ref_audio"]).read_bytes())
    lines = [
        json.dumps({"name": "xv", "text": xv["text"], "language": xv["language"], "ref": "a.wav",
                    "x_vector_only": True, "max_frames": xv["max_new_tokens"] - 1}),
        '{"name": "broken", "text": ',
        json.dumps({"name": "icl", "text": icl["text"], "language": icl["language"],
                    "ref": str(AUDIO / icl["ref_audio"]), "ref_text": icl["ref_text"],
                    "max_frames": icl["max_new_tokens"] - 1}),
        json.dumps({"name": "nolang", "text": "hello", "language": "klingon", "ref": "a.wav", "x_vector_only": True}),
    ]
    jobs.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    rc = main(["batch", "--model", str(bundle), "--jobs", str(jobs), "--out-dir", str(out), "--greedy", "--codes",
               "--batch-size", "2", "--threads", "1"])
    stdout = capsys.readouterr().out.splitlines()
    assert rc == 1
    assert len(stdout) == 4
    assert any(s.startswith("failed  line2: Line 2: not valid JSON") for s in stdout)
    assert any(s.startswith("failed  nolang: Line 4:") and "klingon" in s for s in stdout)
    for name, d in (("xv", xv), ("icl", icl)):
        assert any(s.startswith(f"ok      {name}: wrote") for s in stdout)
        assert np.array_equal(np.load(out / f"{name}.codes.npy"), d["codes"]), name  # greedy = official
        assert (out / f"{name}.wav").stat().st_size > 44
    assert sorted(p.name for p in out.iterdir()) == ["icl.codes.npy", "icl.wav", "xv.codes.npy", "xv.wav"]
    # a second run refuses to overwrite, per job (exit 1), and bad usage exits 2
    jobs.write_text(lines[0] + "\n", encoding="utf-8")
    assert main(["batch", "--model", str(bundle), "--jobs", str(jobs), "--out-dir", str(out)]) == 1
    assert "already exists" in capsys.readouterr().out
    assert main(["batch", "--model", str(bundle), "--jobs", str(tmp_path / "none.jsonl"), "--out-dir", str(out)]) == 2
    assert main(["batch", "--model", str(bundle), "--jobs", str(jobs), "--out-dir", str(out), "--batch-size", "0"]) == 2


def test_existing_outputs_fail_naming_overwrite_and_overwrite_replaces_them(tmp_path, capsys):
    bundle = bundle_for("tiny06b", "fp32")
    xv = load_case(OUTPUTS / "tiny06b" / "synth_xv_en_16k.npz")
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text(json.dumps({"name": "xv", "text": xv["text"], "language": xv["language"],
                                "ref": str(AUDIO / xv["ref_audio"]), "x_vector_only": True,
                                "max_frames": xv["max_new_tokens"] - 1}) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    (out / "xv.wav").write_bytes(b"an older take")
    (out / "xv.codes.npy").write_bytes(b"older codes")
    args = ["batch", "--model", str(bundle), "--jobs", str(jobs), "--out-dir", str(out), "--greedy", "--codes"]
    assert main(args) == 1
    stdout = capsys.readouterr().out
    assert stdout.startswith("failed  xv:") and "already exists" in stdout and "--overwrite" in stdout, stdout
    assert (out / "xv.wav").read_bytes() == b"an older take"  # kept without --overwrite
    assert main([*args, "--overwrite"]) == 0
    stdout = capsys.readouterr().out
    assert stdout.startswith(f"ok      xv: wrote {out / 'xv.wav'} ("), stdout
    assert np.array_equal(np.load(out / "xv.codes.npy"), xv["codes"])
    assert sorted(p.name for p in out.iterdir()) == ["xv.codes.npy", "xv.wav"]  # replaced, not "xv (2).wav"


def test_a_jobs_line_is_spoken_as_synth_speaks_it(tmp_path, capsys):
    """A line goes through the engine's one door like `qwen3tts synth`: a text longer than one chunk is split,
    guarded and joined the same way (with the same seed, the same codes and the same samples), a short one too."""
    import soundfile as sf

    bundle = bundle_for("tiny06b", "fp32")
    ref = AUDIO / load_case(OUTPUTS / "tiny06b" / "synth_xv_en_16k.npz")["ref_audio"]
    long = " ".join(["This sentence is here to make the text longer than one chunk of the splitter."] * 4)
    texts = {"long": long, "short": "Hello there."}
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text("".join(json.dumps({"name": name, "text": text, "language": "english", "ref": str(ref),
                                        "x_vector_only": True, "max_frames": 6, "seed": 3}) + "\n"
                            for name, text in texts.items()), encoding="utf-8")
    out = tmp_path / "out"
    assert main(["batch", "--model", str(bundle), "--jobs", str(jobs), "--out-dir", str(out), "--codes",
                 "--batch-size", "2", "--threads", "1"]) == 0
    stdout = capsys.readouterr().out
    assert "ok      long:" in stdout and "2 chunks" in stdout, stdout
    for name, text in texts.items():
        alone = tmp_path / f"{name}-alone.wav"
        assert main(["synth", "--model", str(bundle), "--text", text, "--language", "english", "--ref", str(ref),
                     "--x-vector-only", "--max-frames", "6", "--seed", "3", "-o", str(alone), "--codes-out",
                     str(alone.with_suffix(".npy")), "--threads", "1"]) == 0
        np.testing.assert_array_equal(np.load(out / f"{name}.codes.npy"), np.load(alone.with_suffix(".npy")))
        np.testing.assert_array_equal(sf.read(out / f"{name}.wav")[0], sf.read(alone)[0])


def test_a_jobs_line_may_give_itself_any_generation_setting(tmp_path, capsys):
    """A line's own settings (any declared one, by its name) win over the batch's: a greedy line in a sampled batch
    makes the official greedy codes, and a line with its own sampling settings makes what `qwen3tts synth` makes
    with the same flags."""
    bundle = bundle_for("tiny06b", "fp32")
    xv = load_case(OUTPUTS / "tiny06b" / "synth_xv_en_16k.npz")
    voice = {"text": xv["text"], "language": xv["language"], "ref": str(AUDIO / xv["ref_audio"]),
             "x_vector_only": True, "max_frames": xv["max_new_tokens"] - 1}
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text(json.dumps({"name": "greedy", "greedy": True, **voice}) + "\n"
                    + json.dumps({"name": "own", "seed": 5, "temperature": 0.3, "top_k": 7, **voice}) + "\n",
                    encoding="utf-8")
    out = tmp_path / "out"
    assert main(["batch", "--model", str(bundle), "--jobs", str(jobs), "--out-dir", str(out), "--codes",
                 "--seed", "9", "--temperature", "1.5", "--threads", "1"]) == 0, capsys.readouterr().out
    assert np.array_equal(np.load(out / "greedy.codes.npy"), xv["codes"])
    alone = tmp_path / "alone.npy"
    assert main(["synth", "--model", str(bundle), "--text", str(xv["text"]), "--language", str(xv["language"]),
                 "--ref", str(AUDIO / xv["ref_audio"]), "--x-vector-only", "--max-frames", str(xv["max_new_tokens"] - 1),
                 "--seed", "5", "--temperature", "0.3", "--top-k", "7", "-o", str(tmp_path / "alone.wav"),
                 "--codes-out", str(alone), "--threads", "1"]) == 0
    assert np.array_equal(np.load(out / "own.codes.npy"), np.load(alone))
