"""The device setting: the app lists the GPUs ncnn sees by name (only when the list is opened: the app starts
without touching Vulkan), keeps the choice, passes it to the engine when a model opens, and a GPU that is gone
or cannot be used opens the model on the CPU with the reason in the status line instead of failing."""

from __future__ import annotations

import pytest

import engine
from engine.runtime import device as dev
from engine.runtime.device import list_gpus
from qwen3tts_gui.engine_adapter import open_synthesizer
from qwen3tts_gui.widgets.device_combo import DeviceCombo

GPUS = ([("GPU 0: llvmpipe; software (runs on the CPU), driver 0.0.1, Vulkan 1.3.230, 1024 MB", "gpu:0"),
         ("GPU 1: NVIDIA GeForce RTX 3060; discrete, driver 535.104, Vulkan 1.3.242, 8192 MB", "gpu:1")], "")


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    return engine.make_demo_bundle(tmp_path_factory.mktemp("device-setting") / "demo")


def test_the_window_starts_without_touching_vulkan(qtbot, make_window, monkeypatch):
    def scan():
        raise AssertionError("Vulkan was scanned while the window was built")

    monkeypatch.setattr(dev, "_scan", [])
    monkeypatch.setattr(dev, "_scan_now", scan)
    window = make_window(model=False)
    assert [window.settings_box.device.itemText(i) for i in range(2)] == ["Device: Automatic", "Device: CPU"]


def test_gpus_by_name_and_the_choice_is_kept(qtbot, settings):
    combo = DeviceCombo(settings, lookup=lambda: GPUS)
    qtbot.addWidget(combo)
    assert combo.count() == 2 and settings.device == "auto"
    combo.fill_gpus()
    labels = [combo.itemText(i) for i in range(combo.count())]
    names = [label.split(";")[0] for label, _device in GPUS[0]]  # the full description is the tooltip
    assert labels[2:] == [f"Device: exact, {names[0]}", f"Device: fast (fp16), {names[0]}",
                          f"Device: exact, {names[1]}", f"Device: fast (fp16), {names[1]}"]
    combo.setCurrentIndex(5)
    assert (settings.device, settings.gpu_precision) == ("gpu:1", "fp16")
    again = DeviceCombo(settings, lookup=lambda: GPUS)  # a new session: shown by number until the list opens
    qtbot.addWidget(again)
    assert again.currentData() == "gpu:1|fp16" and "GPU 1" in again.currentText()
    again.fill_gpus()
    assert "RTX 3060" in again.currentText() and settings.device == "gpu:1"


def test_no_gpu_says_why_and_a_vanished_gpu_goes_back_to_automatic(qtbot, settings):
    settings.device, settings.gpu_precision = "gpu:1", "fp32"
    combo = DeviceCombo(settings, lookup=lambda: ([], "no Vulkan device was found"))
    qtbot.addWidget(combo)
    combo.fill_gpus()
    assert combo.itemText(2) == "No GPU: no Vulkan device was found"
    assert not combo.model().item(2).isEnabled()
    assert combo.currentData() == "auto|fp32" and settings.device == "auto"


def test_the_setting_reaches_the_engine(qtbot, make_window, settings, monkeypatch):
    import qwen3tts_gui.context as context

    window = make_window(model=False)
    settings.device, settings.gpu_precision = "gpu:0", "fp16"
    opened = []
    monkeypatch.setattr(context, "open_synthesizer", lambda path, **kw: opened.append(kw))
    ctx = context.AppContext(settings, window.ctx.audio, window.ctx.dialogs, library=window.ctx.library)
    ctx.open_synth("some-bundle")
    assert opened[0]["device"] == "gpu:0" and opened[0]["gpu_precision"] == "fp16"


def test_a_gpu_that_is_gone_opens_the_model_on_the_cpu(demo):
    """A setting from another computer (GPU 7) or a GPU without a driver: the model opens, on the CPU, saying why."""
    synth = open_synthesizer(demo, device="gpu:7")
    assert not synth.device.on_gpu and synth.device.noteworthy
    assert synth.device.note.startswith("Running on the CPU: ")
    assert "GPU 7" in synth.device.note or "No GPU to run on" in synth.device.note


@pytest.mark.skipif(not list_gpus(), reason="no Vulkan device (CI installs lavapipe: mesa-vulkan-drivers libvulkan1)")
def test_a_model_opens_on_the_gpu(demo):
    synth = open_synthesizer(demo, device="gpu:0", gpu_precision="fp32")
    assert synth.device.on_gpu and synth.device.gpu.name == list_gpus()[0].name


def test_hidden_vulkan_loader_opens_a_gpu_setting_on_the_cpu(demo):
    """The app's model opening with the Vulkan loader finding no driver (a subprocess: ncnn reads
    VK_ICD_FILENAMES when it first creates its Vulkan instance) and GPU 0 chosen in the settings."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    code = ("import sys; from qwen3tts_gui.engine_adapter import open_synthesizer\n"
            "s = open_synthesizer(sys.argv[1], device='gpu:0'); print(s.device.name, '|', s.device.note)\n")
    env = {**os.environ, "PYTHONPATH": str(root), "QT_QPA_PLATFORM": "offscreen", "VK_ICD_FILENAMES": "/nonexistent"}
    proc = subprocess.run([sys.executable, "-c", code, str(demo)], capture_output=True, text=True, env=env,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ("cpu | Running on the CPU: no GPU to run on: the Vulkan loader found no usable GPU "
                                   "driver (vkCreateInstance error -9).")
