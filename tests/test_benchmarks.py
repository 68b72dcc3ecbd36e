"""Every script in benchmarks/ still runs: a smoke run on the demo bundle at tiny sizes (a few frames, one round),
in its own process, checking the exit status and that the figures the script promises are printed. Only that
they are printed: speed is never asserted. Scripts that need the official implementation (torch + qwen-tts) run
in the live tier instead (tests/parity_live/test_benchmarks_live.py); a new script must join one of the two.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import engine

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
NUM = r"-?\d+(?:\.\d+)?(?:e[+-]\d+)?"

# script: (arguments, patterns every one of which must match a line of its output). {demo} is the shared demo
# bundle, {demo_q8} the demo checkpoint converted to 8 bits, {ckpt} the demo checkpoint (hub layout), {work} a fresh
# folder for the run.
SMOKE: dict[str, tuple[list[str], list[str]]] = {
    "batch_speed.py": (
        ["--model", "{demo}", "--sizes", "1,2", "--lines", "2", "--frames", "4"],
        [rf"^\| 1 \| given \| {NUM} \| {NUM} \| 1\.00x \| 1\.00x \| yes \|$",
         rf"^\| 2 \| longest first \| {NUM} \| {NUM} \| {NUM}x \| {NUM}x \| yes \|$"]),
    "speak_many_cost.py": (
        ["--model", "{demo}", "--lines", "3", "--frames", "4", "--batch-size", "2", "--rounds", "1", "--threads", "1"],
        [rf"^round 1 speak_many {NUM} s, synthesize_many {NUM} s, ratio {NUM}, codes identical \(speak_many first\)$",
         rf"^speak_many / synthesize_many: median {NUM}x over 1 round\(s\)"]),
    "code_predictor_profile.py": (
        ["--model", "{demo_q8}", "--threads", "1", "--rounds", "2"],
        [rf"^    Gemm \(int8 weights\) +\d+ layers +{NUM} ms +{NUM} %$", rf"int8 Gemms read {NUM} MB in {NUM} ms",
         rf"^  whole frame \(predict: 15 calls, positions 0 and 1 in one, greedy choice, embedding rows\): median {NUM} ms",
         rf"^  the same frame with positions 0 and 1 in calls of their own .*: median {NUM} ms; codes identical$"]),
    "frame_overhead.py": (
        ["--model", "{demo}", "--frames", "4", "--rounds", "1"],
        [rf"^\| sampled \| {NUM} \| {NUM} \| {NUM} \|$", rf"^\| greedy \| {NUM} \| {NUM} \| {NUM} \|$"]),
    "long_text_speed.py": (
        ["--model", "{demo}", "--chunks", "2", "--frames", "4", "--rounds", "1", "--batch-sizes", "1,2"],
        [rf"^round 1 +batch {n}: +{NUM} s for +{NUM} s of audio \(RTF {NUM}\), first chunk after +{NUM} s, "
         r"recording identical$" for n in (1, 2)]),
    "overlap.py": (
        ["--model", "{demo}", "--frames", "4", "--rounds", "1"],
        [rf"^round 1 {kind} +decoder \d thr: RTF +{NUM}, first audio +{NUM} s" for kind in ("overlap", "inline")]),
    "spin_count.py": (
        ["--model", "{demo}", "--spins", "0,1000", "--frames", "3", "--rounds", "1", "--busy", "0"],
        [rf"^\| 1 \| 0 \| {name} \| {NUM} \| {NUM} \| {NUM} \|$" for name in ("spin 0", "spin 1000", "one thread")]),
    "threads_under_load.py": (
        ["--model", "{demo}", "--frames", "4", "--rounds", "1"],
        [rf"^round 1 {kind} +{NUM} ms/frame median" for kind in ("governor", "fixed")]),
    "precision_speed.py": (
        ["{demo}", "--calls", "3"],
        [rf"\(fp32\) +{part} +min +{NUM} +p25 +{NUM} +median +{NUM} ms$" for part in ("talker step", "code predictor")]),
    "make_checkpoint.py": (
        ["{work}/checkpoint", "--preset", "demo"],
        [rf"^wrote .*checkpoint \(demo, seed 0, {NUM} GB\) in {NUM} s$"]),
    "talker_speed.py": (
        ["--checkpoint", "{ckpt}", "--work", "{work}", "--preset", "demo", "--frames", "4", "--precisions", "fp32,fp16"],
        [rf"^{p} +: talker step +{NUM} ms \| code predictor +{NUM} ms/frame \| feedback +{NUM} ms \| frame mean +{NUM} ms"
         for p in ("fp32", "fp16")]
        + [rf"logits vs fp32 \(teacher-forced\): talker max err {NUM} of scale, argmax agree {NUM}"]),
    "speaker_speed.py": (
        ["--precisions", "fp32", "--seconds", "1", "--repeat", "1", "--enc-dim", "64"],
        [rf"^ours fp32 .* 1\.0 s ref \(\d+ frames\): mel +{NUM} ms, encoder +{NUM} ms wall +{NUM} ms cpu"]),
    "q8_accuracy.py": (
        ["--no-fixtures", "--checkpoint", "{ckpt}", "--work", "{work}", "--frames", "4", "--formats", "q8",
         "--stress", "plain"],
        [rf"^\| demo_checkpoint plain \| q8 \| {NUM} \| {NUM} \| {NUM} \| {NUM} \| \d/4 \|$"]),
    "q8_error_sources.py": (
        ["--checkpoint", "{ckpt}", "--work", "{work}", "--stress", "channels100", "--frames", "2", "--threads", "1"],
        [rf"^\| {who} \| {NUM} \({NUM}\) \| {NUM} \({NUM}\) \|$"
         for who in ("q8 split / q8 split", "fp32 / q8 split", "q8 split / fp32", "q8 / q8", "fp32 / q8")]
        + [rf"^converted in {NUM} s; \d+ Linears split"]),
    "gui_stall.py": (
        # the defaults' shape: two runs of each scenario (the second batch run is asked which lines to run again)
        ["--model", "{demo}", "--frames", "4", "--long-chunks", "2", "--batch-lines", "2", "--idle-seconds", "0.2"],
        [rf"^idle \(0\.2 s\): heartbeat gaps median {NUM} ms"]
        + [rf"^RESULT {s}: longest GUI-thread stall {NUM} ms over 2 run\(s\)" for s in ("generate", "long", "batch")]
        + [rf"^(generate|long) run [12] \(.* a take of {NUM} s; longest garbage collection {NUM} ms",
           r"^batch run 1 \(.* 2 files in the batch folder;", r"^batch run 2 \(.* 2 files in the batch folder;"]),
    "server_load.py": (
        ["--model", "{demo_q8}", "--clients", "1,2", "--requests", "1", "--frames", "4", "--threads", "1"],
        [rf"^\| 1 \| this \| {n} \| {NUM} / {NUM} \| {NUM} / {NUM} \| {NUM} \| {NUM}x \| {NUM} \| \d \| {NUM} / "
         rf"{NUM} \| {NUM} \|$" for n in (1, 2)]
        + [rf"^# .*, server threads 1, decoder fp32, load average before {NUM} {NUM} {NUM};.* code: this \w+"]),
    "gpu_round_trips.py": (  # on lavapipe where installed, else bytes and the CPU column only
        ["--model", "{demo}", "--positions", "4", "--reps", "1"],
        [rf"^\s+4 \| \s*{NUM} MiB \| \s*{NUM} \| \s*({NUM}|-)$",
         rf"^# speech decoder state per push \(each way\): attention caches {NUM} MiB"]),
}
# need torch and the official qwen-tts: the live tier runs them
LIVE = {"calibrate_demo.py", "codec_decoder_speed.py", "codec_encoder_official.py", "codec_encoder_speed.py",
        "official_check.py", "talker_fullsize_parity.py", "vs_official.py", "whisper_speed.py"}
HELPERS = {"_official.py", "bench_env.py"}  # imported by the scripts, not run
OWN_TEST = {"peer_compare.py"}  # needs another program: a test of its own below gives it a stand-in


def test_every_benchmark_has_a_smoke_run():
    scripts = {p.name for p in BENCH.glob("*.py")}
    assert scripts - HELPERS == set(SMOKE) | LIVE | OWN_TEST, \
        "every benchmark needs a smoke run (here or in the live tier)"
    live_tests = (ROOT / "tests" / "parity_live" / "test_benchmarks_live.py").read_text(encoding="utf-8")
    missing = sorted(name for name in LIVE if f'"{name}"' not in live_tests)
    assert not missing, f"no live smoke run for {missing}"


@pytest.fixture(scope="session")
def demo_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One demo bundle for every smoke run (the CLI's `qwen3tts demo-model` makes the same)."""
    return engine.make_demo_bundle(tmp_path_factory.mktemp("bench") / "demo")


@pytest.fixture(scope="session")
def demo_q8_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("bench") / "demo-q8"
    return engine.convert_checkpoint(ROOT / "engine" / "demo_checkpoint", dest, precision="q8")


@pytest.mark.parametrize("script", sorted(SMOKE))
def test_benchmark_runs_and_prints_its_figures(script: str, demo_bundle: Path, tmp_path: Path, request):
    args, figures = SMOKE[script]
    values = {"demo": str(demo_bundle), "ckpt": str(ROOT / "engine" / "demo_checkpoint"), "work": str(tmp_path)}
    if any("{demo_q8}" in a for a in args):
        values["demo_q8"] = str(request.getfixturevalue("demo_q8_bundle"))
    env = dict(os.environ, PYTHONPATH=str(ROOT), QT_QPA_PLATFORM="offscreen", HF_HUB_OFFLINE="1",
               QWEN3TTS_BENCH_DIR=str(tmp_path / "bench-out"))
    proc = subprocess.run([sys.executable, str(BENCH / script), *(a.format(**values) for a in args)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    output = f"{proc.stdout}\n{proc.stderr}"
    assert proc.returncode == 0, f"{script} exited with {proc.returncode}:\n{output[-3000:]}"
    missing = [f for f in figures if not re.search(f, output, re.MULTILINE)]  # progress lines go to stderr
    assert not missing, f"{script} no longer prints {missing}:\n{output[-3000:]}"


def test_peer_compare_runs_both_sides_and_tabulates(demo_bundle: Path, tmp_path: Path):
    """benchmarks/peer_compare.py against a stand-in for qwentts.cpp that prints the peer's figures line; ours is a
    real `qwen3tts bench` on the demo bundle. Checks that both sides' figures are read and tabulated."""
    peer = tmp_path / "peer"
    (peer / "build").mkdir(parents=True)
    fake = peer / "build" / "qwen-tts"
    fake.write_text("#!/bin/sh\ncat > /dev/null\n"
                    "echo '[Perf] Prefill 12.0 ms'\n"
                    "echo '[Perf] TalkerDecode 60 frames (21.5 ms/frame)'\n"
                    "echo '[Perf] CodePredictor 900 steps (40.5 ms/frame)'\n"
                    "echo '[Perf] CodecDecode 5000.0 ms'\n"
                    "echo '[Perf] Total 9000.0 ms (60 frames, 62.5 ms/frame AR, audio 4.8 s, RTF 1.875)'\n")
    fake.chmod(0o755)
    out, xvec = tmp_path / "runs", tmp_path / "xvec.spk"
    xvec.write_bytes(b"\0" * 4096)
    env = dict(os.environ, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1")
    script = str(BENCH / "peer_compare.py")
    proc = subprocess.run([sys.executable, script, "run", "--peer", str(peer), "--xvec", str(xvec), "--q8",
                           str(demo_bundle), "--fp32", str(demo_bundle), "--out", str(out), "--rounds", "1",
                           "--only", "peer Q8_0 2t,ours q8 tuned"], env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc = subprocess.run([sys.executable, script, "table", "--out", str(out), "--max-foreign", "1.01"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert re.search(r"^\| peer Q8_0 2t \| 1 / 0 \| 62\.5 \| - \| 21\.5 / 40\.5 \| 1\.9 \| - \|", proc.stdout, re.M), \
        proc.stdout
    assert re.search(rf"^\| ours q8 tuned \| 1 / 0 \| {NUM} \| {NUM} \| {NUM} / {NUM} \| {NUM} \| {NUM} \|",
                     proc.stdout, re.M), proc.stdout


FAKE_PYPI_BUILD = """
class QwenTTS:
    def __init__(self, talker, codec, cpu_threads=None):
        assert str(talker).endswith("-Q4_K_M.gguf") and str(codec).endswith("qwen-tokenizer-12hz-Q8_0.gguf")
        self.threads, self.log = cpu_threads, None
    def set_log_callback(self, callback):
        self.log = callback
    def stream(self, *, text, lang, ref_spk_emb, seed, max_new_tokens):
        import numpy as np
        assert ref_spk_emb.shape == (1024,) and seed == 0 and max_new_tokens == 60 and "fox" in text
        self.log(2, "[Perf] TalkerDecode 1290.0 ms (60 frames, 21.50 ms/frame)")
        self.log(2, "[Perf] CodePredictor 2430.0 ms (40.50 ms/frame)")
        self.log(2, f"[Perf] Total 4000.0 ms (60 frames, {31.25 * self.threads:.2f} ms/frame AR, audio 4.80 s, RTF 0.833)")
        for _ in range(3):
            yield np.zeros(1920 * 20, np.float32), 24000
    def close(self):
        pass
"""


def test_peer_compare_runs_the_pypi_build_in_its_own_python(demo_bundle: Path, tmp_path: Path):
    """The PyPI build of the peer as a contender: its runner (`pypi-one`) in another Python, here this one with a
    stand-in for the package that checks what it is given and logs the native library's figures lines."""
    fake = tmp_path / "site" / "qwentts_cpp_cpu"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text(FAKE_PYPI_BUILD)
    out, xvec = tmp_path / "runs", tmp_path / "xvec.spk"
    xvec.write_bytes(b"\0" * 4096)
    env = dict(os.environ, PYTHONPATH=f"{tmp_path / 'site'}{os.pathsep}{ROOT}", HF_HUB_OFFLINE="1")
    script = str(BENCH / "peer_compare.py")
    proc = subprocess.run([sys.executable, script, "run", "--peer", str(tmp_path / "peer"), "--xvec", str(xvec), "--q8",
                           str(demo_bundle), "--fp32", str(demo_bundle), "--out", str(out), "--rounds", "1",
                           "--only", "pypi Q4_K_M 2t", "--pypi-python", sys.executable], env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc = subprocess.run([sys.executable, script, "table", "--out", str(out), "--max-foreign", "1.01"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # generation and parts from the native lines (2 threads passed on); RTF and first audio from the runner's clock
    assert re.search(rf"^\| pypi Q4_K_M 2t \| 1 / 0 \| 62\.5 \| - \| 21\.5 / 40\.5 \| {NUM} \| {NUM} \|",
                     proc.stdout, re.M), proc.stdout
