"""Every network on the GPU (ncnn's Vulkan backend) against the official implementation: greedy codes identical on
every fixture model, the x-vector and reference codes of our own front end too, the waveform within the bound
Vulkan's arithmetic allows; fp16 on the GPU with its error printed.

One short case per model: lavapipe (Mesa's Vulkan driver on the CPU, what CI installs) runs about 30x slower than
the CPU path. Skipped, with the reason, where ncnn sees no Vulkan device.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from engine import Synthesizer
from engine.runtime.device import list_gpus
from tests.bundles import OUTPUTS, bundle_for
from tests.test_kinds_parity import dropped, settings, voice_of
from tests.test_kinds_parity import load_case as load_kind_case
from tests.test_synth_parity import AUDIO, assert_codes, greedy, injected_voice
from tests.test_synth_parity import load_case as load_synth_case

pytestmark = pytest.mark.skipif(not list_gpus(), reason="no Vulkan device (CI installs lavapipe: mesa-vulkan-drivers "
                                                        "libvulkan1)")

PARTS = ("text", "talker", "codec_decoder")
FRONT_END = ("speaker", "codec_encoder")
# Vulkan allows sin/cos an absolute error of 2^-11 on [-pi, pi] and exp/log a few ULP (the spec's precision
# table): the decoder's Snake activations and the encoder's GELU are not bit-exact on any GPU. Measured on
# lavapipe against the official outputs: waveform 1.5e-4 to 3.4e-4, x-vector 6e-6 to 1.5e-5. The CPU bound for the
# waveform against the official one is 1e-3 (tests/test_kinds_parity.py); the GPU is held to the same.
WAV_ATOL = 1e-3
XVECTOR_ATOL = 1e-4  # the CPU path's bound (tests/test_synth_parity.py)
# (model, case, voice from our own front end on the GPU, audio streamed while generating)
BASE_CASES = [("tiny06b", "synth_icl_nonstream_48k", True, False), ("tiny17b", "synth_icl_nonstream_24k", False, True),
              ("tinyodd", "synth_xv_nonstream_22k", True, False)]
KIND_CASES = [("tinycv06b", "kind_cv_eric_en_no_dialect"), ("tinycv17b", "kind_cv_eric_auto_dialect"),
              ("tinyvd17b", "kind_vd_no_instruct")]


@functools.cache
def gpu_synth(model: str, front_end: bool = False, precision: str = "fp32") -> Synthesizer:
    parts = PARTS + (FRONT_END if front_end else ())
    synth = Synthesizer(bundle_for(model, "fp32", parts=parts), decoder_precision="fp32", device="gpu",
                        gpu_precision=precision)
    assert synth.device.on_gpu and synth.device.precision == precision
    return synth


@pytest.mark.parametrize("model, case, front_end, stream", BASE_CASES, ids=[c[0] for c in BASE_CASES])
def test_base_greedy_codes_on_the_gpu(model, case, front_end, stream):
    d = load_synth_case(OUTPUTS / model / f"{case}.npz")
    synth = gpu_synth(model, front_end)
    if front_end:  # speaker encoder and speech-tokenizer encoder on the GPU
        ref = str(AUDIO / d["ref_audio"])
        voice = synth.create_voice(ref, ref_text=d["ref_text"] if d["mode"] == "icl" else None)
        err = float(np.abs(voice.xvector - d["xvector"]).max())
        print(f"{model}: x-vector max abs err {err:.2e} on the GPU")
        assert err <= XVECTOR_ATOL
        if d["mode"] == "icl":
            np.testing.assert_array_equal(voice.ref_codes, d["ref_codes"])
    else:
        voice = injected_voice(synth, d)
    s = greedy(d)
    s.stream_audio = stream
    events = list(synth.synthesize(d["text"], voice, d["language"], s))
    result = events[-1]
    assert_codes(result.codes, d["codes"])
    assert result.ended_by == d["ended_by"]
    err = float(np.abs(result.audio - d["wav"]).max())
    print(f"{model}: waveform max abs err {err:.2e} on the GPU ({'streamed' if stream else 'decoded whole'})")
    assert result.audio.shape == d["wav"].shape and err <= WAV_ATOL


@pytest.mark.parametrize("model, case", KIND_CASES, ids=[c[0] for c in KIND_CASES])
def test_custom_voice_and_voice_design_on_the_gpu(model, case):
    d = load_kind_case(OUTPUTS / model / f"{case}.npz")
    synth = gpu_synth(model)
    with dropped(synth, d):
        result = list(synth.synthesize(d["text"], voice_of(d), d["language"], settings(d, d["non_streaming"]),
                                       instruct=d["instruct"]))[-1]
    assert_codes(result.codes, d["codes"])
    np.testing.assert_allclose(result.audio, d["wav"], rtol=0, atol=WAV_ATOL)


def test_fp16_on_the_gpu_error_printed():
    """fp16 storage and arithmetic on the GPU: lossy, so reported: the talker's teacher-forced logits and the
    waveform of the same codes against the official ones (loose bounds, as for the CPU's fp16 bundles)."""
    model, case = "tiny06b", "synth_xv_nonstream_16k"
    d = load_synth_case(OUTPUTS / model / f"{case}.npz")
    synth = gpu_synth(model, precision="fp16")
    talker, cp = synth._talker, synth._code_predictor
    seq, _, logits = talker.start(d["prefill"])
    errs = [_rel(logits, d["logits"][0])]
    tpad = synth._text_rows([synth._ids.tts_pad])[0]
    for k in range(1, min(len(d["logits"]), len(d["codes"]) + 1)):
        row = d["trailing"][k - 1] if k - 1 < len(d["trailing"]) else tpad
        _, logits = talker.step(seq, cp.feedback(d["codes"][k - 1]) + row)
        errs.append(_rel(logits, d["logits"][k]))
    wav = synth.decode(d["codes"])
    noise = float(((wav - d["wav"]) ** 2).sum())
    snr = 10 * np.log10(float((d["wav"] ** 2).sum()) / max(noise, 1e-30))
    print(f"{model} GPU fp16: talker logits max rel err {max(errs):.2e}, waveform max abs err "
          f"{np.abs(wav - d['wav']).max():.2e} (SNR {snr:.1f} dB)")
    assert max(errs) < 0.1 and snr > 20.0


def test_every_network_is_on_the_gpu():
    """Each net a GPU synthesizer loads runs on the Vulkan device: its options say so and every layer is one of
    ncnn's Vulkan ones (the Squeeze layers, which have none, become Noops there: engine/runtime/sequence_net.py)."""
    synth = gpu_synth("tiny06b", True)  # the first test's synthesizer (functools.cache keys by the call's form)
    voice_nets = [synth._speaker_encoder._net, synth._codec_encoder.conv_net, synth._codec_encoder.tf_net,
                  synth._codec_encoder.down_net, synth._codec_encoder.rvq_net]
    nets = [synth._talker.net.net, synth._code_predictor.net.net, synth._decoder._net, *voice_nets]
    for net in nets:
        assert net.opt.use_vulkan_compute and not net.opt.use_fp16_storage and not net.opt.use_fp16_arithmetic
        on_cpu = {layer.type for layer in net.layers() if not layer.support_vulkan}
        assert not on_cpu, on_cpu


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-12))

