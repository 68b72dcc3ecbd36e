"""Speech-tokenizer encoder on ncnn against the official encode (tests/fixtures/outputs/<model>/encoder_*.npz).

Each reference holds the official speech-tokenizer codes and points (key "common") to the official loaded
24 kHz waveform in outputs/common/; the encoder must reproduce the codes exactly from that waveform.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from engine.errors import AudioError
from engine.nets.codec_encoder import CodecEncoder, causal_mask
from engine.runtime.bundle import Bundle
from tests.bundles import FIXTURES, OUTPUTS, bundle_for, fixture_models
from tests.bundles import MODELS as MODEL_DIR

THREADS = 1  # the test machine is shared; results do not depend on the thread count
PART = ["codec_encoder"]


def _cases() -> list[tuple[str, str]]:
    return [(m, f.name) for m in fixture_models() for f in sorted((OUTPUTS / m).glob("encoder_*.npz"))]


CASES = _cases()
MODELS = sorted({m for m, _ in CASES})
_encoders: dict[tuple[str, str], CodecEncoder] = {}


def encoder(model: str, precision: str = "fp32") -> CodecEncoder:
    key = (model, precision)
    if key not in _encoders:
        _encoders[key] = CodecEncoder(Bundle.open(bundle_for(model, precision, parts=PART)), threads=THREADS)
    return _encoders[key]


def load_case(model: str, name: str) -> tuple[np.ndarray, np.ndarray]:
    """(official 24 kHz waveform, official codes); the waveform is shared by all models under common/."""
    with np.load(OUTPUTS / model / name) as z:
        codes, common = z["codes"], str(z["common"])
    with np.load(FIXTURES / common) as z:  # "outputs/common/audio_<stem>.npz", relative to tests/fixtures
        return z["audio24k"], codes


def longest_case(model: str) -> tuple[np.ndarray, np.ndarray]:
    cases = [load_case(m, n) for m, n in CASES if m == model]
    return max(cases, key=lambda c: len(c[0]))


def encoder_window(model: str) -> int:
    cfg = json.loads((MODEL_DIR / model / "speech_tokenizer" / "config.json").read_text(encoding="utf-8"))
    return int(cfg["encoder_config"]["sliding_window"])


def test_fixtures_present():
    assert CASES, "no encoder fixtures: run tests/reference/make_fixtures.py"
    for model in MODELS:
        audio, _ = longest_case(model)
        # the mask decision (window or not) is only tested by a reference longer than the window at 25 Hz
        assert math.ceil(len(audio) / 960) > encoder_window(model), f"{model}: no reference longer than the window"


@pytest.mark.parametrize("model,name", CASES)
def test_codes_match_official(model, name):
    audio, want = load_case(model, name)
    got = encoder(model).encode(audio)
    assert got.dtype == np.int64
    assert got.shape == want.shape == (math.ceil(len(audio) / 1920), 16)
    bad = np.argwhere(got != want)
    assert bad.size == 0, f"{len(bad)} of {want.size} codes differ; first (frame, level): {bad[:5].tolist()}"


@pytest.mark.parametrize("model", MODELS)
def test_chunks_and_blocks_are_exact(model):
    """Tiny conv chunks (much shorter than the left context) and transformer blocks of a few rows continuing
    from the KV cache give the official codes too."""
    audio, want = longest_case(model)
    bundle = Bundle.open(bundle_for(model, "fp32", parts=PART))
    enc = CodecEncoder(bundle, threads=THREADS, chunk_frames=3, block_frames=7)
    assert np.array_equal(enc.encode(audio), want)


@pytest.mark.parametrize("model", MODELS)
def test_sliding_window_is_not_applied(model):
    """The official encoder attends over the full causal past; a windowed mask gives other codes."""
    audio, want = longest_case(model)
    enc = encoder(model)
    assert enc.window is None
    window = encoder_window(model)
    enc.window = window
    try:
        windowed = enc.encode(audio)
    finally:
        enc.window = None
    assert not np.array_equal(windowed, want)
    # frames whose 25 Hz positions all lie inside the window are unaffected
    inside = window // 2
    assert np.array_equal(windowed[:inside], want[:inside])


@pytest.mark.parametrize("n", [1, 959, 960, 1919, 1920, 1921, 3841])
def test_frame_count(n):
    model = MODELS[0]  # IndexError when the committed encoder fixtures are missing: a failure, never a skip
    rng = np.random.default_rng(n)
    codes = encoder(model).encode((0.1 * rng.standard_normal(n)).astype(np.float32))
    assert codes.shape == (math.ceil(n / 1920), 16)
    assert codes.min() >= 0 and codes.max() < encoder(model).books.shape[1]


def test_mask():
    m = causal_mask(4, 4)
    assert np.array_equal(np.isfinite(m), np.tril(np.ones((4, 4), bool)))
    assert np.all(m[np.isfinite(m)] == 0)
    w = causal_mask(5, 5, window=2)
    assert np.array_equal(np.isfinite(w)[4], [False, False, False, True, True])
    b = causal_mask(2, 5)  # the last two of five positions
    assert np.array_equal(np.isfinite(b), [[True] * 4 + [False], [True] * 5])


@pytest.mark.parametrize("bad,msg", [
    (np.zeros(0, np.float32), "empty"),
    (np.zeros((2, 100), np.float32), "mono"),
    (np.zeros(100, np.int16), "float"),
    (np.array([0.0, np.nan] * 50, np.float32), "NaN"),
])
def test_bad_audio(bad, msg):
    model = MODELS[0]  # IndexError when the committed encoder fixtures are missing: a failure, never a skip
    with pytest.raises(AudioError, match=msg):
        encoder(model).encode(bad)


@pytest.mark.parametrize("model", MODELS)
def test_bf16_bundle_encodes_exactly(model):
    """bf16 bundles keep fp32 weights, and the encoder runs them in fp32: the official codes exactly."""
    enc = encoder(model, "bf16")
    assert enc.precision == "fp32"
    for m, name in CASES:
        if m == model:
            audio, want = load_case(model, name)
            assert np.array_equal(enc.encode(audio), want), name


@pytest.mark.parametrize("bundle_precision,run_precision", [("fp16", None), ("bf16", "bf16")])
@pytest.mark.parametrize("model", MODELS)
def test_lossy_precision_runs(model, bundle_precision, run_precision):
    """fp16 weights / bf16 activations are lossy (no parity claim); the semantic codes mostly agree."""
    audio, want = longest_case(model)
    bundle = Bundle.open(bundle_for(model, bundle_precision, parts=PART))
    enc = CodecEncoder(bundle, threads=THREADS, precision=run_precision)
    assert enc.precision == bundle_precision
    got = enc.encode(audio)
    assert got.shape == want.shape
    assert np.mean(got[:, 0] == want[:, 0]) > 0.9


def test_the_encoder_part_is_one_typed_record_and_the_manifests_read_back_byte_identical():
    """CodecEncoderPart: each fixture bundle's speech encoder part reads into the typed record and writes back to the
    same JSON bytes; a wrong-typed or missing value is one BundleError line naming the key."""
    from engine.errors import BundleError
    from engine.runtime.bundle import _Part
    from engine.runtime.manifest_parts import CodecEncoderPart

    parts = [Bundle.open(bundle_for(m)).manifest["parts"].get("codec_encoder") for m in fixture_models()]
    parts = [p for p in parts if p is not None]
    assert parts, "no fixture bundle has a speech encoder"
    for stored in parts:
        part = CodecEncoderPart.from_manifest(stored)
        assert json.dumps(part.to_manifest()) == json.dumps(stored)
        assert part.samples_per_frame == stored["samples_per_frame"] and part.tf_net == stored["tf_net"]
    stored = parts[0]
    for key, bad, says in [("hop", "480", "'hop' is not a whole number"),
                           ("levels", 0, "'levels' is 0, not a positive count"),
                           ("tf_net", 3, "'tf_net' is not a name"),
                           ("rope_theta", "x", "'rope_theta' is not a number"),
                           ("semantic_levels", stored["levels"] + 1, "'semantic_levels' .* is more than 'levels'")]:
        with pytest.raises(BundleError, match=says) as caught:
            CodecEncoderPart.from_manifest({**stored, key: bad})
        assert "\n" not in str(caught.value)
    with pytest.raises(BundleError, match="'receptive_field'") as caught:
        CodecEncoderPart.from_manifest(_Part.wrap({k: v for k, v in stored.items() if k != "receptive_field"}, "at"))
    assert "\n" not in str(caught.value)
