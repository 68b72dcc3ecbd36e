"""Where each take runs is said: in the window while the model is open (a GPU chosen but not used, as with a q8
model, included), in the take's line and details, kept with the take; the device box tells exact and fast GPU
choices apart in the part it shows."""

from __future__ import annotations

from engine.runtime.device import Device, GpuDevice
from qwen3tts_gui.data.take_store import TakeStore
from qwen3tts_gui.widgets.device_combo import DeviceCombo

NOTE = "Running on the CPU: GPU 0 (llvmpipe) cannot build the int8 Gemm of this q8 model."


def test_gpu_chosen_cpu_used_is_said_in_the_window_and_the_take(qtbot, make_window, fake_synth, settings, tmp_path):
    settings.device, settings.gpu_precision = "gpu:0", "fp32"
    fake_synth.device = Device(note=NOTE, fallback_to_cpu=True)
    window = make_window()
    label = window.model_label
    assert "on the CPU" in label.text() and "not the chosen GPU 0" in label.text(), label.text()
    assert NOTE in label.toolTip()

    window.text_edit.setPlainText("Hello there.")
    assert window.generate()
    qtbot.waitUntil(lambda: window.synth_worker is None, timeout=10000)
    take = window.output.current
    assert "on the CPU" in window.output.info.text()
    assert "made on the CPU" in take.details()
    folder = window.history.store.folder
    qtbot.waitUntil(lambda: bool(TakeStore(folder).load_all()), timeout=10000)  # kept on the keeper's thread
    kept = TakeStore(folder).load_all()
    assert [t.device for t in kept] == ["the CPU"]


def test_a_take_on_a_gpu_names_it_and_its_precision(qtbot, make_window, fake_synth):
    gpu = GpuDevice(0, "Radeon 780M", "integrated", 0x1002, 0, 0, 4096)
    fake_synth.device = Device(gpu, "fp16")
    window = make_window()
    assert "on GPU 0: Radeon 780M, fast (fp16)" in window.model_label.text()
    window.text_edit.setPlainText("Hello there.")
    assert window.generate()
    qtbot.waitUntil(lambda: window.synth_worker is None, timeout=10000)
    assert "made on GPU 0: Radeon 780M, fast (fp16)" in window.output.current.details()


def test_device_box_tells_exact_and_fast_apart_at_its_start(qtbot, settings):
    long_name = "GPU 0: llvmpipe (LLVM 15.0.6, 256 bits); software (runs on the CPU), driver 0.0.1, Vulkan 1.3.255"
    combo = DeviceCombo(settings, lookup=lambda: ([(long_name, "gpu:0")], ""))
    qtbot.addWidget(combo)
    combo.fill_gpus()
    texts = [combo.itemText(i) for i in range(2, combo.count())]
    assert len(texts) == 2 and texts[0][:24] != texts[1][:24], texts
    assert all(long_name in combo.itemData(i, 3) for i in range(2, combo.count()))  # the full name as tooltip
