"""The benchmarks that need the official implementation still run: a smoke run of each at tiny sizes on the demo
checkpoint (a few frames, one round), in its own process, checking the exit status and that its figures are
printed (never their values). The others run in the default tier (tests/test_benchmarks.py).

The official side runs in this (reference) environment; ours in the project's environment (bench_env.OUR_PYTHON,
.venv as run_tests.sh makes it).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.reference

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks"
DEMO_CKPT = ROOT / "engine" / "demo_checkpoint"
NUM = r"-?\d+(?:\.\d+)?(?:e[+-]\d+)?"
OURS = os.environ.get("QWEN3TTS_PYTHON", str(ROOT / ".venv" / "bin" / "python"))


def run(python: str, script: str, *args: str | Path, figures: list[str], cwd: Path) -> str:
    env = dict(os.environ, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               QWEN3TTS_REF_PYTHON=sys.executable, QWEN3TTS_BENCH_DIR=str(cwd / "bench-out"))
    proc = subprocess.run([python, str(BENCH / script), *map(str, args)], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=1800)
    assert proc.returncode == 0, f"{script} exited with {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    missing = [f for f in figures if not re.search(f, proc.stdout, re.MULTILINE)]
    assert not missing, f"{script} no longer prints {missing}:\n{proc.stdout[-3000:]}"
    return proc.stdout


@pytest.fixture
def ckpt(tmp_path: Path) -> Path:
    """A copy of the demo checkpoint (some scripts write bundles next to it)."""
    return Path(shutil.copytree(DEMO_CKPT, tmp_path / "demo_ckpt"))


def test_calibrate_demo(tmp_path):
    run(sys.executable, "calibrate_demo.py", "decoder", "demo", cwd=tmp_path,
        figures=[rf"pre-clamp std {NUM} mean [+-]{NUM}", rf"-> out_gain={NUM}, out_bias={NUM}"])


def test_official_check(ckpt, tmp_path):
    run(sys.executable, "official_check.py", "names", ckpt, "-o", tmp_path / "names.json", cwd=tmp_path,
        figures=[r"^wrote .*names\.json: "])
    run(sys.executable, "official_check.py", "load", ckpt, cwd=tmp_path, figures=[r"^RESULT: ok$"])


def test_codec_encoder_official_then_ours(tmp_path):
    work = tmp_path / "encoder"
    run(sys.executable, "codec_encoder_official.py", work, "--seconds", "1", "--repeat", "1", cwd=tmp_path,
        figures=[rf"^official +1 s: +{NUM} ms \(\d+ frames\)"])
    run(OURS, "codec_encoder_speed.py", work, "--precisions", "fp32", "--rounds", "1",
        "--official-python", sys.executable, cwd=tmp_path, figures=[rf"^fp32 +1 s +{NUM} +{NUM} +{NUM} +{NUM}"])


def test_codec_decoder_speed(ckpt, tmp_path):
    run(OURS, "codec_decoder_speed.py", ckpt, tmp_path / "decoder", "--frames", "4", "--rounds", "1",
        "--stream-frames", "4", "--decoder-precisions", "fp32", "--official-python", sys.executable, cwd=tmp_path,
        figures=[rf"^official +whole +4 +{NUM} +{NUM}", rf"^fp32/fp32 +whole +4 +{NUM} +{NUM} +{NUM} +{NUM}x"])


def test_talker_fullsize_parity(ckpt, tmp_path):
    ref = tmp_path / "ref.npz"
    run(sys.executable, "talker_fullsize_parity.py", "ref", ckpt, ref, "--frames", "4", cwd=tmp_path,
        figures=[r"^official: \d+ frames -> "])
    bundle = tmp_path / "bundle"
    subprocess.run([OURS, "-m", "qwen3tts_cli", "convert", str(ckpt), str(bundle), "--precision", "fp32"],
                   check=True, env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True)
    run(OURS, "talker_fullsize_parity.py", "ours", ref, bundle, cwd=tmp_path,
        figures=[r": \d+ of \d+ codes differ over \d+ frames"])


def test_vs_official(ckpt, tmp_path):
    run(OURS, "vs_official.py", "--ckpt", ckpt, "--frames", "50", "--precision", "fp32", cwd=tmp_path,
        figures=[r"^greedy codes, official vs .*: .* \(\d+/\d+ frames equal",
                 rf"^weight GB read per frame +{NUM} +{NUM}$",
                 rf"^floor at {NUM} GB/s \[ms/frame\] +{NUM} +{NUM}$",
                 rf"^share of the bandwidth reached +{NUM}% +{NUM}%$"])


def test_whisper_speed(tmp_path):
    """Ours and transformers alternating on the tiny Whisper fixture (the full-size checkpoints are hours of work)."""
    run(OURS, "whisper_speed.py", "--checkpoint", ROOT / "tests" / "fixtures" / "whisper" / "models" / "tinywhisper80",
        "--cache", tmp_path / "cache", "--rounds", "1", "--tokens", "5", cwd=tmp_path,
        figures=[r"^CPU: .+; 2 threads; load average before: ",
                 rf"^tinywhisper80 +ours +{NUM}s +{NUM}s +{NUM}s +{NUM}s +{NUM}s +{NUM}s +{NUM}MB +{NUM} MB$",
                 rf"^tinywhisper80 +transformers +{NUM}s +{NUM}s +{NUM}s +{NUM}s +{NUM}s +{NUM}s +{NUM}MB",
                 r"^tinywhisper80: token ids identical"])
