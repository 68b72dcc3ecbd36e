"""A GPU that fails is never a crash: a pipeline the driver cannot build, weights that do not fit, a device lost
while running. "gpu" stops in one GpuError line that says why; a GPU that "auto" chose falls back to the CPU with a
note. Real failures where lavapipe produces them (ncnn's int8 Gemm shader), injected otherwise. The hidden Vulkan
loader is in tests/test_gpu_device.py (library) and tests/test_cli_device.py (command line)."""

from __future__ import annotations

import numpy as np
import pytest

from engine import Synthesizer
from engine.errors import BundleError
from engine.runtime import device as dev
from engine.runtime.device import GpuError, list_gpus, resolve_device
from engine.runtime.sequence_net import SequenceNet
from tests.bundles import OUTPUTS, bundle_for
from tests.test_synth_parity import assert_codes, greedy, injected_voice
from tests.test_synth_parity import load_case as load_synth_case

pytestmark = pytest.mark.skipif(not list_gpus(), reason="no Vulkan device (CI installs lavapipe: mesa-vulkan-drivers "
                                                        "libvulkan1)")
MODEL, CASE = "tinyodd", "synth_xv_nonstream_22k"
PARTS = ("text", "talker", "codec_decoder")


def auto_on_gpu():
    """What "auto" gives where the tuning measured the GPU faster than the CPU."""
    device = resolve_device("auto", measured={"cpu": 100.0, "gpu:0": 1.0})
    assert device.on_gpu and device.fallback_to_cpu
    return device


def one_line(error: Exception) -> str:
    text = str(error)
    assert text and "\n" not in text and "Traceback" not in text
    return text


def test_a_pipeline_the_driver_cannot_build():
    """q8 bundles' int8 Gemm: ncnn 1.0.20261020's Vulkan shader for it does not compile (GLSL 'gx4' redefined), which
    ncnn only prints; the load must not go on to compute garbage with it."""
    bundle = bundle_for(MODEL, "q8", parts=PARTS)
    try:
        Synthesizer(bundle, device="gpu")
    except GpuError as e:
        text = one_line(e)
        assert text.startswith("The GPU (") and "cannot run the talker network: ncnn reports" in text
    else:
        pytest.skip("this ncnn builds the int8 Gemm pipeline on this driver: no pipeline failure to test here")
    synth = Synthesizer(bundle, device=auto_on_gpu())
    assert not synth.device.on_gpu and synth.device.note.startswith("Running on the CPU: The GPU (")
    d = load_synth_case(OUTPUTS / MODEL / f"{CASE}.npz")
    on_cpu = Synthesizer(bundle, device="cpu")
    got = list(synth.synthesize(d["text"], injected_voice(synth, d), d["language"], greedy(d)))[-1]
    want = list(on_cpu.synthesize(d["text"], injected_voice(on_cpu, d), d["language"], greedy(d)))[-1]
    np.testing.assert_array_equal(got.codes, want.codes)


def test_any_reported_pipeline_failure_stops_the_load(monkeypatch):
    """A driver that fails vkCreateComputePipelines (injected into what ncnn prints while a net loads)."""
    real = dev.ncnn_messages

    def failing():
        log = real()

        class Failing:
            def __enter__(self):
                self.log = log.__enter__()
                return self.log

            def __exit__(self, *exc):
                out = log.__exit__(*exc)
                self.log.lines.append("vkCreateComputePipelines failed -3")
                return out

        return Failing()

    monkeypatch.setattr(dev, "ncnn_messages", failing)
    bundle = bundle_for(MODEL, "fp32", parts=PARTS)
    with pytest.raises(GpuError) as e:
        Synthesizer(bundle, device="gpu:0")
    assert one_line(e.value).endswith('network: ncnn reports "vkCreateComputePipelines failed -3".')
    assert not Synthesizer(bundle, device=auto_on_gpu()).device.on_gpu


def test_weights_that_do_not_fit(monkeypatch):
    gpu = list_gpus()[0]
    small = dev.GpuScan((dev.GpuDevice(0, gpu.name, gpu.kind, gpu.vendor_id, gpu.driver_version, gpu.api_version,
                                       memory_mb=1),), 0)
    monkeypatch.setattr(dev, "_scan", [small])
    bundle = bundle_for(MODEL, "fp32", parts=PARTS)
    with pytest.raises(GpuError) as e:
        Synthesizer(bundle, device="gpu")
    assert "MB of GPU memory for its weights;" in one_line(e.value) and "offers 1 MB" in str(e.value)
    synth = Synthesizer(bundle, device=resolve_device("auto", measured={"cpu": 100.0, "gpu:0": 1.0}))
    assert not synth.device.on_gpu and "offers 1 MB" in synth.device.note


@pytest.mark.parametrize("chosen_by_auto", [False, True], ids=["gpu", "auto"])
def test_device_lost_while_running(monkeypatch, chosen_by_auto):
    """ncnn returns an error from extract when the device is lost or out of memory (a failed vkQueueSubmit): the
    talker's net reports it (injected here at its run); the synthesis stops with one GpuError line, and a
    synthesizer on a GPU that auto chose continues on the CPU with the official codes."""
    d = load_synth_case(OUTPUTS / MODEL / f"{CASE}.npz")
    synth = Synthesizer(bundle_for(MODEL, "fp32", parts=PARTS), device=auto_on_gpu() if chosen_by_auto else "gpu")
    calls = []

    def lost(self, *args, **kwargs):
        calls.append(1)
        if len(calls) > 2:  # after the prefill and a step
            raise BundleError("The model graph failed to produce hidden (ncnn error -1).")
        return real_run(self, *args, **kwargs)

    real_run = SequenceNet.run
    monkeypatch.setattr(SequenceNet, "run", lost)
    with pytest.raises(GpuError) as e:
        list(synth.synthesize(d["text"], injected_voice(synth, d), d["language"], greedy(d)))
    text = one_line(e.value)
    assert text.startswith(f"The GPU ({list_gpus()[0].name}) stopped: the model graph failed to produce hidden")
    monkeypatch.setattr(SequenceNet, "run", real_run)
    if not chosen_by_auto:
        assert synth.device.on_gpu and "Choose the CPU" in text
        return
    assert text.endswith("This model runs on the CPU from now on: start again.")
    assert not synth.device.on_gpu and "stopped" in synth.device.note
    result = list(synth.synthesize(d["text"], injected_voice(synth, d), d["language"], greedy(d)))[-1]
    assert_codes(result.codes, d["codes"])


@pytest.mark.parametrize("gpu_ms, on_gpu", [(40.0, True), (900.0, False)], ids=["gpu faster", "cpu faster"])
def test_auto_follows_this_computers_tuning(monkeypatch, gpu_ms, on_gpu):
    """The self-tuning's record holds ms/frame by device: "auto" takes the GPU only where it beat the CPU."""
    import engine.synthesis.synthesizer as synthesizer
    from engine.runtime.tuning import Lookup, TunedSettings, TuningKey, TuningRecord

    key = TuningKey(cpu="Test CPU", cores=2, logical=2, ncnn="1", model="m", precision="fp32", format="f")
    settings = TunedSettings(talker_threads=2, code_predictor_threads=2, decoder_threads=1, overlap_decode=True)
    record = TuningRecord(key, settings, device_ms={"cpu": 100.0, "gpu:0": gpu_ms})
    monkeypatch.setattr(synthesizer, "stored_tuning", lambda bundle: Lookup(record))
    synth = Synthesizer(bundle_for(MODEL, "fp32", parts=PARTS))  # device="auto", the default
    assert synth.device.on_gpu is on_gpu and synth.device.fallback_to_cpu
    assert ("measured faster than the CPU" if on_gpu else "the CPU measured faster") in synth.device.note


@pytest.mark.parametrize("chosen_by_auto", [False, True], ids=["gpu", "auto"])
def test_tuning_a_gpu_run_measures_on_the_cpu(monkeypatch, tmp_path, chosen_by_auto):
    """The self-tuning times CPU thread counts (and each GPU as a candidate): a synthesizer on the GPU does not ask
    for it, and tune() measures with the networks on the CPU, then goes back to the GPU it was given, or where the
    new figures send "auto" (lavapipe is not timed, so to the CPU)."""
    monkeypatch.setenv("QWEN3TTS_CACHE_DIR", str(tmp_path))
    bundle = bundle_for(MODEL, "fp32", parts=PARTS)
    synth = Synthesizer(bundle, device=auto_on_gpu() if chosen_by_auto else "gpu")
    assert synth.device.on_gpu and not synth.tuning_needed
    seen = []
    record = synth.tune(progress=lambda fraction, message: seen.append(synth.device.on_gpu))
    assert seen and not any(seen), "measured with the networks on the GPU"
    assert synth.tuning is record and "cpu" in record.device_ms
    assert synth.device.on_gpu is not chosen_by_auto
    d = load_synth_case(OUTPUTS / MODEL / f"{CASE}.npz")
    result = list(synth.synthesize(d["text"], injected_voice(synth, d), d["language"], greedy(d)))[-1]
    assert_codes(result.codes, d["codes"])
