"""The device choice (engine/runtime/device.py): parsing, the auto rule, what a missing or failing GPU gives.

The Vulkan loader is hidden from a subprocess with VK_ICD_FILENAMES=/nonexistent (ncnn reads it when it first
creates its Vulkan instance); the other failures are real where lavapipe can produce them, injected otherwise."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.runtime import device as dev
from engine.runtime.device import (
    CPU,
    Device,
    GpuDevice,
    GpuError,
    GpuScan,
    faster_gpu,
    parse_device,
    resolve_device,
)

ROOT = Path(__file__).resolve().parent.parent
LAVAPIPE = GpuDevice(index=0, name="llvmpipe (LLVM 15.0.6, 256 bits)", kind="software (runs on the CPU)",
                     vendor_id=0x10005, driver_version=1, api_version=(1 << 22) | (3 << 12) | 230, memory_mb=1024)
NVIDIA = GpuDevice(index=1, name="NVIDIA GeForce RTX 3060", kind="discrete", vendor_id=0x10DE,
                   driver_version=(535 << 22) | (104 << 14), api_version=(1 << 22) | (3 << 12) | 242, memory_mb=8192)


@pytest.fixture
def two_gpus(monkeypatch):
    monkeypatch.setattr(dev, "_scan", [GpuScan((LAVAPIPE, NVIDIA), default_index=1)])


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.setattr(dev, "_scan", [GpuScan((), None, "no Vulkan device was found")])


def run_python(code: str, **env: str) -> subprocess.CompletedProcess:
    full = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full, timeout=120)


@pytest.mark.parametrize("text, expected", [("cpu", ("cpu", None)), ("auto", ("auto", None)), ("GPU", ("gpu", None)),
                                            ("gpu:0", ("gpu", 0)), (" gpu:12 ", ("gpu", 12))])
def test_parse_device(text, expected):
    assert parse_device(text) == expected


@pytest.mark.parametrize("text", ["", "cuda", "gpu:", "gpu:-1", "gpu:x", "gpu:1:2", "cpu:0"])
def test_parse_device_refuses_in_one_line(text):
    with pytest.raises(GpuError) as e:
        parse_device(text)
    assert "\n" not in str(e.value) and "cpu, gpu, gpu:N" in str(e.value)


def test_cpu_and_unmeasured_auto_never_touch_vulkan(monkeypatch):
    def scan():
        raise AssertionError("Vulkan was scanned")

    monkeypatch.setattr(dev, "_scan", [])
    monkeypatch.setattr(dev, "_scan_now", scan)
    assert resolve_device("cpu") == CPU
    auto = resolve_device("auto")
    assert auto == CPU and "no GPU has been measured faster" in auto.note and auto.fallback_to_cpu


@pytest.mark.parametrize("measured, best", [
    ({"cpu": 100.0, "gpu:0": 40.0}, "gpu:0"),
    ({"cpu": 100.0, "gpu:0": 140.0}, None),  # lavapipe, or a weak integrated GPU: the CPU stays
    ({"cpu": 100.0, "gpu:0": 90.0, "gpu:1": 30.0}, "gpu:1"),
    ({"cpu": 100.0, "gpu:0": 100.0}, None),  # a tie is no reason to move
    ({"gpu:0": 10.0}, None),  # nothing to compare with
    ({}, None), (None, None),
])
def test_faster_gpu_is_the_tuning_hook(measured, best):
    assert faster_gpu(measured) == best


def test_auto_follows_the_measurement(two_gpus):
    fast = resolve_device("auto", measured={"cpu": 250.0, "gpu:1": 60.0})
    assert fast.gpu == NVIDIA and fast.fallback_to_cpu
    assert "measured faster than the CPU" in fast.note and "60 against 250" in fast.note
    slow = resolve_device("auto", measured={"cpu": 250.0, "gpu:0": 7000.0})
    assert slow == CPU and "the CPU measured faster" in slow.note


def test_auto_falls_back_when_the_measured_gpu_is_gone(no_gpu):
    device = resolve_device("auto", measured={"cpu": 250.0, "gpu:0": 60.0})
    assert device == CPU and device.note == "Running on the CPU: no Vulkan device was found."


def test_gpu_picks_ncnns_default_and_gpu_n_its_own(two_gpus):
    assert resolve_device("gpu").gpu == NVIDIA
    chosen = resolve_device("gpu:0", precision="fp16")
    assert chosen.gpu == LAVAPIPE and chosen.precision == "fp16" and chosen.name == "gpu:0"
    assert not chosen.fallback_to_cpu
    with pytest.raises(GpuError, match=r"There is no GPU 2: ncnn sees 2 \(GPU 0: llvmpipe .*; GPU 1: NVIDIA"):
        resolve_device("gpu:2")


def test_gpu_without_a_device_refuses_in_one_line(no_gpu):
    for requested in ("gpu", "gpu:0"):
        with pytest.raises(GpuError) as e:
            resolve_device(requested)
        assert str(e.value) == "No GPU to run on: no Vulkan device was found."


def test_unknown_gpu_precision_is_refused():
    with pytest.raises(GpuError, match="choose fp32 or fp16"):
        resolve_device("cpu", precision="int4")


def test_describe_names_the_driver_and_memory():
    assert NVIDIA.describe() == ("GPU 1: NVIDIA GeForce RTX 3060; discrete, driver 535.104, Vulkan 1.3.242, "
                                 "8192 MB")
    assert LAVAPIPE.software and not NVIDIA.software
    assert Device(NVIDIA, "fp16").describe().endswith("8192 MB, fp16")


@pytest.mark.parametrize("lines, reason", [
    (["dlopen failed libvulkan.so.1: cannot open shared object file", "load vulkan driver failed"],
     "no Vulkan loader"),
    (["vkCreateInstance failed -9"], "found no usable GPU driver (vkCreateInstance error -9)"),
    (["vkCreateInstance failed -3"], "failed to start (vkCreateInstance error -3)"),
    ([], "no Vulkan device was found"),
])
def test_why_no_gpu(lines, reason):
    assert reason in dev._no_gpu_reason(lines)


def test_hidden_loader_gives_no_gpu_and_auto_runs_on_the_cpu():
    """A subprocess whose Vulkan loader finds no driver: the scan says why, gpu refuses, auto stays on the CPU."""
    code = (
        "import json; from engine.runtime.device import scan_gpus, resolve_device, GpuError\n"
        "s = scan_gpus(); out = {'gpus': len(s.gpus), 'reason': s.reason, 'auto': resolve_device('auto').name}\n"
        "try:\n    resolve_device('gpu')\nexcept GpuError as e:\n    out['gpu'] = str(e)\n"
        "print(json.dumps(out))\n"
    )
    proc = run_python(code, VK_ICD_FILENAMES="/nonexistent")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["gpus"] == 0 and out["auto"] == "cpu"
    assert out["gpu"].startswith("No GPU to run on: ") and out["reason"] in out["gpu"]
    assert proc.stderr == ""  # ncnn's own messages are kept out of the terminal


def test_ncnn_messages_are_captured():
    code = (
        "import os; from engine.runtime.device import ncnn_messages\n"
        "with ncnn_messages() as log:\n    os.write(2, b'create_shader_module failed\\nok line\\n')\n"
        "print(log.lines, log.failures())\n"
    )
    proc = run_python(code)
    assert proc.stdout.strip() == "['create_shader_module failed', 'ok line'] ['create_shader_module failed']"
    assert proc.stderr == ""
