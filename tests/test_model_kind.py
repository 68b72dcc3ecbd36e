"""Model kinds: speaker table, dialect rule, instruct policy and the refusals, on the converted fixture bundles
(the same config.json tables the official implementation reads) and on hand-made tables."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from engine.errors import TextError, VoiceError
from engine.synthesis.model_kind import InstructIgnoredWarning, ModelKind, Speaker, prompt_language
from engine.synthesis.synthesizer import Synthesizer
from engine.voice import Voice
from tests.bundles import MODELS, bundle_for

PARTS = ("text", "talker", "codec_decoder")


def synth(model: str) -> Synthesizer:
    return Synthesizer(bundle_for(model, "fp32", parts=PARTS))


def config(model: str) -> dict:
    return json.loads((MODELS / model / "config.json").read_text())


@pytest.mark.parametrize("model", ["tinycv06b", "tinycv17b"])
def test_speakers_come_from_the_config(model):
    tc = config(model)["talker_config"]
    s = synth(model)
    assert s.kind.kind == "custom_voice"
    got = {sp.name: (sp.codec_id, sp.dialect) for sp in s.kind.speakers}
    want = {k: (v[0] if isinstance(v, list) else v, tc["spk_is_dialect"][k] or None) for k, v in tc["spk_id"].items()}
    assert got == want
    assert s.kind.speaker("ERIC").dialect == "sichuan_dialect"


def test_instruct_policy_follows_the_model_size():
    assert synth("tinycv17b").kind.honours_instruct
    assert not synth("tinycv06b").kind.honours_instruct
    assert synth("tinyvd17b").kind.honours_instruct
    assert not synth("tiny06b").kind.honours_instruct
    # the official test is `tts_model_size in "0b6"`, a substring test: an empty size also drops the instruct
    assert not ModelKind("custom_voice", "").honours_instruct
    assert ModelKind("custom_voice", "1b7").honours_instruct


def test_dialect_rule():
    eric = Speaker("eric", 5, "sichuan_dialect")
    plain = Speaker("serena", 6)
    assert prompt_language("Chinese", eric) == "sichuan_dialect"
    assert prompt_language("auto", eric) == "sichuan_dialect"
    assert prompt_language("english", eric) == "english"
    assert prompt_language("chinese", plain) == "chinese"
    assert prompt_language("auto", None) == "auto"
    assert eric.label == "eric (Sichuan dialect)" and plain.label == "serena"


def test_dialect_changes_the_language_row_of_the_prompt():
    s = synth("tinycv06b")
    lang = s._ids.language_ids
    zh = s._build_prompt("你好。", "eric", "chinese")
    en = s._build_prompt("你好。", "eric", "english")
    auto = s._build_prompt("你好。", "eric", "auto")
    codec = s._talker.codec_rows
    tpad = s._text_rows([s._ids.tts_pad])[0]
    # row 5 = TPAD + C(language id) (role rows 0-2, think, think_bos); auto switches to the think form too
    np.testing.assert_allclose(zh.prefill[5], tpad + codec([lang["sichuan_dialect"]])[0], atol=1e-6)
    np.testing.assert_allclose(en.prefill[5], tpad + codec([lang["english"]])[0], atol=1e-6)
    np.testing.assert_array_equal(auto.prefill, zh.prefill)


def test_speaker_names_are_case_insensitive_and_unknown_ones_are_listed():
    s = synth("tinycv17b")
    a = s._build_prompt("Hello.", "Serena", "english")
    b = s._build_prompt("Hello.", s.kind.speaker("serena"), "english")
    np.testing.assert_array_equal(a.prefill, b.prefill)
    with pytest.raises(VoiceError, match="Unknown speaker 'nobody'; this model's speakers are: dylan, eric, ryan, "
                                         "serena, uncle_fu."):
        s._build_prompt("Hello.", "nobody", "english")


def test_refusals_name_what_the_model_can_do():
    cv, vd, base = synth("tinycv06b"), synth("tinyvd17b"), synth("tiny06b")
    x = Voice(xvector=np.zeros(cv.hidden_size, np.float32), model_id=cv.model_id)
    with pytest.raises(VoiceError, match="Voice cloning needs a Base model; this CustomVoice model speaks with its "
                                         "preset speakers: dylan, eric, serena, uncle_fu."):
        cv._build_prompt("Hello.", x, "english")
    with pytest.raises(VoiceError, match="Voice cloning needs a Base model"):
        cv.create_voice((np.zeros(24000, np.float32), 24000))
    with pytest.raises(VoiceError, match="Choose a speaker: dylan, eric, serena, uncle_fu."):
        cv._build_prompt("Hello.", None, "english")
    with pytest.raises(VoiceError, match="VoiceDesign model has no preset speakers"):
        vd._build_prompt("Hello.", "serena", "english")
    with pytest.raises(VoiceError, match="Voice cloning needs a Base model; this VoiceDesign model"):
        vd._build_prompt("Hello.", Voice(xvector=np.zeros(vd.hidden_size, np.float32), model_id=vd.model_id), "english")
    with pytest.raises(VoiceError, match="Base model has no preset speakers"):
        base._build_prompt("Hello.", "serena", "english")
    with pytest.raises(VoiceError, match="Choose a voice to clone"):
        base._build_prompt("Hello.", None, "english")
    bx = Voice(xvector=np.zeros(base.hidden_size, np.float32), model_id=base.model_id)
    with pytest.raises(TextError, match="This Base model takes no instruction"):
        base._build_prompt("Hello.", bx, "english", instruct="Sadly.")
    with pytest.raises(TextError, match="unknown language"):
        cv._build_prompt("Hello.", "eric", "sichuan_dialect")  # a dialect is the speaker's, not a language


def test_instruct_rows_go_first_on_1_7b_and_are_dropped_on_0_6b():
    big, small = synth("tinycv17b"), synth("tinycv06b")
    ins = "Speak slowly."
    plain = big._build_prompt("Hello.", "serena", "english")
    styled = big._build_prompt("Hello.", "serena", "english", instruct=ins)
    ids = big._tokenizer.instruct_ids(ins)
    n = len(ids)
    np.testing.assert_array_equal(styled.prefill[:n], big._text_rows(ids))
    np.testing.assert_array_equal(styled.prefill[n:], plain.prefill)
    assert small.kind.instruct_note(ins) is not None and big.kind.instruct_note(ins) is None
    assert small.kind.instruct_note("") is None
    with pytest.warns(InstructIgnoredWarning, match="This 0.6B CustomVoice model ignores style instructions"):
        dropped = small._build_prompt("Hello.", "serena", "english", instruct=ins)
    np.testing.assert_array_equal(dropped.prefill, small._build_prompt("Hello.", "serena", "english").prefill)


def test_default_text_mode_per_kind():
    cv, base = synth("tinycv06b"), synth("tiny06b")
    text = "Hello world, this is a test."
    n = len(cv._tokenizer.target_ids(text)) - 8
    # non-streaming: the whole text and TEOS in the prefill, one TPAD trailing row
    assert cv._build_prompt(text, "serena", "english").trailing.shape[0] == 1
    assert cv._build_prompt(text, "serena", "english", non_streaming=False).trailing.shape[0] == n
    x = Voice(xvector=np.zeros(base.hidden_size, np.float32), model_id=base.model_id)
    assert base._build_prompt(text, x, "english").trailing.shape[0] == n


def test_voice_design_without_instruction_has_no_speaker_row():
    vd = synth("tinyvd17b")
    p = vd._build_prompt("Hello.", None, "english")
    # role 3 + think/think_bos/lang/think_eos 4 + TBOS row; then N text + TEOS + final row (non-streaming)
    n = len(vd._tokenizer.target_ids("Hello.")) - 8
    assert p.prefill.shape[0] == 3 + 4 + 1 + n + 1 + 1


def test_design_once_then_clone_with_a_base_model(tmp_path):
    """VoiceDesign audio kept as a designed voice; a Base model refuses it as is and clones it from its audio."""
    from engine import GenerationSettings, designed_voice, is_designed

    vd = synth("tinyvd17b")
    text = "Hello world, this is a test."
    result = list(vd.synthesize(text, None, "english", GenerationSettings(seed=5, max_frames=12),
                                instruct="A warm, low voice."))[-1]
    voice = designed_voice(result.audio, text, "A warm, low voice.", vd.model_id, language="english")
    path = voice.save(tmp_path / "designed.qvoice")
    loaded = Voice.load(path)
    assert is_designed(loaded) and loaded.name == "A warm, low voice." and loaded.ref_text == text
    np.testing.assert_array_equal(loaded.ref_audio, result.audio)
    base = Synthesizer(bundle_for("tiny06b", "fp32"))
    assert loaded.model_id != base.model_id and loaded.model_id != vd.model_id
    with pytest.raises(VoiceError, match="is a designed voice"):
        base._build_prompt("Hi.", loaded, "english")
    cloned = base.create_voice((loaded.ref_audio, 24000), ref_text=loaded.ref_text, name=loaded.name)
    assert cloned.icl and not is_designed(cloned)
    assert base._build_prompt("Hi.", cloned, "english").prefill.shape[0] > 10
    with pytest.raises(VoiceError, match="too short"):
        designed_voice(result.audio[:100], text, "x", vd.model_id)
    # the engine's one door clones it so, from its file or as an object: the same x-vector as cloning it by hand
    from engine import VoiceInput, voice_for

    for given in (path, loaded):
        made = voice_for(base, VoiceInput(voice=given))
        assert made.model_id == base.model_id and made.icl and made.ref_text == text and made.name == loaded.name
        np.testing.assert_array_equal(made.xvector, cloned.xvector)
    assert not voice_for(base, VoiceInput(voice=path, timbre_only=True)).icl


@pytest.mark.parametrize("model, needs", [
    ("tiny06b", "reference"), ("tinycv06b", "speaker"), ("tinycv17b", "speaker"), ("tinyvd17b", "description"),
])
def test_what_each_kind_speaks_with(model, needs):
    """The app picks its voice column by this (a cloned voice, a preset speaker, a description): read from
    each fixture bundle."""
    from engine.synthesis.model_kind import VoiceNeed

    assert ModelKind.of_bundle(bundle_for(model, "fp32", parts=PARTS)).needs == VoiceNeed(needs)
    from engine.runtime.bundle import Bundle
    from engine.runtime.manifest_parts import TextPart

    stored = Bundle.open(bundle_for(model, "fp32", parts=PARTS)).manifest["parts"]["text"]
    untyped = TextPart.from_manifest({k: v for k, v in stored.items() if k != "tts_model_type"})
    assert ModelKind.from_part(untyped).needs == VoiceNeed.REFERENCE  # no type: a Base model, as upstream reads it
    assert ModelKind().needs == VoiceNeed.REFERENCE  # what the app offers before a model is open


FRONT_ENDS = ("qwen3tts_cli", "qwen3tts_gui", "qwen3tts_server")
KIND_NAMES = re.compile(r"""["'](base|custom_voice|voice_design)["']|\bkind\.kind\s*[!=]=|"""
                        r"""\b(CUSTOM_VOICE|VOICE_DESIGN|has_speakers|designs_voices|clones_voices)\b""")


def test_front_ends_ask_the_kind_what_it_needs():
    """Which voice a model speaks with is ModelKind.needs: no front end compares kind names or keeps its own
    kind checks (a Base model is "base" in one place only). The --kind choices of the test-model maker name
    the config's types and are left out."""
    root = Path(__file__).resolve().parent.parent
    found = []
    for package in FRONT_ENDS:
        for path in sorted((root / package).rglob("*.py")):
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if KIND_NAMES.search(line) and "add_argument(\"--kind\"" not in line and "args.kind" not in line:
                    found.append(f"{path.relative_to(root)}:{number}: {line.strip()}")
    assert not found, "\n".join(found)


def test_synthesis_asks_the_kind_what_it_needs_too():
    """Inside the engine's synthesis, too, only model_kind.py knows the kinds by name: the prompt asks the kind what
    it needs, so a new kind is declared in one module."""
    folder = Path(__file__).resolve().parent.parent / "engine" / "synthesis"
    found = [f"{path.name}:{number}: {line.strip()}"
             for path in sorted(folder.glob("*.py")) if path.name != "model_kind.py"
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if KIND_NAMES.search(line)]
    assert not found, "\n".join(found)


def test_the_model_kind_decides_the_voice():
    """voice_for: each kind says what it needs and turns the user's input into its voice; input another kind
    needs is refused in the kind's own words, missing input names the need."""
    from engine.synthesis.model_kind import VoiceNeed
    from engine.synthesis.voice_input import MissingVoiceInput, VoiceInput, voice_for

    cv, vd, base = synth("tinycv17b"), synth("tinyvd17b"), synth("tiny06b")
    assert [s.kind.needs for s in (cv, vd, base)] == [VoiceNeed.SPEAKER, VoiceNeed.DESCRIPTION, VoiceNeed.REFERENCE]
    assert voice_for(cv, VoiceInput(speaker="SERENA")) == cv.kind.speaker("serena")
    assert voice_for(vd, VoiceInput(description="A calm, warm voice.")) is None
    saved = Voice(xvector=np.ones(base.hidden_size, np.float32), model_id=base.model_id,
                  ref_codes=np.zeros((2, 16), np.int64), ref_text="Hi.")
    assert voice_for(base, VoiceInput(voice=saved)) is saved
    assert not voice_for(base, VoiceInput(voice=saved, timbre_only=True)).icl
    for s, needs in ((cv, VoiceNeed.SPEAKER), (vd, VoiceNeed.DESCRIPTION), (base, VoiceNeed.REFERENCE)):
        with pytest.raises(MissingVoiceInput) as e:
            voice_for(s, VoiceInput(description="  " if s is vd else None))
        assert e.value.needs == needs and len(str(e.value).splitlines()) == 1
    with pytest.raises(VoiceError, match="Voice cloning needs a Base model"):
        voice_for(cv, VoiceInput(voice=saved, speaker="serena"))
    with pytest.raises(VoiceError, match="no preset speakers"):
        voice_for(base, VoiceInput(voice=saved, speaker="serena"))


def test_a_voice_given_as_an_object_is_fitted_to_the_model_as_one_read_from_its_file():
    """voice_for gives a Voice object as this model needs it, as it does a voice file: its making for this model
    when it was made for several, and a one-line refusal when it was made by other models only."""
    from engine.synthesis.voice_input import VoiceInput, voice_for
    from engine.voice import MadeFor

    base = synth("tiny06b")
    mine = np.full(base.hidden_size, 0.5, np.float32)
    several = Voice(xvector=np.ones(base.hidden_size, np.float32), model_id="another model", name="Anna",
                    others={base.model_id: MadeFor(mine, None)})
    fitted = voice_for(base, VoiceInput(voice=several))
    assert fitted.model_id == base.model_id and np.array_equal(fitted.xvector, mine)
    elsewhere = Voice(xvector=np.ones(base.hidden_size, np.float32), model_id="another model", name="Anna")
    with pytest.raises(VoiceError, match="^voice 'Anna' was made with a different model") as e:
        voice_for(base, VoiceInput(voice=elsewhere))
    assert len(str(e.value).splitlines()) == 1
