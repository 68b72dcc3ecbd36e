"""Codec decoder on ncnn against the official speech-tokenizer decode (tests/fixtures/outputs/<model>/decoder_T*.npz).

The references are the official chunked_decode(300, 25) outputs made by tests/reference/make_fixtures.py.
"""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf

from engine.bundle import Bundle
from engine.cli import main as cli_main
from engine.codec_decoder import LEFT_CONTEXT, CodecDecoder, CodesError
from engine.errors import EngineError
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
                     "--threads", "1"]) == 0
    wav, sr = sf.read(out, dtype="float32")
    assert sr == 24000 and sf.info(out).subtype == "FLOAT"
    assert float(np.abs(wav - want[: len(wav)]).max()) <= 1e-4 and len(wav) == 40 * 1920
    out16 = tmp_path / "out16.wav"  # the default, as in the app: 16-bit PCM
    assert cli_main(["decode", "--model", str(bundle), "--codes", str(npy), "-o", str(out16),
                     "--threads", "1"]) == 0
    assert sf.info(out16).subtype == "PCM_16"
    wav16, _ = sf.read(out16, dtype="float32")
    # 16-bit: half a step of rounding plus libsndfile's 32767-vs-32768 scale (at most one step at full scale),
    # on top of the decoder's fp32 tolerance
    assert float(np.abs(wav16 - want[: len(wav16)]).max()) <= 1.5 / 32768 + 1e-4 and len(wav16) == 40 * 1920
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp files left


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
