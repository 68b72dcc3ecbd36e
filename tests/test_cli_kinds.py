"""`qwen3tts synth --speaker/--instruct` and `qwen3tts speakers` on the CustomVoice / VoiceDesign fixtures."""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf

from qwen3tts_cli.main import main
from tests.bundles import FIXTURES, OUTPUTS, bundle_for

PARTS = ["text", "talker", "codec_decoder"]
REF = FIXTURES / "audio" / "en_24k_mono_2s.wav"


def run(capsys, *args) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def case(model: str, name: str) -> dict:
    with np.load(OUTPUTS / model / f"kind_{name}.npz") as z:
        return {k: z[k] for k in z.files}


@pytest.mark.parametrize("model,name,extra", [
    ("tinycv17b", "cv_dylan_zh_instruct_stream", ["--streaming-text"]),
    ("tinycv06b", "cv_serena_en_instruct_dropped", []),
    ("tinyvd17b", "vd_en", []),
])
def test_synth_greedy_matches_the_official_codes(tmp_path, capsys, model, name, extra):
    d = case(model, name)
    out, codes = tmp_path / "a.wav", tmp_path / "a.npy"
    args = ["synth", "--model", bundle_for(model, parts=PARTS), "--text", str(d["text"]), "--language",
            str(d["language"]), "--greedy", "--max-frames", int(d["max_new_tokens"]) - 1, "-o", out,
            "--codes-out", codes, *extra]
    if str(d["speaker"]):
        args += ["--speaker", str(d["speaker"]).upper()]
    if str(d["instruct"]):
        args += ["--instruct", str(d["instruct"])]
    code, _, err = run(capsys, *args)
    assert code == 0, err
    np.testing.assert_array_equal(np.load(codes), d["codes"])
    wav, sr = sf.read(out, dtype="float32")
    assert sr == 24000
    np.testing.assert_allclose(wav, d["wav"], rtol=0, atol=1e-3)
    ignored = "ignores style instructions" in err
    assert ignored == (model == "tinycv06b"), err


def test_speakers_lists_names_dialects_and_languages(capsys):
    code, out, err = run(capsys, "speakers", "--model", bundle_for("tinycv17b", parts=["text"]))
    assert code == 0
    lines = out.splitlines()
    assert [ln.split()[0] for ln in lines] == ["dylan", "eric", "ryan", "serena", "uncle_fu"]
    assert "Sichuan dialect" in lines[1] and "Beijing dialect" in lines[0] and lines[2] == "ryan"
    assert "follows --instruct" in err and "japanese" in err and "dialect" not in err
    code, _, err = run(capsys, "speakers", "--model", bundle_for("tinycv06b", parts=["text"]))
    assert code == 0 and "ignores --instruct" in err


@pytest.mark.parametrize("model,args,message", [
    ("tiny06b", ["speakers"], "This Base model has no preset speakers"),
    ("tinyvd17b", ["speakers"], "This VoiceDesign model has no preset speakers"),
    ("tinycv17b", ["synth", "--text", "Hi."], "This CustomVoice model needs --speaker NAME; its speakers are: dylan"),
    ("tinycv17b", ["synth", "--text", "Hi.", "--speaker", "bob"], "Unknown speaker 'bob'; this model's speakers"),
    ("tinycv17b", ["synth", "--text", "Hi.", "--ref", REF], "Voice cloning needs a Base model; this CustomVoice"),
    ("tinyvd17b", ["synth", "--text", "Hi.", "--ref", REF], "Voice cloning needs a Base model; this VoiceDesign"),
    ("tinyvd17b", ["synth", "--text", "Hi.", "--speaker", "eric"], "This VoiceDesign model has no preset speakers"),
    ("tiny06b", ["synth", "--text", "Hi.", "--speaker", "eric"], "This Base model has no preset speakers"),
    ("tiny06b", ["synth", "--text", "Hi.", "--ref", REF, "--x-vector-only", "--instruct", "Sadly."],
     "This Base model takes no instruction"),
])
def test_refusals_are_one_line_and_write_nothing(tmp_path, capsys, model, args, message):
    out = tmp_path / "x.wav"
    cmd = [args[0], "--model", bundle_for(model, parts=PARTS), *args[1:]]
    if args[0] == "synth":
        cmd += ["-o", out]
    code, _, err = run(capsys, *cmd)
    assert code == 2
    assert err.count("\n") == 1 and message in err, err
    assert not out.exists()


def test_long_text_keeps_the_speaker_and_instruction(tmp_path, capsys):
    """Chunked synthesis: every chunk speaks with the same preset speaker and instruction (prompt checked)."""
    from engine import Synthesizer

    bundle = bundle_for("tinycv17b", parts=PARTS)
    out, chunks = tmp_path / "long.wav", tmp_path / "chunks"
    text = "Hello world, this is a test. Good morning, how are you doing today? See you tomorrow!"
    code, _, err = run(capsys, "synth", "--model", bundle, "--text", text, "--speaker", "serena", "--instruct",
                       "Speak slowly.", "--language", "english", "--max-chars", 30, "--seed", 3, "--max-frames", 4,
                       "--chunks-dir", chunks, "-o", out)
    assert code == 0, err
    listed = (chunks / "chunks.tsv").read_text().splitlines()
    assert len(listed) >= 2
    # the same first chunk alone, same seed and cap: identical audio (speaker and instruct reached the chunk)
    synth = Synthesizer(bundle)
    from engine import GenerationSettings

    first = listed[0].split("\t", 1)[1]
    res = list(synth.synthesize(first, "serena", "english", GenerationSettings(seed=3, max_frames=4),
                                instruct="Speak slowly."))[-1]
    got, _ = sf.read(chunks / "0001.wav", dtype="float32")
    info = sf.info(str(chunks / "0001.wav"))
    # float WAV keeps the samples; 16-bit PCM: libsndfile writes x * 32767 rounded and reads n / 32768, so a
    # sample |x| <= 1 comes back within half a step plus the 1/32768 scale mismatch
    atol = 0 if info.subtype == "FLOAT" else 1.5 / 32768
    np.testing.assert_allclose(got, res.audio, rtol=0, atol=atol)


@pytest.mark.parametrize("kind", ["custom_voice", "voice_design"])
def test_demo_model_of_each_kind(tmp_path, capsys, kind):
    from engine import Synthesizer
    from engine.demo import is_demo_bundle

    dest = tmp_path / kind
    code, _, err = run(capsys, "demo-model", dest, "--kind", kind)
    assert code == 0, err
    assert is_demo_bundle(dest)
    synth = Synthesizer(dest)
    assert synth.kind.kind == kind and synth.kind.honours_instruct
    if kind == "custom_voice":
        assert [(s.name, s.dialect) for s in synth.kind.speakers] == [
            ("dylan", "beijing_dialect"), ("eric", "sichuan_dialect"), ("serena", None)]
        zh = synth._build_prompt("你好。", "eric", "chinese")
        dialect = synth._talker.codec_rows([synth._ids.language_ids["sichuan_dialect"]])[0]
        tpad = synth._text_rows([synth._ids.tts_pad])[0]
        np.testing.assert_allclose(zh.prefill[5], tpad + dialect, atol=1e-6)
        voice = "serena"
    else:
        assert synth.kind.speakers == ()
        voice = None
    from engine import GenerationSettings

    result = list(synth.synthesize("Hello.", voice, "english", GenerationSettings(seed=1, max_frames=3),
                                   instruct="Slowly."))[-1]
    assert result.codes.shape[0] >= 1 and len(result.audio) == result.codes.shape[0] * 1920


def test_demo_model_unknown_kind_is_refused(tmp_path):
    from engine import EngineError
    from engine.demo import make_demo_bundle

    with pytest.raises(EngineError, match="Unknown model kind 'klingon'"):
        make_demo_bundle(tmp_path / "x", kind="klingon")
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("model,names", [("tinycv17b", ["cv_serena_en_instruct", "cv_eric_auto_dialect"]),
                                         ("tinyvd17b", ["vd_en", "vd_no_instruct"])])
def test_batch_jobs_with_speakers_and_instructions(tmp_path, capsys, model, names):
    """`qwen3tts batch`: "speaker" / "instruct" fields; greedy codes equal the official ones (the model's default
    text mode, as these cases used); a line with two voices, an unknown speaker or (VoiceDesign) no description
    fails alone."""
    import json

    jobs = tmp_path / "jobs.jsonl"
    lines = []
    for name in names:
        d = case(model, name)
        job = {"name": name, "text": str(d["text"]), "language": str(d["language"]),
               "max_frames": int(d["max_new_tokens"]) - 1}
        if str(d["speaker"]):
            job["speaker"] = str(d["speaker"])
        if str(d["instruct"]):
            job["instruct"] = str(d["instruct"])
        lines.append(json.dumps(job))
    lines.append(json.dumps({"name": "two", "text": "Hi.", "speaker": "serena", "ref": "a.wav", "x_vector_only": True}))
    if model == "tinycv17b":
        lines.append(json.dumps({"name": "bob", "text": "Hi.", "speaker": "bob"}))
    jobs.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    code, stdout, _ = run(capsys, "batch", "--model", bundle_for(model, parts=PARTS), "--jobs", jobs, "--out-dir",
                          out, "--greedy", "--codes", "--batch-size", 2)
    assert code == 1
    assert any(s.startswith("failed  two:") and 'give one voice: "ref" or "speaker"' in s for s in stdout.splitlines())
    if model == "tinycv17b":
        assert any(s.startswith("failed  bob:") and "Unknown speaker 'bob'" in s for s in stdout.splitlines())
    for name in names:
        if model == "tinyvd17b" and not str(case(model, name)["instruct"]):  # refused, as in the app
            assert any(s.startswith(f"failed  {name}:") and "description" in s for s in stdout.splitlines())
            assert not (out / f"{name}.wav").exists()
            continue
        np.testing.assert_array_equal(np.load(out / f"{name}.codes.npy"), case(model, name)["codes"])


def test_synth_clones_a_designed_voice_file_as_its_recording(tmp_path, capsys):
    """`synth --voice` with a designed voice (a VoiceDesign model's audio kept as a voice) clones it with the Base
    model, as the app's batch does: the same codes as `--ref` of its recording with `--ref-text` of its text."""
    from engine import designed_voice, save_audio

    rng = np.random.default_rng(3)
    recording = (rng.standard_normal(36000) * 0.1).astype(np.float32)
    text = "Hello there, this is how I sound."
    path = designed_voice(recording, text, "A calm, low voice.", "a VoiceDesign model", language="english") \
        .save(tmp_path / "designed.qvoice")
    wav = save_audio(tmp_path / "recording.wav", recording, subtype="FLOAT")  # the samples exactly
    base = bundle_for("tiny06b", parts=PARTS + ["speaker", "codec_encoder"])
    common = ["synth", "--model", base, "--text", "Good morning.", "--language", "english", "--seed", 4,
              "--max-frames", 6]
    code, _, err = run(capsys, *common, "--voice", path, "-o", tmp_path / "a.wav", "--codes-out", tmp_path / "a.npy")
    assert code == 0, err
    code, _, err = run(capsys, *common, "--ref", wav, "--ref-text", text, "-o", tmp_path / "b.wav",
                       "--codes-out", tmp_path / "b.npy")
    assert code == 0, err
    np.testing.assert_array_equal(np.load(tmp_path / "a.npy"), np.load(tmp_path / "b.npy"))
