"""Whisper on ncnn + numpy against transformers (the committed fixtures of tests/reference/make_whisper_fixtures.py):
log-mel within 1e-4, greedy token ids and text identical, the detected language identical; and bad input in one line.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import engine
from engine.convert import convert_checkpoint
from engine.recognition import features

WHISPER = Path(__file__).resolve().parent / "fixtures" / "whisper"
MODELS = ("tinywhisper80", "tinywhisper128")
INDEX = json.loads((WHISPER / "audio" / "index.json").read_text(encoding="utf-8"))
MEL_TOLERANCE = 1e-4


def _cases() -> list[tuple[str, str, str]]:
    cases = []
    for model in MODELS:
        for f in sorted((WHISPER / "outputs" / model).glob("*.npz")):
            with np.load(f) as d:
                cases += [(model, f.stem, case) for case in ("detect", "given") if f"{case}_ids" in d.files]
    assert len(cases) >= 2 * 11, "the committed Whisper outputs are missing (make_whisper_fixtures.py)"
    return cases


def _clip(stem: str) -> Path:
    (entry,) = [c for c in INDEX if c["file"].rsplit(".", 1)[0] == stem]
    return WHISPER / "audio" / entry["file"]


@pytest.fixture(scope="module")
def bundles(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("whisper-bundles")
    return {m: convert_checkpoint(WHISPER / "models" / m, root / m) for m in MODELS}


@pytest.fixture(scope="module")
def transcribers(bundles) -> dict[str, engine.Transcriber]:
    return {m: engine.Transcriber(path, threads=2) for m, path in bundles.items()}


@pytest.mark.parametrize("model", MODELS)
def test_log_mel_within_1e4_of_the_reference_on_every_clip(model, transcribers):
    worst = 0.0
    for f in sorted((WHISPER / "outputs" / model).glob("*.npz")):
        with np.load(f) as d:
            reference = d["logmel"]
        if f.stem.startswith("silence"):
            with pytest.raises(engine.AudioError, match="silent"):
                transcribers[model].features(_clip(f.stem))
            samples = np.zeros(48000, np.float32)
            ours = features.log_mel(samples, reference.shape[0])
        else:
            ours, _ = transcribers[model].features(_clip(f.stem))
        assert ours.shape == reference.shape
        worst = max(worst, float(np.max(np.abs(ours - reference))))
    assert worst <= MEL_TOLERANCE, worst


@pytest.mark.parametrize("model,stem,case", _cases())
def test_greedy_tokens_and_language_identical_to_transformers(model, stem, case, transcribers):
    with np.load(WHISPER / "outputs" / model / f"{stem}.npz") as d:
        ref = {k: d[k] for k in d.files}
    language = str(ref[f"{case}_language"]) or None
    t = transcribers[model]
    if stem.startswith("silence"):  # refused by transcribe(); the window itself still decodes as the reference's
        result = t.transcribe_features(ref["logmel"], language)
    else:
        result = t.transcribe(_clip(stem), language)
    assert list(result.token_ids) == ref[f"{case}_ids"].tolist()
    assert result.text == str(ref[f"{case}_text"]).strip()
    assert result.complete == (len(result.token_ids) + len(result.prompt_ids) < 448)
    if language is None:
        assert result.language_detected
        assert result.prompt_ids[1] == int(ref[f"{case}_lang_id"])
        assert t.rules.languages[result.language] == int(ref[f"{case}_lang_id"])
    else:
        assert not result.language_detected and result.language == language


def test_the_128_bin_model_has_the_100th_language(transcribers):
    assert transcribers["tinywhisper128"].languages[-1] == "yue"
    assert len(transcribers["tinywhisper80"].languages) == 99
    with pytest.raises(engine.LanguageError, match="yue"):
        transcribers["tinywhisper80"].check_language("yue")


def test_a_language_by_code_token_or_name(transcribers):
    t = transcribers["tinywhisper80"]
    assert t.check_language("de") == t.check_language("<|de|>") == t.check_language("German") == "de"
    assert t.check_language(None) is None


def test_convert_recognises_whisper_by_its_config(bundles):
    assert engine.is_whisper_bundle(bundles["tinywhisper80"])
    manifest = json.loads((bundles["tinywhisper80"] / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["model"] == "whisper" and manifest["config"]["model_type"] == "whisper"
    assert not engine.is_whisper_bundle(WHISPER / "models" / "tinywhisper80")


def test_q8_is_refused_for_whisper_in_one_line(tmp_path):
    with pytest.raises(engine.ConvertError, match="fp32 or fp16"):
        convert_checkpoint(WHISPER / "models" / "tinywhisper80", tmp_path / "b", precision="q8")
    assert not (tmp_path / "b").exists()


def test_an_fp16_bundle_gives_the_same_tokens(tmp_path):
    """The fixture weights are fp16-exact, so an fp16 bundle holds the same numbers."""
    bundle = convert_checkpoint(WHISPER / "models" / "tinywhisper80", tmp_path / "b16", precision="fp16")
    with np.load(WHISPER / "outputs" / "tinywhisper80" / "de_8k_4s.npz") as d:
        ref = d["detect_ids"].tolist()
    assert list(engine.transcribe_file(bundle, _clip("de_8k_4s")).token_ids) == ref


# ------------------------------------------------------------------------------------------------- bad input

def test_a_tts_bundle_given_to_the_transcriber_says_what_it_is(tmp_path):
    from tests.bundles import bundle_for

    with pytest.raises(engine.BundleError, match="not a speech-recognition"):
        engine.Transcriber(bundle_for("tiny06b", "fp32", parts=["text"]))


def test_a_whisper_bundle_given_to_the_synthesizer_says_what_it_is(bundles):
    with pytest.raises(engine.BundleError, match="speech-recognition .Whisper. model, not a text-to-speech"):
        engine.Synthesizer(bundles["tinywhisper80"])


def test_a_damaged_whisper_bundle_is_one_line(bundles, tmp_path):
    copy = tmp_path / "damaged"
    shutil.copytree(bundles["tinywhisper80"], copy)
    data = bytearray((copy / "whisper_decoder.bin").read_bytes())
    data[100] ^= 0xFF
    (copy / "whisper_decoder.bin").write_bytes(bytes(data))
    with pytest.raises(engine.BundleError, match="damaged"):
        engine.Transcriber(copy)
    (copy / "whisper_encoder.bin").write_bytes(b"short")
    with pytest.raises(engine.BundleError, match="damaged"):
        engine.Transcriber(copy)


def test_a_bundle_with_a_broken_generation_config_is_one_line(bundles, tmp_path):
    copy = tmp_path / "broken"
    shutil.copytree(bundles["tinywhisper80"], copy)
    manifest = json.loads((copy / "manifest.json").read_text(encoding="utf-8"))
    manifest["generation_config"]["eos_token_id"] = "end"
    (copy / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    with pytest.raises(engine.BundleError, match="eos_token_id"):
        engine.Transcriber(copy)


@pytest.mark.parametrize("samples,rate,message", [
    (np.zeros(0, np.float32), 16000, "empty"),
    (np.zeros(16000 * 3, np.float32), 16000, "silent"),
    (np.full(16000, np.nan, np.float32), 16000, "NaN"),
    (np.broadcast_to(np.float32(0.1), (16000 * 3600,)), 16000, "3600.0 s long"),
    (np.random.default_rng(0).normal(0, 0.1, 8000 * 31).astype(np.float32), 8000, "trim it"),
])
def test_audio_that_cannot_be_transcribed_is_one_line(transcribers, samples, rate, message):
    with pytest.raises(engine.AudioError, match=message) as e:
        transcribers["tinywhisper80"].transcribe((samples, rate))
    assert "\n" not in str(e.value)


def test_a_recording_past_30_seconds_is_refused_with_what_to_do(transcribers, tmp_path):
    import soundfile as sf

    samples, rate = sf.read(str(_clip("en_16k_30s")), dtype="float32")
    longer = tmp_path / "35s.flac"
    sf.write(str(longer), np.concatenate([samples, samples[:5 * rate]]), rate)
    with pytest.raises(engine.AudioError, match=r"35\.0 s long; transcription takes up to 30 s"):
        transcribers["tinywhisper80"].transcribe(longer)


def test_an_unknown_language_is_one_line_before_any_work(transcribers):
    calls = []
    with pytest.raises(engine.LanguageError, match="does not know the language 'klingon'"):
        transcribers["tinywhisper80"].transcribe(_clip("en_16k_1s"), "klingon",
                                                 progress=lambda f, m: calls.append(f))
    assert calls == []


def test_cancel_stops_mid_way_and_the_next_transcription_is_whole(transcribers):
    t = transcribers["tinywhisper80"]
    seen = []

    def cancel() -> bool:
        return len(seen) > 5

    with pytest.raises(engine.Cancelled):
        t.transcribe(_clip("en_16k_10s"), progress=lambda f, m: seen.append(f), cancel=cancel)
    assert 0 < seen[-1] < 1
    with np.load(WHISPER / "outputs" / "tinywhisper80" / "en_16k_10s.npz") as d:
        assert list(t.transcribe(_clip("en_16k_10s")).token_ids) == d["detect_ids"].tolist()


def test_max_new_tokens_stops_where_transformers_would(transcribers):
    """generate(max_new_tokens=N) is a prefix of the full greedy run: the first N tokens."""
    with np.load(WHISPER / "outputs" / "tinywhisper80" / "en_16k_10s.npz") as d:
        ref = d["detect_ids"].tolist()
    result = transcribers["tinywhisper80"].transcribe(_clip("en_16k_10s"), max_new_tokens=7)
    assert list(result.token_ids) == ref[:7] and not result.complete
    with pytest.raises(ValueError):
        transcribers["tinywhisper80"].transcribe(_clip("en_16k_10s"), max_new_tokens=0)


def test_the_whisper_part_is_one_typed_record_and_the_manifests_read_back_byte_identical(bundles):
    """WhisperPart: each fixture bundle's Whisper part reads into the typed record and writes back to the same JSON
    bytes (so bundles converted before it open the same); the networks and the transcriber read it."""
    from engine.runtime.bundle import Bundle
    from engine.runtime.whisper_part import WhisperPart

    for model, path in bundles.items():
        bundle = Bundle.open(path)
        stored = bundle.manifest["parts"]["whisper"]
        part = bundle.record(WhisperPart)
        assert json.dumps(part.to_manifest()) == json.dumps(stored)
        config = json.loads((WHISPER / "models" / model / "config.json").read_text(encoding="utf-8"))
        assert (part.spec.mels, part.spec.d_model) == (config["num_mel_bins"], config["d_model"])
        assert part.preprocessor["feature_size"] == config["num_mel_bins"]


def test_a_checkpoint_whose_feature_extractor_has_a_wrong_typed_value_is_not_converted(tmp_path):
    src = tmp_path / "ckpt"
    shutil.copytree(WHISPER / "models" / "tinywhisper80", src)
    pre = json.loads((src / "preprocessor_config.json").read_text(encoding="utf-8"))
    (src / "preprocessor_config.json").write_text(json.dumps({**pre, "hop_length": "160"}), encoding="utf-8")
    with pytest.raises(engine.ConvertError, match="hop_length is '160', not a positive whole number") as caught:
        convert_checkpoint(src, tmp_path / "b")
    assert "\n" not in str(caught.value) and not (tmp_path / "b").exists()


def test_a_bundle_whose_feature_extractor_differs_from_the_front_end_is_refused(bundles, tmp_path):
    """A checkpoint with another hop or rate was transcribed from features computed with this front end's: noise."""
    copy = tmp_path / "hop"
    shutil.copytree(bundles["tinywhisper80"], copy)
    manifest = json.loads((copy / "manifest.json").read_text(encoding="utf-8"))
    manifest["parts"]["whisper"]["preprocessor"]["hop_length"] = 320
    (copy / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    with pytest.raises(engine.BundleError, match="feature extractor has hop_length 320; this app's front end has 160"):
        engine.Transcriber(copy)
