"""Speaker encoder (x-vector) on ncnn against the official extract_speaker_embedding
(tests/fixtures/outputs/<model>/speaker_*.npz + outputs/common/audio_*.npz)."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from engine.convert import ConvertOptions
from engine.convert import speaker as conv
from engine.convert.checkpoint import Checkpoint
from engine.errors import AudioError, BundleError, ConvertError
from engine.io.audio import load_audio, mel_spectrogram
from engine.nets.speaker_encoder import SpeakerEncoder
from engine.runtime.bundle import Bundle
from engine.runtime.bundle_writer import BundleWriter
from tests.bundles import FIXTURES, MODELS, bundle_for

THREADS = 1  # shared machine; results do not depend on the thread count
PART = ["speaker"]
ATOL = 1e-4


def _cases() -> list[dict]:
    f = FIXTURES / "cases.json"
    if not f.is_file():
        return []
    entries = json.loads(f.read_text(encoding="utf-8"))["entries"]
    return [e for e in entries if e["kind"] == "speaker" and (FIXTURES / e["file"]).is_file()]


CASES = _cases()
IDS = [f"{e['model']}-{e['audio']}" for e in CASES]
_encoders: dict[tuple[str, str], SpeakerEncoder] = {}


def encoder(model: str, precision: str = "fp32") -> SpeakerEncoder:
    key = (model, precision)
    if key not in _encoders:
        _encoders[key] = SpeakerEncoder(Bundle.open(bundle_for(model, precision, parts=PART)), threads=THREADS)
    return _encoders[key]


def load_case(e: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    with np.load(FIXTURES / e["file"]) as z, np.load(FIXTURES / e["common"]) as c:
        return c["audio24k"], c["mel"], z["xvector"]


def test_fixtures_present():
    assert CASES, "no speaker fixtures: run tests/reference/make_fixtures.py"
    assert len({e["model"] for e in CASES}) >= 2
    assert max(e["mel_frames"] for e in CASES) > 3 * min(e["mel_frames"] for e in CASES), "need varied lengths"


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_xvector_from_official_mel(case):
    """The encoder alone: official mel in, x-vector within 1e-4 of the official."""
    _, mel, want = load_case(case)
    got = encoder(case["model"]).xvector_from_mel(mel)
    assert got.dtype == np.float32 and got.shape == want.shape == (case["dim"],)
    err = float(np.abs(got - want).max())
    print(f"{case['model']} {case['audio']} ({mel.shape[0]} frames): x-vector max abs error {err:.3g} "
          f"(|x| max {np.abs(want).max():.3g})")
    assert err <= ATOL


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_xvector_end_to_end(case):
    """Reference file -> load_audio -> mel -> encoder, as create_voice does."""
    _, _, want = load_case(case)
    got = encoder(case["model"]).xvector(load_audio(FIXTURES / "audio" / case["audio"]))
    err = float(np.abs(got - want).max())
    print(f"{case['model']} {case['audio']}: end-to-end x-vector max abs error {err:.3g}")
    assert err <= ATOL


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_reduced_precision_bundles(precision):
    """The encoder runs fp32 arithmetic in every bundle: a bf16 bundle (fp32 weights on disk) keeps full parity,
    an fp16 bundle differs only by its fp16-rounded weights (the fixture weights are bf16 values, exact in fp16)."""
    worst = 0.0
    for case in CASES:
        _, mel, want = load_case(case)
        got = encoder(case["model"], precision).xvector_from_mel(mel)
        worst = max(worst, float(np.abs(got - want).max()))
    print(f"{precision} bundle: worst x-vector max abs error {worst:.3g}")
    assert worst <= ATOL


def test_bf16_arithmetic_is_close():
    """Opting into the bundle's bf16 arithmetic: not parity (~0.5 % error), but the same vector."""
    worst_rel, worst_cos = 0.0, 0.0
    for case in CASES:
        _, mel, want = load_case(case)
        enc = SpeakerEncoder(Bundle.open(bundle_for(case["model"], "bf16", parts=PART)), THREADS, precision="bf16")
        got = enc.xvector_from_mel(mel)
        worst_rel = max(worst_rel, float(np.abs(got - want).max() / np.abs(want).max()))
        worst_cos = max(worst_cos, 1.0 - float(got @ want / np.linalg.norm(got) / np.linalg.norm(want)))
    print(f"bf16 arithmetic: worst max-abs error / max |x| = {worst_rel:.2e}, worst 1 - cosine = {worst_cos:.1e}")
    assert worst_rel <= 2e-2 and worst_cos <= 1e-4


def test_any_length():
    """No fixed window: the shortest legal mel and a long one both run; one frame fewer is refused clearly."""
    case = CASES[0]
    enc = encoder(case["model"])
    _, mel, _ = load_case(case)
    rng = np.random.default_rng(0)
    long = np.concatenate([mel] * 12)  # a minute-scale reference
    assert np.isfinite(enc.xvector_from_mel(long)).all()
    short = mel[: enc.min_frames]
    assert np.isfinite(enc.xvector_from_mel(short)).all()
    with pytest.raises(AudioError, match="too short"):
        enc.xvector_from_mel(mel[: enc.min_frames - 1])
    noise = (0.1 * rng.standard_normal(12000)).astype(np.float32)  # 0.5 s, the load_audio minimum
    assert mel_spectrogram(noise).shape[0] >= enc.min_frames
    assert np.isfinite(enc.xvector(noise)).all()


def test_bad_inputs():
    enc = encoder(CASES[0]["model"])
    with pytest.raises(AudioError):
        enc.xvector(np.zeros((2, 24000), np.float32))
    with pytest.raises(AudioError):
        enc.xvector(np.zeros(200, np.float32))
    with pytest.raises(AudioError):
        enc.xvector_from_mel(np.zeros(128, np.float32))


def test_deterministic():
    case = CASES[0]
    _, mel, _ = load_case(case)
    enc = encoder(case["model"])
    np.testing.assert_array_equal(enc.xvector_from_mel(mel), enc.xvector_from_mel(mel.copy()))


# -- converter --------------------------------------------------------------------------------------------


def _fixture_model() -> str:
    names = sorted({e["model"] for e in CASES})
    assert names, "no speaker fixtures among the committed fixtures"
    return names[0]


def _convert(tmp_path, ckpt, precision: str = "fp32"):
    with BundleWriter(tmp_path / "bundle") as w:
        w.manifest["precision"] = precision
        conv.convert(ckpt, w, ConvertOptions(precision))
        return Bundle.open(w.finish())


def test_spec_defaults_match_the_official_class():
    """Missing keys take Qwen3TTSSpeakerEncoderConfig's defaults (the 0.6B values)."""
    spec = conv.SpeakerSpec.from_config({"speaker_encoder_config": {"enc_dim": 2048}})
    assert spec.enc_dim == 2048
    assert spec.channels == (512, 512, 512, 512, 1536) and spec.kernels == (5, 3, 3, 3, 1)
    assert spec.dilations == (1, 2, 3, 4, 1) and (spec.attention, spec.scale, spec.se) == (128, 8, 128)
    assert conv.SpeakerSpec.from_config({}).enc_dim == 1024
    assert spec.max_pad == 4  # dilation 4, kernel 3


def test_spec_follows_the_fixture_config():
    model = _fixture_model()
    cfg = json.loads((MODELS / model / "config.json").read_text())["speaker_encoder_config"]
    spec = conv.SpeakerSpec.from_config({"speaker_encoder_config": cfg})
    assert spec.enc_dim == cfg["enc_dim"] and list(spec.channels) == cfg["enc_channels"]
    assert spec.scale == cfg["enc_res2net_scale"]
    info = Bundle.open(bundle_for(model, "fp32", parts=PART)).part("speaker")
    assert info["enc_dim"] == cfg["enc_dim"] and info["present"] is True


@pytest.mark.parametrize("bad,match", [
    ({"enc_kernel_sizes": [5, 3, 3]}, "same length"),
    ({"mel_dim": 80}, "128 mels"),
    ({"sample_rate": 16000}, "24000"),
    ({"enc_res2net_scale": 5}, "divisible"),
    ({"enc_channels": "wide"}, "bad value"),
])
def test_spec_rejects_bad_configs(bad, match):
    with pytest.raises(ConvertError, match=match):
        conv.SpeakerSpec.from_config({"speaker_encoder_config": bad})


def test_weights_must_match_config(tmp_path):
    ckpt = Checkpoint.open(MODELS / _fixture_model())
    try:
        ckpt.config = copy.deepcopy(ckpt.config)
        ckpt.config["speaker_encoder_config"]["enc_dim"] += 1
        with pytest.raises(ConvertError, match="shape"):
            _convert(tmp_path, ckpt)
    finally:
        ckpt.close()
    assert not (tmp_path / "bundle").exists()


class _NoSpeaker:
    """A CustomVoice-like checkpoint view: same tensors minus the speaker encoder."""

    def __init__(self, ckpt: Checkpoint):
        self._f = ckpt.main

    def keys(self) -> list[str]:
        return [k for k in self._f.keys() if not k.startswith(conv.PREFIX)]

    def __contains__(self, name: str) -> bool:
        return name in self.keys()


def test_model_without_speaker_encoder(tmp_path):
    ckpt = Checkpoint.open(MODELS / _fixture_model())
    try:
        ckpt.config = dict(ckpt.config, tts_model_type="custom_voice")
        ckpt.main = _NoSpeaker(ckpt)  # type: ignore[assignment]
        bundle = _convert(tmp_path, ckpt)
    finally:
        ckpt.main = ckpt.main._f if isinstance(ckpt.main, _NoSpeaker) else ckpt.main
        ckpt.close()
    assert bundle.part("speaker")["present"] is False
    assert not list(bundle.path.glob("speaker_encoder.*"))
    with pytest.raises(BundleError, match="no speaker encoder"):
        SpeakerEncoder(bundle)


def test_the_speaker_part_is_one_typed_record_and_old_manifests_still_read():
    """SpeakerPart: what the converter writes is what the network reads (a round trip through the manifest's
    JSON), a manifest written before it existed reads the same, and a wrong-typed value is one BundleError."""
    import json

    from engine.errors import BundleError
    from engine.runtime.manifest_parts import SpeakerPart

    old = {"present": True, "graph": "speaker", "input": "in0", "output": "out0", "mel_dim": 128, "enc_dim": 1024,
           "sample_rate": 24000, "min_frames": 5, "channels": [512, 512, 512, 512, 1536]}
    part = SpeakerPart.from_manifest(json.loads(json.dumps(old)))
    assert part.to_manifest() == old and part.enc_dim == 1024 and part.channels[-1] == 1536
    none = {"present": False, "model_type": "custom_voice"}
    assert SpeakerPart.from_manifest(none).to_manifest() == none and not SpeakerPart.from_manifest({}).present
    with pytest.raises(BundleError, match="'enc_dim' is not a whole number"):
        SpeakerPart.from_manifest({**old, "enc_dim": "1024"})
