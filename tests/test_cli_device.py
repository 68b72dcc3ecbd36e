"""--device on every engine command: with the Vulkan loader hidden (VK_ICD_FILENAMES=/nonexistent in a subprocess:
ncnn reads it when it first creates its Vulkan instance) `--device gpu` stops with one line saying why and writes
nothing, `auto` runs on the CPU; on a Vulkan device (lavapipe in CI) the commands give the CPU's codes and audio."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

import engine
from engine.runtime.device import list_gpus

ROOT = Path(__file__).resolve().parents[1]
REF = ROOT / "tests" / "fixtures" / "audio" / "en_16k_mono_1s.wav"
NO_VULKAN = {"VK_ICD_FILENAMES": "/nonexistent"}
needs_gpu = pytest.mark.skipif(not list_gpus(), reason="no Vulkan device (CI installs lavapipe: mesa-vulkan-drivers "
                                                       "libvulkan1)")


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    return engine.make_demo_bundle(tmp_path_factory.mktemp("device") / "demo")


def qwen3tts(*args: str, **env: str) -> subprocess.CompletedProcess:
    full = {**os.environ, "PYTHONPATH": str(ROOT), "QT_QPA_PLATFORM": "offscreen", "HF_HUB_OFFLINE": "1", **env}
    return subprocess.run([sys.executable, "-m", "qwen3tts_cli", *args], capture_output=True, text=True, env=full,
                          timeout=600)


def commands(demo: Path, tmp: Path) -> dict[str, list[str]]:
    codes = tmp / "codes.npy"
    np.save(codes, np.zeros((3, 16), np.int64))
    jobs = tmp / "jobs.jsonl"
    jobs.write_text(json.dumps({"name": "a", "text": "Hello.", "ref": str(REF), "x_vector_only": True}) + "\n")
    return {
        "synth": ["synth", "--model", str(demo), "--text", "Hello there.", "--ref", str(REF), "--x-vector-only",
                  "--greedy", "--max-frames", "3", "--codes-out", str(tmp / "synth.npy"), "-o", str(tmp / "s.wav")],
        "batch": ["batch", "--model", str(demo), "--jobs", str(jobs), "--out-dir", str(tmp / "batch"), "--greedy"],
        "decode": ["decode", "--model", str(demo), "--codes", str(codes), "-o", str(tmp / "d.wav")],
        "voice create": ["voice", "create", str(REF), "--model", str(demo), "-o", str(tmp / "v.qvoice")],
        "bench": ["bench", "--model", str(demo), "--frames", "2"],
    }


@pytest.mark.parametrize("command", ["synth", "batch", "decode", "voice create", "bench"])
def test_gpu_without_vulkan_stops_in_one_line(demo, tmp_path, command):
    args = commands(demo, tmp_path)[command]
    if command == "voice create":
        args[-1] = str(tmp_path / f"v{engine.VOICE_SUFFIX}")
    proc = qwen3tts(*args, "--device", "gpu", **NO_VULKAN)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == ["qwen3tts: No GPU to run on: the Vulkan loader found no usable GPU driver "
                                        "(vkCreateInstance error -9)."]
    assert not [p for p in tmp_path.iterdir() if p.suffix in (".wav", ".qvoice", ".npy") and p.name != "codes.npy"]


def test_auto_without_vulkan_runs_on_the_cpu(demo, tmp_path):
    proc = qwen3tts(*commands(demo, tmp_path)["synth"], **NO_VULKAN)  # --device auto is the default
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "s.wav").is_file() and "GPU" not in proc.stderr


def test_unknown_device_is_one_line(demo, tmp_path):
    proc = qwen3tts(*commands(demo, tmp_path)["decode"], "--device", "cuda:0")
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == ["qwen3tts: Unknown device 'cuda:0'; choose cpu, gpu, gpu:N (N from the list "
                                        "of GPUs) or auto."]


@needs_gpu
def test_synth_and_decode_on_the_gpu_match_the_cpu(demo, tmp_path):
    cpu_dir, gpu_dir = tmp_path / "cpu", tmp_path / "gpu"
    for folder, device in ((cpu_dir, "cpu"), (gpu_dir, "gpu:0")):
        folder.mkdir()
        proc = qwen3tts(*commands(demo, folder)["synth"], "--device", device)
        assert proc.returncode == 0, proc.stderr
        if device != "cpu":
            assert proc.stderr.splitlines()[0].startswith("qwen3tts: running on GPU 0: ")
    np.testing.assert_array_equal(np.load(gpu_dir / "synth.npy"), np.load(cpu_dir / "synth.npy"))
    cpu_wav, _ = sf.read(cpu_dir / "s.wav", dtype="float32")
    gpu_wav, _ = sf.read(gpu_dir / "s.wav", dtype="float32")
    # 16-bit files: the GPU's transcendental functions (tests/test_gpu_parity.py) may move a sample by one step
    assert gpu_wav.shape == cpu_wav.shape and np.abs(gpu_wav - cpu_wav).max() <= 1e-3


@needs_gpu
def test_bench_names_the_device(demo):
    proc = qwen3tts("bench", "--model", str(demo), "--frames", "2", "--device", "gpu")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    gpu = list_gpus()[0]
    assert f"device        {gpu.describe()}, fp32" in lines
    assert any(line.startswith("gpus          GPU 0: ") and gpu.driver in line for line in lines)
    assert f"| GPU {gpu.name} ({gpu.driver}, fp32) |" in lines[-1]
