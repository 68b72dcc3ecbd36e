"""Damaged values of the bundle manifest's typed parts (engine/runtime/manifest_parts.py) where the engine reads
them: each is one line naming the bundle, the part and the value, before any work starts and with nothing changed.
Each part's own reader is tested value by value beside its network (tests/test_talker.py, test_codec_decoder.py,
test_codec_encoder.py, test_speaker.py, test_convert_text.py); here, the readers that are not networks."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from engine.convert import convert_checkpoint
from engine.errors import BundleError
from engine.runtime.bundle import Bundle
from engine.runtime.manifest_parts import TalkerPart
from tests.bundles import MODELS, fixture_models

from .conftest import run_cli


def _edit_manifest(path: Path, change) -> bytes:
    manifest = json.loads((path / "manifest.json").read_text())
    change(manifest)
    data = json.dumps(manifest).encode()
    (path / "manifest.json").write_bytes(data)
    return data


@pytest.fixture(scope="module")
def old_q8(tmp_path_factory) -> Path:
    """An 8-bit bundle as converted before the 8-bit check (no record)."""
    return convert_checkpoint(MODELS / fixture_models()[0], tmp_path_factory.mktemp("q8") / "old", "q8", check=False)


@pytest.mark.parametrize("key, bad", [("promoted_fp32_layers", 3), ("tables", "codec"), ("cp_graph", None),
                                      ("codebook_size", "big")])
def test_the_8bit_check_refuses_a_damaged_talker_part_before_measuring(old_q8, tmp_path, monkeypatch, capsys, key,
                                                                       bad):
    """A wrong-typed list of fp32-stored Linears was a TypeError after minutes of measuring."""
    monkeypatch.setenv("QWEN3TTS_MODELS_DIR", str(tmp_path))
    bundle = tmp_path / "old"
    shutil.copytree(old_q8, bundle)
    before = _edit_manifest(bundle, lambda m: m["parts"]["talker"].__setitem__(key, bad))
    with pytest.raises(BundleError, match=rf"its 'talker' part: '{key}' is not") as caught:
        Bundle.open(bundle).record(TalkerPart)
    assert str(bundle) in str(caught.value) and "\n" not in str(caught.value)
    code, err = run_cli(capsys, "models", "check", "old", "--checkpoint", MODELS / fixture_models()[0])
    lines = err.strip().splitlines()
    assert code != 0 and len(lines) == 1 and f"'{key}'" in lines[0] and "Traceback" not in err, err
    assert (bundle / "manifest.json").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old"]  # no work folder left


# every value a part's reader gives a default to, as bundles converted before it was recorded lack it
ADDED_LATER = {
    "text": ["table", "split_regex", "tts_model_type", "tts_model_size", "newline_id", "codec_vocab", "codebook_size",
             "num_code_groups", "max_position_embeddings", "spk_is_dialect", "assistant_token_id"],
    "talker": ["fp16_weight_layers", "fp32_weight_layers", "q8_weight_layers", "outlier_smoothing", "promoted_layers",
               "promoted_fp32_layers", "blobs", "small_to_mtp_projection", "codec_eos_token_id"],
    "codec_decoder": ["bf16_layers"],
    "speaker": ["channels"],
}


def test_a_bundle_whose_parts_lack_every_value_added_later_opens_and_speaks(tmp_path, capsys):
    """The typed parts are read when a bundle opens: one converted before any of those values were recorded still
    opens and speaks (and a damaged one of them does not)."""
    from tests.bundles import bundle_for

    from .conftest import REF

    bundle = tmp_path / "old"
    shutil.copytree(bundle_for(fixture_models()[0], "fp32"), bundle)

    def strip(m: dict) -> None:
        for part, keys in ADDED_LATER.items():
            for key in keys:
                m["parts"][part].pop(key, None)

    _edit_manifest(bundle, strip)
    Bundle.open(bundle)
    code, err = run_cli(capsys, "synth", "--model", bundle, "--text", "Hello.", "-o", tmp_path / "a.wav", "--greedy",
                        "--max-frames", "2", "--language", "english", "--ref", REF, "--x-vector-only", "--threads", "1")
    assert code == 0 and (tmp_path / "a.wav").stat().st_size > 0, err
    for part, keys in ADDED_LATER.items():
        _edit_manifest(bundle, lambda m, part=part, key=keys[-1]: m["parts"][part].__setitem__(key, {"damaged": True}))
        with pytest.raises(BundleError, match=rf"its '{part}' part: '{keys[-1]}' is not") as caught:
            Bundle.open(bundle)
        assert "\n" not in str(caught.value)
        _edit_manifest(bundle, strip)


# --- the Whisper part ----------------------------------------------------------------------------------------------

WHISPER_MODEL = Path(__file__).resolve().parents[1] / "fixtures" / "whisper" / "models" / "tinywhisper80"
WHISPER_DAMAGE = [  # (path of keys in the part, damaged value, what the line says)
    (("encoder_graph",), 3, "'encoder_graph' is not a name"),
    (("decoder_graph",), None, "'decoder_graph' is not a name"),
    (("tables",), ["whisper_tokens"], "'tables' is not a table of values"),
    (("tables", "tokens"), 1, "its tables: 'tokens' is not a name"),
    (("tables", "positions"), False, "its tables: 'positions' is not a name"),
    (("spec",), "tiny", "'spec' is not a table of values"),
    (("spec", "mels"), "80", "its spec: 'mels' is not a whole number"),
    (("spec", "d_model"), 0, "its spec: 'd_model' is 0, not a positive count"),
    (("spec", "encoder_layers"), 1.5, "its spec: 'encoder_layers' is not a whole number"),
    (("spec", "decoder_layers"), -2, "its spec: 'decoder_layers' is -2, not a positive count"),
    (("spec", "encoder_heads"), 7, "'d_model' 32 is not a multiple of 'encoder_heads' \\(7\\)"),
    (("spec", "decoder_heads"), True, "its spec: 'decoder_heads' is not a whole number"),
    (("spec", "source_positions"), [1500], "its spec: 'source_positions' is not a whole number"),
    (("spec", "target_positions"), 0, "its spec: 'target_positions' is 0, not a positive count"),
    (("spec", "vocab_size"), "big", "its spec: 'vocab_size' is not a whole number"),
    (("spec", "embed_scale"), "1", "its spec: 'embed_scale' is not a number"),
    (("preprocessor",), 16000, "'preprocessor' is not a table of values"),
    (("preprocessor", "sampling_rate"), "16k", "front end's 'sampling_rate' is not a positive whole number"),
    (("preprocessor", "n_fft"), -400, "front end's 'n_fft' is not a positive whole number"),
]


@pytest.fixture(scope="module")
def whisper_bundle(tmp_path_factory) -> Path:
    return convert_checkpoint(WHISPER_MODEL, tmp_path_factory.mktemp("whisper") / "b")


@pytest.mark.parametrize("keys, bad, says", WHISPER_DAMAGE, ids=lambda v: ".".join(v) if isinstance(v, tuple) else None)
def test_a_damaged_whisper_part_is_one_line_when_the_bundle_opens(whisper_bundle, tmp_path, capsys, keys, bad, says):
    from engine.runtime.whisper_part import WhisperPart

    bundle = tmp_path / "b"
    shutil.copytree(whisper_bundle, bundle)

    def damage(m: dict) -> None:
        where = m["parts"]["whisper"]
        for key in keys[:-1]:
            where = where[key]
        where[keys[-1]] = bad

    _edit_manifest(bundle, damage)
    with pytest.raises(BundleError, match=says) as caught:
        Bundle.open(bundle)
    assert f"The manifest of {bundle} is damaged: its 'whisper' part" in str(caught.value)
    assert "\n" not in str(caught.value)
    with pytest.raises(BundleError, match=says):
        WhisperPart.from_manifest(json.loads((bundle / "manifest.json").read_text())["parts"]["whisper"])
    code, err = run_cli(capsys, "transcribe", "--model", bundle, Path(__file__).resolve().parents[1] / "fixtures" /
                        "audio" / "en_24k_mono_2s.wav", "--threads", "1")
    lines = err.strip().splitlines()
    assert code != 0 and len(lines) == 1 and "Traceback" not in err and "'whisper' part" in lines[0], err


def test_a_whisper_part_missing_a_value_names_it(whisper_bundle, tmp_path):
    bundle = tmp_path / "b"
    shutil.copytree(whisper_bundle, bundle)
    _edit_manifest(bundle, lambda m: m["parts"]["whisper"]["spec"].pop("vocab_size"))
    with pytest.raises(BundleError, match=r"its 'whisper' part.spec has no 'vocab_size'") as caught:
        Bundle.open(bundle)
    assert "\n" not in str(caught.value)


# --- the text part, as the model kind, the prompt and the tokenizer read it ------------------------------------------

@pytest.mark.parametrize("key, bad, says", [
    ("spk_is_dialect", {"vivian": 3}, "'spk_is_dialect' is not a table of dialect names"),
    ("codec_language_id", {"english": [2050]}, "'codec_language_id' is not a table of token ids"),
    ("spk_id", {"vivian": "3066"}, "'spk_id' is not a table of token ids"),
    ("split_regex", ["qwen2"], "'split_regex' is not a name"),
    ("tts_model_type", 1, "'tts_model_type' is not a name"),
])
def test_a_damaged_text_part_is_one_line_when_the_bundle_opens(tmp_path, capsys, key, bad, says):
    """A dialect of 3 became the speaker's dialect "3", and a language id list went into the prompt as a row index."""
    from tests.bundles import bundle_for

    from .conftest import REF

    bundle = tmp_path / "b"
    shutil.copytree(bundle_for(fixture_models()[0], "fp32"), bundle)
    _edit_manifest(bundle, lambda m: m["parts"]["text"].__setitem__(key, bad))
    with pytest.raises(BundleError, match=says) as caught:
        Bundle.open(bundle)
    assert "its 'text' part" in str(caught.value) and "\n" not in str(caught.value)
    code, err = run_cli(capsys, "synth", "--model", bundle, "--text", "Hello.", "-o", tmp_path / "a.wav", "--greedy",
                        "--max-frames", "2", "--language", "english", "--ref", REF, "--x-vector-only", "--threads", "1")
    lines = err.strip().splitlines()
    assert code != 0 and len(lines) == 1 and key in lines[0] and not (tmp_path / "a.wav").exists(), err


@pytest.mark.parametrize("change, says", [
    (lambda m: m.__setitem__("speech_config", ["decoder_config"]), "its speech_config is not a table of values"),
    (lambda m: m["speech_config"].__setitem__("output_sample_rate", "24k"),
     "its speech_config: 'output_sample_rate' is not a whole number"),
], ids=["not a table", "sample rate"])
def test_a_damaged_speech_config_is_one_line(tmp_path, capsys, change, says):
    """A speech_config that was a list was an AttributeError traceback at open; a sample rate of "24k" one from
    int() when the decoder loaded."""
    from tests.bundles import bundle_for

    from .conftest import REF

    bundle = tmp_path / "b"
    shutil.copytree(bundle_for(fixture_models()[0], "fp32"), bundle)
    _edit_manifest(bundle, change)
    code, err = run_cli(capsys, "synth", "--model", bundle, "--text", "Hello.", "-o", tmp_path / "a.wav", "--greedy",
                        "--max-frames", "2", "--language", "english", "--ref", REF, "--x-vector-only", "--threads", "1")
    lines = err.strip().splitlines()
    assert code != 0 and len(lines) == 1 and "Traceback" not in err and not (tmp_path / "a.wav").exists(), err
    assert says in lines[0] and str(bundle) in lines[0], lines[0]


@pytest.mark.parametrize("bad", ["2", 0, 1.5, [2]])
def test_a_damaged_8bit_format_is_one_line_when_the_bundle_opens(old_q8, tmp_path, bad):
    """The 8-bit format version went into the tuning key as it was; a bundle from before it was recorded is
    format 1."""
    bundle = tmp_path / "old"
    shutil.copytree(old_q8, bundle)
    _edit_manifest(bundle, lambda m: m.pop("q8_format", None))
    assert Bundle.open(bundle).q8_format == 1
    _edit_manifest(bundle, lambda m: m.__setitem__("q8_format", bad))
    with pytest.raises(BundleError, match=r"its 8-bit format \(q8_format\) is") as caught:
        Bundle.open(bundle)
    assert str(bundle) in str(caught.value) and "\n" not in str(caught.value)


# --- every value of every part --------------------------------------------------------------------------------------

WRONG = ("damaged", {"damaged": True}, -7, [None])  # each tried where its JSON type is not the stored value's
FREE_FORM = {("talker", "blobs"), ("talker", "outlier_smoothing")}  # informative tables, any content is read as it is


def _json_type(value: object) -> type:
    """A value's kind in JSON (whole numbers and numbers are one: a number)."""
    return {bool: bool, int: int, float: int, str: str, list: list, dict: dict}.get(type(value), type(None))


def _leaves(value: object, path: tuple) -> list[tuple]:
    """Paths to every value of a part (tables and lists followed down to their values)."""
    out = [path]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _leaves(v, path + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _leaves(v, path + (i,))
    return out


def _replaced(value, path: tuple, new):
    if not path:
        return new
    copy = dict(value) if isinstance(value, dict) else list(value)
    copy[path[0]] = _replaced(value[path[0]], path[1:], new)
    return copy


def _parts() -> list[tuple[str, str]]:
    from engine.runtime.manifest_parts import CodecDecoderPart, CodecEncoderPart, SpeakerPart, TextPart
    from engine.runtime.whisper_part import WhisperPart

    tts = [SpeakerPart, TalkerPart, CodecDecoderPart, CodecEncoderPart, TextPart]
    return ([(kind.PART, model) for kind in tts for model in ("tiny06b", "tinycv06b")]
            + [(TalkerPart.PART, "tiny06b q8"), (WhisperPart.PART, "tinywhisper80")])


@pytest.mark.parametrize("part, model", _parts(), ids=lambda v: v)
def test_every_value_of_every_part_of_another_type_is_one_line_naming_it(part, model, tmp_path):
    """Each value a typed part reads, replaced by one of another JSON type, is refused with one BundleError line
    naming its key (or, in a list, the list's): nothing wrong-typed gets through into a network. New fields of a
    part are covered as soon as a fixture bundle writes them."""
    from engine.runtime.bundle import _Part
    from engine.runtime.manifest_parts import CodecDecoderPart, CodecEncoderPart, SpeakerPart, TextPart
    from engine.runtime.whisper_part import WhisperPart
    from tests.bundles import bundle_for

    kind = {k.PART: k for k in (SpeakerPart, TalkerPart, CodecDecoderPart, CodecEncoderPart, TextPart,
                                WhisperPart)}[part]
    if model.startswith("tinywhisper"):
        path = convert_checkpoint(WHISPER_MODEL, tmp_path / "w")
    else:
        name, _, precision = model.partition(" ")
        path = bundle_for(name, precision or "fp32")
    stored = json.loads((path / "manifest.json").read_text())["parts"][part]
    kind.from_manifest(_Part.wrap(stored, "here"), "here")
    tried, leaves = 0, 0
    for leaf in _leaves(stored, ())[1:]:
        if (part, *leaf[:1]) in FREE_FORM or leaf[:1] == ("spk_is_dialect",) and len(leaf) > 1:
            continue  # a speaker's dialect is a name or false: a string of any words is one
        here = stored
        for key in leaf:
            here = here[key]
        leaves += 1
        names = [k for k in leaf if isinstance(k, str)]  # the value's key, or the table's it is in
        for bad in WRONG:
            if _json_type(bad) is _json_type(here):
                continue
            damaged = _replaced(stored, leaf, bad)
            with pytest.raises(BundleError) as caught:
                kind.from_manifest(_Part.wrap(damaged, "The manifest is damaged: its part"),
                                   "The manifest is damaged: its part")
            message = str(caught.value)
            named = any(repr(k) in message or f"({k})" in message for k in names)
            assert "\n" not in message and named, (leaf, bad, message)
            tried += 1
    assert tried >= leaves >= 2  # every value was tried at least once
