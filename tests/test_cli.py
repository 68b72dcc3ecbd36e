"""`qwen3tts synth` / `voice create` end to end on a converted fixture bundle; bad input exits 2, writes nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from engine.voice import Voice
from qwen3tts_cli.main import main
from tests.bundles import bundle_for, fixture_models

ROOT = Path(__file__).resolve().parent.parent
AUDIO = ROOT / "tests" / "fixtures" / "audio"
REF = AUDIO / "en_24k_mono_2s.wav"


@pytest.fixture(scope="module")
def bundle() -> Path:
    assert REF.is_file(), f"the committed reference audio {REF} is missing"
    return bundle_for(fixture_models()[0], "fp32")


def run_cli(capsys, *args: str) -> tuple[int, str]:
    code = main([str(a) for a in args])
    return code, capsys.readouterr().err


def synth_args(bundle: Path, out: Path, *extra: str) -> list[str]:
    return ["synth", "--model", str(bundle), "--text", "Hello there.", "-o", str(out), "--greedy",
            "--max-frames", "6", "--language", "english", *extra]


def test_synth_x_vector_end_to_end(bundle, tmp_path, capsys):
    out, codes = tmp_path / "out.wav", tmp_path / "codes.npy"
    code, err = run_cli(capsys, *synth_args(bundle, out, "--ref", str(REF), "--x-vector-only", "--codes-out",
                                            str(codes)))
    assert code == 0, err
    c = np.load(codes)
    assert c.ndim == 2 and c.shape[1] == 16 and 1 <= c.shape[0] <= 6 and c.dtype == np.int64
    wav, sr = sf.read(out, dtype="float32")
    # the official implementation returns 1920 samples per frame (samples == 1920 x frames in every synth case
    # of tests/fixtures/cases.json, ICL included); 16-bit PCM is the default, as in the app
    assert sr == 24000 and wav.shape == (c.shape[0] * 1920,) and sf.info(out).subtype == "PCM_16"
    assert "wrote" in err
    # same seed-free greedy run again: identical codes
    code, _ = run_cli(capsys, *synth_args(bundle, tmp_path / "b.wav", "--ref", str(REF), "--x-vector-only",
                                          "--codes-out", str(tmp_path / "b.npy")))
    assert code == 0 and np.array_equal(np.load(tmp_path / "b.npy"), c)


def test_voice_create_then_synth_icl(bundle, tmp_path, capsys):
    voice = tmp_path / "v.qvoice"
    code, err = run_cli(capsys, "voice", "create", str(REF), "--model", str(bundle), "--ref-text",
                        "This is the reference.", "-o", str(voice))
    assert code == 0, err
    v = Voice.load(voice)
    assert v.icl and v.ref_codes.shape[1] == 16
    out = tmp_path / "icl.flac"
    code, err = run_cli(capsys, *synth_args(bundle, out, "--voice", str(voice), "--codes-out",
                                            str(tmp_path / "c.npy")))
    assert code == 0, err
    n = np.load(tmp_path / "c.npy").shape[0]
    wav, sr = sf.read(out, dtype="float32")
    assert sr == 24000 and abs(len(wav) - n * 1920) <= 1  # the official ICL cut may keep one extra sample
    # --ref with --ref-text directly gives the same codes as the saved voice (no re-encoding differences)
    code, err = run_cli(capsys, *synth_args(bundle, tmp_path / "d.wav", "--ref", str(REF), "--ref-text",
                                            "This is the reference.", "--codes-out", str(tmp_path / "d.npy")))
    assert code == 0, err
    assert np.array_equal(np.load(tmp_path / "d.npy"), np.load(tmp_path / "c.npy"))


def test_synth_as_a_subprocess(bundle, tmp_path):
    out = tmp_path / "p.wav"
    r = subprocess.run([sys.executable, "-m", "qwen3tts_cli", *synth_args(bundle, out, "--ref", str(REF),
                                                                    "--x-vector-only")],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert out.is_file()
    r = subprocess.run([sys.executable, "-m", "qwen3tts_cli", *synth_args(bundle, tmp_path / "q.wav", "--ref", str(REF)),
                        "--text", "   "], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert not (tmp_path / "q.wav").exists()


def _bad_inputs(tmp: Path, bundle: Path) -> dict[str, list[str]]:
    silent, short, corrupt = tmp / "silent.wav", tmp / "short.wav", tmp / "corrupt.wav"
    sf.write(silent, np.zeros(48000, np.float32), 24000)
    sf.write(short, (np.random.default_rng(0).standard_normal(4000) * 0.1).astype(np.float32), 24000)
    corrupt.write_bytes(b"RIFF\x00\x00\x00\x00WAVEfmt garbage")
    foreign = tmp / "foreign.qvoice"
    Voice(xvector=np.zeros(8, np.float32), model_id="another-model").save(foreign)
    ref = ["--ref", str(REF), "--x-vector-only"]
    # name: (extra arguments, words the one-line message must contain: it names the problem)
    return {
        "empty text": (["--text", "   ", *ref], ["text is empty"]),
        "unknown language": (["--language", "klingon", *ref], ["Unknown language", "klingon"]),
        "no voice": ([], ["--ref", "--voice"]),
        "silent reference": (["--ref", str(silent), "--x-vector-only"], ["silent.wav", "silent"]),
        "short reference": (["--ref", str(short), "--x-vector-only"], ["short.wav", "too short"]),
        "corrupt reference": (["--ref", str(corrupt), "--x-vector-only"], ["corrupt.wav", "damaged"]),
        "missing reference": (["--ref", str(tmp / "nope.wav"), "--x-vector-only"], ["nope.wav", "does not exist"]),
        "empty reference text": (["--ref", str(REF), "--ref-text", "  "], ["reference text is empty"]),
        "voice of another model": (["--voice", str(foreign)], ["foreign.qvoice", "different model"]),
        "voice and ref": (["--voice", str(foreign), *ref], ["--voice", "--ref", "not both"]),
        "zero max frames": (["--max-frames", "0", *ref], ["Max frames", "not 0"]),
        "bad top-p": (["--top-p", "0", *ref], ["Top-p", "not 0.0"]),
        "bad codes suffix": (["--codes-out", str(tmp / "codes.txt"), *ref], ["codes.txt", ".npy"]),
    }


def test_bad_inputs_exit_2_with_one_line_and_write_nothing(bundle, tmp_path, capsys):
    for name, (extra, words) in _bad_inputs(tmp_path, bundle).items():
        out, codes = tmp_path / f"{name}.wav", tmp_path / f"{name}.npy"
        args = synth_args(bundle, out, *extra)
        if "--codes-out" not in extra:
            args += ["--codes-out", str(codes)]
        code, err = run_cli(capsys, *args)
        assert code == 2, f"{name}: exit {code}: {err}"
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("qwen3tts: "), f"{name}: {err!r}"
        assert all(w in lines[0] for w in words), f"{name}: the message should name {words}: {lines[0]!r}"
        message = lines[0].removeprefix("qwen3tts: ")  # the house voice: a sentence (it may start with an option)
        assert (message[0].isupper() or message.startswith("--")) and message.endswith((".", ".)")), name
        assert not out.exists() and not codes.exists(), name


def test_float_samples_only_for_wav(bundle, tmp_path, capsys):
    out = tmp_path / "out.flac"
    code, err = run_cli(capsys, *synth_args(bundle, out, "--ref", str(REF), "--x-vector-only", "--float"))
    assert code == 2 and err.strip() == "qwen3tts: --float is for .wav files; out.flac is not one."
    assert not out.exists()


def test_bad_output_and_bundle(bundle, tmp_path, capsys):
    cases = {
        "bad suffix": (synth_args(bundle, tmp_path / "out.mp4", "--ref", str(REF), "--x-vector-only"),
                       ["out.mp4", ".wav"]),
        "missing folder": (synth_args(bundle, tmp_path / "nope" / "out.wav", "--ref", str(REF), "--x-vector-only"),
                           ["nope", "does not exist"]),
        "not a bundle": (synth_args(tmp_path, tmp_path / "o.wav", "--ref", str(REF), "--x-vector-only"),
                         ["not a model bundle"]),
    }
    for name, (args, words) in cases.items():
        code, err = run_cli(capsys, *args)
        assert code == 2 and len(err.strip().splitlines()) == 1, f"{name}: {err!r}"
        assert all(w in err for w in words), f"{name}: the message should name {words}: {err!r}"
    assert not list(tmp_path.glob("*.wav"))
    code, err = run_cli(capsys, "voice", "create", str(REF), "--model", str(bundle), "--ref-text", "",
                        "-o", str(tmp_path / "v.qvoice"))
    assert code == 2 and "reference text is empty" in err and not (tmp_path / "v.qvoice").exists()
