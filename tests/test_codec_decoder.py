"""Codec decoder on ncnn against the official speech-tokenizer decode (tests/fixtures/outputs/<model>/decoder_T*.npz).

The references are the official chunked_decode(300, 25) outputs made by tests/reference/make_fixtures.py.
"""

from __future__ import annotations

import copy

import ncnn
import numpy as np
import pytest
import soundfile as sf

from engine.errors import EngineError
from engine.nets.codec_decoder import BLOCK_FRAMES, LEFT_CONTEXT, CodecDecoder, CodesError
from engine.runtime.bundle import Bundle, make_net_options
from engine.runtime.cpu import has_bf16_dot_product
from engine.runtime.ncnn_graph import Graph, raw, tagged
from qwen3tts_cli.main import main as cli_main
from tests.bundles import OUTPUTS, bundle_for, fixture_models

THREADS = 1  # the test machine is shared; results do not depend on the thread count
PART = ["codec_decoder"]


def _cases() -> list[tuple[str, str]]:
    out = []
    for model in fixture_models():
        for f in sorted((OUTPUTS / model).glob("decoder_T*.npz"), key=lambda p: int(p.stem.split("_T")[1])):
            out.append((model, f.name))
    return out


CASES = _cases()
MODELS = sorted({m for m, _ in CASES})
LONG_MODELS = sorted({m for m, n in CASES if int(n.split("_T")[1].split(".")[0]) > 300 + LEFT_CONTEXT})
_decoders: dict[tuple[str, str], CodecDecoder] = {}


def decoder(model: str, precision: str = "fp32", decoder_precision: str = "fp32") -> CodecDecoder:
    """The decoder of the fixture `model` converted at `precision`; exactness tests run it in fp32 explicitly
    (the default, "auto", runs bf16 convolutions on CPUs with AVX512-BF16)."""
    key = (model, precision, decoder_precision)
    if key not in _decoders:
        _decoders[key] = CodecDecoder(Bundle.open(bundle_for(model, precision, parts=PART)), threads=THREADS,
                                      precision=decoder_precision)
    return _decoders[key]


def load_case(model: str, name: str) -> tuple[np.ndarray, np.ndarray]:
    with np.load(OUTPUTS / model / name) as z:
        return z["codes"], z["wav"]


def longest_case(model: str) -> tuple[np.ndarray, np.ndarray]:
    names = [n for m, n in CASES if m == model]
    return load_case(model, names[-1])


def test_fixtures_present():
    assert CASES, "no decoder fixtures: run tests/reference/make_fixtures.py"
    lengths = {int(n.split("_T")[1].split(".")[0]) for _, n in CASES}
    assert max(lengths) > 325, "a fixture longer than one official chunk (325 frames) is required"


@pytest.mark.parametrize("model,name", CASES)
def test_decode_matches_official(model, name):
    codes, want = load_case(model, name)
    dec = decoder(model)
    got = dec.decode(codes)
    assert got.dtype == np.float32
    assert got.shape == (codes.shape[0] * dec.samples_per_frame,) == want.shape
    err = float(np.abs(got - want).max())
    print(f"{model} {name}: max abs err {err:.2e}")
    assert err <= 1e-4


@pytest.mark.parametrize("model", MODELS)
def test_streaming_equals_whole(model):
    codes, want = longest_case(model)
    dec = decoder(model)
    whole = dec.decode(codes)
    stream = dec.stream()
    sizes = [1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 1, 1, 144]
    parts, i, k = [], 0, 0
    while i < len(codes):
        n = sizes[k % len(sizes)]
        chunk = stream.push(codes[i:i + n])
        assert chunk.shape == (min(n, len(codes) - i) * dec.samples_per_frame,)  # no latency
        parts.append(chunk)
        i += n
        k += 1
    streamed = np.concatenate(parts)
    assert streamed.shape == whole.shape
    assert float(np.abs(streamed - whole).max()) <= 1e-4
    assert float(np.abs(streamed - want).max()) <= 1e-4


@pytest.mark.parametrize("model", LONG_MODELS)
def test_chunk_seam_uses_official_left_context(model):
    """Past 300 frames the official decode restarts a fresh forward from 25 frames of context."""
    codes, want = longest_case(model)
    assert len(codes) > 300 + LEFT_CONTEXT
    dec = decoder(model)
    got = dec.decode(codes)
    seam = slice(300 * dec.samples_per_frame, 301 * dec.samples_per_frame)
    assert float(np.abs(got[seam] - want[seam]).max()) <= 1e-4


def test_single_frame_and_empty():
    model = MODELS[0]
    codes, want = longest_case(model)
    dec = decoder(model)
    one = dec.decode(codes[:1])
    assert one.shape == (dec.samples_per_frame,)
    # causal: the first frame's audio does not depend on later frames
    assert float(np.abs(one - want[: dec.samples_per_frame]).max()) <= 1e-4
    assert dec.decode(np.zeros((0, dec.num_quantizers), np.int64)).shape == (0,)


def test_one_frame_push_accepts_1d():
    model = MODELS[0]
    codes, want = longest_case(model)
    dec = decoder(model)
    s = dec.stream()
    a = s.push(codes[0])
    b = s.push(codes[1:3])
    got = np.concatenate([a, b])
    assert float(np.abs(got - want[: 3 * dec.samples_per_frame]).max()) <= 1e-4


@pytest.mark.parametrize(
    "codes,words",
    [
        (np.zeros((4, 15), np.int64), "shape"),
        (np.zeros((4,), np.int64), "shape"),
        (np.zeros((2, 4, 16), np.int64), "shape"),
        (np.full((3, 16), -1, np.int64), "out of range"),
        (np.full((3, 16), 0.5), "integers"),
        (np.array([["a"] * 16]), "integers"),
    ],
)
def test_bad_codes_raise_clear_errors(codes, words):
    dec = decoder(MODELS[0])
    with pytest.raises(CodesError) as e:
        dec.decode(codes)
    assert isinstance(e.value, EngineError)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_code_at_codebook_size_is_rejected():
    dec = decoder(MODELS[0])
    codes = np.zeros((5, dec.num_quantizers), np.int64)
    codes[3, 7] = dec.codebook_sizes[7]
    with pytest.raises(CodesError, match="frame 3, group 7"):
        dec.decode(codes)
    with pytest.raises(CodesError):
        dec.stream().push(codes)
    codes[3, 7] -= 1
    assert dec.decode(codes).shape == (5 * dec.samples_per_frame,)
    assert dec.decode(codes.astype(np.float64)).shape == (5 * dec.samples_per_frame,)  # integral floats are ok


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
@pytest.mark.parametrize("model", MODELS)
def test_reduced_precision_decodes_close(model, precision):
    codes, want = longest_case(model)
    got = decoder(model, precision).decode(codes)
    assert got.shape == want.shape and np.isfinite(got).all()
    noise = float(((got - want) ** 2).sum())
    snr = 10 * np.log10(float((want**2).sum()) / max(noise, 1e-30))
    print(f"{model} {precision}: max abs err {np.abs(got - want).max():.3g}, SNR {snr:.1f} dB")
    assert snr > 20.0


def test_cli_decode_writes_wav(tmp_path, capsys):
    model = MODELS[0]
    codes, want = longest_case(model)
    codes = codes[:40]
    npy = tmp_path / "codes.npy"
    np.save(npy, codes)
    bundle = bundle_for(model, parts=PART)
    out = tmp_path / "out.wav"
    assert cli_main(["decode", "--model", str(bundle), "--codes", str(npy), "-o", str(out), "--float",
                     "--threads", "1", "--decoder-precision", "fp32"]) == 0
    wav, sr = sf.read(out, dtype="float32")
    assert sr == 24000 and sf.info(out).subtype == "FLOAT"
    assert float(np.abs(wav - want[: len(wav)]).max()) <= 1e-4 and len(wav) == 40 * 1920
    out16 = tmp_path / "out16.wav"  # the default, as in the app: 16-bit PCM
    assert cli_main(["decode", "--model", str(bundle), "--codes", str(npy), "-o", str(out16),
                     "--threads", "1", "--decoder-precision", "fp32"]) == 0
    assert sf.info(out16).subtype == "PCM_16"
    wav16, _ = sf.read(out16, dtype="float32")
    # 16-bit: half a step of rounding plus libsndfile's 32767-vs-32768 scale (at most one step at full scale),
    # on top of the decoder's fp32 tolerance
    assert float(np.abs(wav16 - want[: len(wav16)]).max()) <= 1.5 / 32768 + 1e-4 and len(wav16) == 40 * 1920
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp files left
    outbf = tmp_path / "bf16.wav"
    assert cli_main(["decode", "--model", str(bundle), "--codes", str(npy), "-o", str(outbf), "--float",
                     "--threads", "1", "--decoder-precision", "bf16"]) == 0
    np.testing.assert_array_equal(sf.read(outbf, dtype="float32")[0],
                                  decoder(model, decoder_precision="bf16").decode(codes))


def test_cli_decode_bad_codes_one_line(tmp_path, capsys):
    bundle = bundle_for(MODELS[0], parts=PART)
    bad = tmp_path / "bad.npy"
    np.save(bad, np.zeros((3, 7), np.int64))
    out = tmp_path / "x.wav"
    assert cli_main(["decode", "--model", str(bundle), "--codes", str(bad), "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("qwen3tts: ") and "\n" not in err and "shape" in err
    assert not out.exists()
    junk = tmp_path / "junk.npy"
    junk.write_bytes(b"not numpy")
    assert cli_main(["decode", "--model", str(bundle), "--codes", str(junk), "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "Cannot read codes" in err and "\n" not in err


def test_thread_count_change_reloads_and_decodes_the_same():
    """Changing threads reloads the network (ncnn's convolution gemm keeps its load-time count); same audio."""
    model = MODELS[0]
    dec = CodecDecoder(Bundle.open(bundle_for(model, "fp32", parts=PART)), threads=2)
    codes, _want = longest_case(model)
    codes = codes[:40]
    two = dec.decode(codes)
    net = dec._net
    dec.threads = 1
    assert dec.threads == 1 and dec._net is not net
    np.testing.assert_array_equal(dec.decode(codes), two)  # threads split the outputs, not the sums
    with pytest.raises(EngineError, match="at least one thread"):
        dec.threads = 0


# -- bf16 convolutions (precision "bf16"): everything but the vocoder's big convolutions stays fp32 ---------------

NO_BF16 = 1 << 2  # ncnn featmask bit: the layer ignores use_bf16_storage


def _unit_roundoff_bf16() -> float:
    """ncnn rounds fp32 -> bf16 to nearest even with AVX512-BF16 (unit roundoff 2^-8) and by truncation without
    it (relative error below 2^-7)."""
    return 2.0**-8 if has_bf16_dot_product() else 2.0**-7


def _bf16_convs_on_path(model: str) -> int:
    """bf16 convolutions a sample passes through: per vocoder block the transposed convolution (polyphase) and
    three residual units of two convolutions (engine/convert/codec_decoder.py BF16_ROLES)."""
    rates = Bundle.open(bundle_for(model, parts=PART)).manifest["speech_config"]["decoder_config"]["upsample_rates"]
    return 7 * len(rates)


def _graph_layers(model: str) -> list[tuple[str, str, list[str], list[str], int]]:
    """(type, name, inputs, outputs, featmask) of every layer of the fixture's decoder graph."""
    text = (bundle_for(model, parts=PART) / "codec_decoder.param").read_text(encoding="utf-8").splitlines()
    layers = []
    for line in text[2:]:
        words = line.split()
        n_in, n_out = int(words[2]), int(words[3])
        ins, outs = words[4:4 + n_in], words[4 + n_in:4 + n_in + n_out]
        params = dict(w.split("=", 1) for w in words[4 + n_in + n_out:])
        layers.append((words[0], words[1], ins, outs, int(params.get("31", 0))))
    return layers


@pytest.mark.parametrize("model", MODELS)
def test_only_the_vocoder_convolutions_may_run_in_bf16(model):
    """Every layer carries the no-bf16 bit except the vocoder's convolutions and the identity Cast right after
    each (which hands fp32 on); the state tails (Concat/Crop), SnakeBeta, the adds, the transformer, the Splits
    the writer adds, the first and the last convolution stay fp32."""
    layers = _graph_layers(model)
    free = [layer for layer in layers if not layer[4] & NO_BF16]
    convs = [layer for layer in free if layer[0] == "Convolution"]
    casts = [layer for layer in free if layer[0] == "Cast"]
    assert len(convs) == len(casts) == _bf16_convs_on_path(model)
    assert len(free) == len(convs) + len(casts)  # nothing else
    producer = {out: layer for layer in layers for out in layer[3]}
    consumers: dict[str, int] = {}
    for layer in layers:
        for b in layer[2]:
            consumers[b] = consumers.get(b, 0) + 1
    for cast in casts:
        assert producer[cast[2][0]][0] == "Convolution" and not producer[cast[2][0]][4] & NO_BF16
    for conv in convs:
        assert consumers[conv[3][0]] == 1  # its only consumer is its Cast
    assert decoder(model).info.bf16_layers is True
    kinds = {layer[0] for layer in layers if layer[4] & NO_BF16}
    assert {"Concat", "Crop", "Split", "UnaryOp", "Scale", "BinaryOp", "SDPA", "Convolution", "Clip"} <= kinds


def _bf16_bound(model: str, reference: np.ndarray) -> float:
    """How far the bf16 decode may be from the fp32 one, derived from the arithmetic.

    A bf16 convolution rounds its inputs and its weights to bf16 (relative error <= u each), sums the products in
    fp32 and rounds its outputs to bf16 (<= u): each output moves by at most (2u + u^2) * sum|w*x| + u*|y|, about
    3u times its magnitude (the array's own magnitude standing in for sum|w*x|, as in
    tests/parity_live/tolerances.py). Every other layer is fp32 (the graph test above). To first order the
    relative errors of the convolutions along a sample's path add (tolerances.py: normalised networks keep
    relative errors from growing): 3 * u * N * max|reference| with N the bf16 convolutions on the path. fp32's own
    rounding (1e-4 against the official decoder) is far below it."""
    return 3 * _unit_roundoff_bf16() * _bf16_convs_on_path(model) * float(np.abs(reference).max())


@pytest.mark.parametrize("model", MODELS)
def test_bf16_decode_within_the_derived_bound(model):
    codes, want = longest_case(model)
    exact = decoder(model).decode(codes)
    got = decoder(model, decoder_precision="bf16").decode(codes)
    assert decoder(model, decoder_precision="bf16").precision == "bf16"
    assert got.shape == exact.shape and np.isfinite(got).all()
    err = float(np.abs(got - exact).max())
    snr = 10 * np.log10(float((exact**2).sum()) / max(float(((got - exact) ** 2).sum()), 1e-30))
    print(f"{model} bf16: max abs err {err:.3g} (bound {_bf16_bound(model, exact):.3g}), SNR {snr:.1f} dB vs fp32")
    assert err <= _bf16_bound(model, exact)
    assert float(np.abs(got - want).max()) <= _bf16_bound(model, want) + 1e-4  # + fp32's own tolerance
    assert not np.array_equal(got, exact)  # the convolutions really ran in bf16


@pytest.mark.parametrize("model", MODELS)
def test_bf16_streaming(model):
    """Pushed in the whole decode's blocks, streaming is the whole decode bit for bit (same computations: the
    state tails are exact fp32); pushed in other sizes it stays within the bf16 bound (a convolution's fp32 sums
    may round to the other neighbouring bf16 value when its block width changes)."""
    codes, _want = longest_case(model)
    dec = decoder(model, decoder_precision="bf16")
    whole = dec.decode(codes)
    stream = dec.stream()
    blocks = [stream.push(codes[i:i + BLOCK_FRAMES]) for i in range(0, len(codes), BLOCK_FRAMES)]
    np.testing.assert_array_equal(np.concatenate(blocks), whole)
    stream = dec.stream()
    sizes = [1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 1, 1, 144]
    parts, i, k = [], 0, 0
    while i < len(codes):
        n = sizes[k % len(sizes)]
        parts.append(stream.push(codes[i:i + n]))
        assert parts[-1].shape == (min(n, len(codes) - i) * dec.samples_per_frame,)  # no latency
        i += n
        k += 1
    exact = decoder(model).decode(codes)
    assert float(np.abs(np.concatenate(parts) - exact).max()) <= _bf16_bound(model, exact)


def _fp32_valued(a: np.ndarray) -> float:
    """Share of the non-zero, unclipped values whose low 16 bits are not all zero (a bf16 value has none)."""
    v = np.ascontiguousarray(a, np.float32).reshape(-1)
    v = v[(v != 0) & (np.abs(v) < 1)]
    return float(np.mean((v.view(np.uint32) & 0xFFFF) != 0)) if v.size else 1.0


@pytest.mark.parametrize("model", MODELS)
def test_bf16_run_keeps_state_and_audio_in_fp32(model):
    """The state handed to the next block (convolution tails, keys and values) and the audio are fp32 values,
    not bf16 ones, in a bf16 run: so streaming state does not drift and the output is not quantised to 8 bits."""
    codes, _want = longest_case(model)
    dec = decoder(model, decoder_precision="bf16")
    run = dec._new_run()
    wav = run.step(dec.latent(codes[:BLOCK_FRAMES]))
    assert _fp32_valued(wav) > 0.5
    for name, arr in zip([s.name for s in dec._states], run.conv, strict=True):
        assert _fp32_valued(arr) > 0.5, name
    for arr in run.kv:
        assert _fp32_valued(arr) > 0.5


def test_bf16_convolution_rounds_as_the_bound_assumes(tmp_path):
    """The premise of the bound: ncnn's bf16 convolution rounds inputs, weights and outputs to bf16 (to nearest
    even with AVX512-BF16, truncating without) and sums in fp32. One k7 convolution against numpy."""
    rng = np.random.default_rng(1)
    cin, cout, k, width = 32, 48, 7, 64
    w = (rng.standard_normal((cout, cin, k)) / np.sqrt(cin * k)).astype(np.float32)
    bias = (0.1 * rng.standard_normal(cout)).astype(np.float32)
    x = rng.standard_normal((cin, 1, width + k - 1)).astype(np.float32)
    g = Graph()
    g.layer("Convolution", [g.input("x")], params={0: cout, 1: k, 11: 1, 5: 1, 6: w.size},
            weights=[tagged(w), raw(bias)], name="y")
    g.save(tmp_path / "conv.param", tmp_path / "conv.bin")
    net = ncnn.Net()
    make_net_options(net, "bf16", threads=1)
    assert net.load_param(str(tmp_path / "conv.param")) == 0 and net.load_model(str(tmp_path / "conv.bin")) == 0
    ex = net.create_extractor()
    ex.input("x", ncnn.Mat(x))
    ret, mat = ex.extract("y")
    assert ret == 0
    got = np.array(mat)[:, 0, :]
    rnd = _round_bf16_nearest if has_bf16_dot_product() else _truncate_bf16
    xb, wb = rnd(x[:, 0, :]).astype(np.float64), rnd(w).astype(np.float64)
    want = sum(wb[:, :, t] @ xb[:, t:t + width] for t in range(k)) + bias[:, None]
    want = rnd(want.astype(np.float32))
    # fp32 sums in another order may land on the other side of a bf16 rounding boundary: one bf16 step at most
    step = np.abs(want) * 2.0**-7
    assert np.all(np.abs(got - want) <= step + 1e-30)
    assert np.mean(got == want) > 0.9


def _round_bf16_nearest(a: np.ndarray) -> np.ndarray:
    u = np.ascontiguousarray(a, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000).astype(np.uint32).view(np.float32)


def _truncate_bf16(a: np.ndarray) -> np.ndarray:
    return (np.ascontiguousarray(a, np.float32).view(np.uint32) & 0xFFFF0000).view(np.float32)


def test_bundle_without_bf16_marks_runs_fp32_or_is_refused():
    """An older bundle (no per-layer marks, no manifest flag) would run every layer in bf16 with bf16 storage on:
    "auto" runs it in fp32, "bf16" is refused in one sentence."""
    model = MODELS[0]
    bundle = Bundle.open(bundle_for(model, parts=PART))
    manifest = copy.deepcopy(bundle.manifest)
    del manifest["parts"]["codec_decoder"]["bf16_layers"]
    old = Bundle(bundle.path, manifest)
    dec = CodecDecoder(old, threads=THREADS, precision="auto")
    assert dec.precision == "fp32"
    codes, _want = longest_case(model)
    np.testing.assert_array_equal(dec.decode(codes[:30]), decoder(model).decode(codes[:30]))
    with pytest.raises(EngineError, match="converted before bf16 decoding") as e:
        CodecDecoder(old, threads=THREADS, precision="bf16")
    assert "\n" not in str(e.value)


def test_auto_precision_follows_the_cpu(monkeypatch):
    """auto: bf16 where the CPU has AVX512-BF16 (ncnn's native bf16 kernels), fp32 elsewhere (emulated bf16 is
    slower than fp32). An explicit "bf16" runs anyway (correct, within the bound: tested above on this CPU)."""
    import engine.nets.codec_decoder as cd

    bundle = Bundle.open(bundle_for(MODELS[0], parts=PART))
    monkeypatch.setattr(cd, "has_bf16_dot_product", lambda: False)
    assert cd.decoder_net_precision(bundle, "auto") == "fp32"
    assert cd.decoder_net_precision(bundle, "bf16") == "bf16"
    monkeypatch.setattr(cd, "has_bf16_dot_product", lambda: True)
    assert cd.decoder_net_precision(bundle, "auto") == "bf16"
    assert cd.decoder_net_precision(bundle, "fp32") == "fp32"


@pytest.mark.parametrize("bad", ["fast", "FP32", "", None, 16])
def test_bad_precision_name_is_refused(bad):
    bundle = Bundle.open(bundle_for(MODELS[0], parts=PART))
    with pytest.raises(EngineError, match="Unknown speech decoder precision") as e:
        CodecDecoder(bundle, threads=THREADS, precision=bad)
    assert "\n" not in str(e.value) and str(e.value).endswith(".")


@pytest.mark.parametrize("model,precision", [(m, "fp32") for m in fixture_models()] + [(fixture_models()[0], "fp16")])
def test_the_decoder_part_is_one_typed_record_and_the_manifests_read_back_byte_identical(model, precision):
    """CodecDecoderPart: each fixture bundle's speech decoder part reads into the typed record and writes back to the
    same JSON bytes; a decoder part made before the bf16 marks reads unmarked and writes back without them; a
    wrong-typed or missing value is one BundleError line."""
    import json

    from engine.errors import BundleError
    from engine.nets.codec_decoder import decoder_part
    from engine.runtime.bundle import _Part
    from engine.runtime.manifest_parts import CodecDecoderPart

    bundle = Bundle.open(bundle_for(model, precision))
    stored = bundle.manifest["parts"]["codec_decoder"]
    part = decoder_part(bundle)
    assert json.dumps(part.to_manifest()) == json.dumps(stored)
    assert part.states[0].name == stored["states"][0]["name"] and part.codebook_sizes == tuple(stored["codebook_sizes"])
    old = {k: v for k, v in stored.items() if k != "bf16_layers"}
    assert json.dumps(CodecDecoderPart.from_manifest(old).to_manifest()) == json.dumps(old)
    assert not CodecDecoderPart.from_manifest(old).bf16_layers
    for key, bad, says in [("num_quantizers", 1.5, "'num_quantizers' is not a whole number"),
                           ("upsample", -4, "'upsample' is -4, not a positive count"),
                           ("sliding_window", "72", "'sliding_window' is not a whole number"),
                           ("states", {"a": 1}, "'states' is not a list of tables"),
                           ("outputs", [1], "'outputs' is not a list of names"),
                           ("codebook_offsets", [0], "codebook sizes and 1 offsets")]:
        with pytest.raises(BundleError, match=says) as caught:
            CodecDecoderPart.from_manifest({**stored, key: bad})
        assert "\n" not in str(caught.value)
    with pytest.raises(BundleError, match="its states: 'width' is not a whole number") as caught:
        CodecDecoderPart.from_manifest({**stored, "states": [{**stored["states"][0], "width": None}]})
    with pytest.raises(BundleError, match="'past'") as caught:
        CodecDecoderPart.from_manifest(_Part.wrap({k: v for k, v in stored.items() if k != "past"}, "where"))
    assert "\n" not in str(caught.value)
