"""`qwen3tts transcribe` and `qwen3tts convert` on a Whisper checkpoint, against the committed transformers outputs;
bad input exits 2 with one line per problem."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from qwen3tts_cli.main import main

WHISPER = Path(__file__).resolve().parent / "fixtures" / "whisper"
CLIP = WHISPER / "audio" / "de_8k_4s.wav"
OTHER = WHISPER / "audio" / "fr_48k_stereo_5s.flac"


def _reference(stem: str, case: str = "detect") -> dict:
    with np.load(WHISPER / "outputs" / "tinywhisper80" / f"{stem}.npz") as d:
        return {"ids": d[f"{case}_ids"].tolist(), "text": str(d[f"{case}_text"]).strip(),
                "lang_id": int(d[f"{case}_lang_id"])}


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    dest = tmp_path_factory.mktemp("cli") / "whisper80"
    assert main(["convert", str(WHISPER / "models" / "tinywhisper80"), str(dest)]) == 0
    return dest


def test_convert_takes_a_whisper_checkpoint_at_fp32_by_default(bundle):
    manifest = json.loads((bundle / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["model"] == "whisper" and manifest["precision"] == "fp32"


def test_transcribe_json_gives_the_reference_tokens_and_language(bundle, capsys):
    assert main(["transcribe", "--model", str(bundle), str(CLIP), str(OTHER), "--json", "--threads", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2
    for line, stem in zip(lines, ("de_8k_4s", "fr_48k_stereo_5s"), strict=True):
        record = json.loads(line)
        ref = _reference(stem)
        assert record["token_ids"] == ref["ids"] and record["text"] == ref["text"]
        assert record["language_detected"] is True and Path(record["file"]).stem == stem


def test_transcribe_prints_the_text_and_says_the_language_on_stderr(bundle, capsys):
    assert main(["transcribe", "--model", str(bundle), str(CLIP), "--language", "de"]) == 0
    captured = capsys.readouterr()
    assert captured.out == _reference("de_8k_4s", "given")["text"] + "\n"
    assert "german (given)" in captured.err


def test_an_unknown_language_is_one_line(bundle, capsys):
    assert main(["transcribe", "--model", str(bundle), str(CLIP), "--language", "xx"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and "does not know the language 'xx'" in captured.err


def test_one_bad_file_is_one_line_and_the_others_are_still_transcribed(bundle, tmp_path, capsys):
    empty = tmp_path / "empty.wav"
    empty.write_bytes(b"")
    assert main(["transcribe", "--model", str(bundle), str(empty), str(CLIP)]) == 2
    captured = capsys.readouterr()
    assert captured.out == f"{CLIP}: {_reference('de_8k_4s')['text']}\n"
    assert sum("empty.wav" in line for line in captured.err.splitlines()) == 1


def test_a_tts_bundle_given_to_transcribe_is_one_line(capsys):
    from tests.bundles import bundle_for

    tts = bundle_for("tiny06b", "fp32", parts=["text"])
    assert main(["transcribe", "--model", str(tts), str(CLIP)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a speech-recognition (Whisper) model" in err


def test_models_download_installs_a_whisper_model_and_transcribe_finds_it_by_name(tmp_path, monkeypatch, capsys):
    """The store's own download path (tests/hub_server.py on 127.0.0.1): only the files the converter reads are
    fetched (not other frameworks' weights), 8-bit becomes fp16, and the installed name works with --model."""
    from engine.store import WHISPER_CATALOGUE, ModelStore, find_entry
    from tests.hub_server import HubServer, Repo, isolate_store

    isolate_store(tmp_path, monkeypatch, 64 * 1024)
    repo = Repo.from_folder(WHISPER / "models" / "tinywhisper80")
    repo.files["flax_model.msgpack.safetensors"] = b"\0" * 1000  # same weights for another framework: skipped
    repo.files["README.md"] = b"# not fetched\n"
    entry = find_entry("whisper-base")
    assert entry is not None and entry in WHISPER_CATALOGUE and entry.repo_id == "openai/whisper-base"
    with HubServer({entry.repo_id: repo}) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        assert main(["models", "download", "whisper-base"]) == 0
        assert not hub.file_requests("flax_model.msgpack.safetensors") and not hub.file_requests("README.md")
    capsys.readouterr()
    model = ModelStore().get("whisper-base")
    assert model is not None and model.precision == "fp16" and model.recognises_speech
    assert ModelStore().speech_recogniser() == model  # what --ref-text auto takes without --whisper-model
    assert main(["transcribe", "--model", "whisper-base", str(CLIP), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["token_ids"] == _reference("de_8k_4s")["ids"]
    assert main(["models", "list", "--available"]) == 0
    listed = capsys.readouterr().out
    for e in WHISPER_CATALOGUE:
        assert e.name in listed and e.trade_off in listed


def test_voice_create_with_ref_text_auto_uses_what_whisper_heard(bundle, tmp_path, capsys):
    from engine import Voice
    from tests.bundles import bundle_for

    tts = bundle_for("tiny06b", "fp32")
    out = tmp_path / "v.qvoice"
    code = main(["voice", "create", str(CLIP), "--model", str(tts), "--ref-text", "auto", "--whisper-model",
                 str(bundle), "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 0, err
    heard = _reference("de_8k_4s")["text"]
    assert f'heard in {CLIP.name} (' in err and heard in err
    voice = Voice.load(out)
    assert voice.icl and voice.ref_text == heard


def test_synth_with_ref_text_auto_and_no_whisper_model_says_how_to_get_one(tmp_path, monkeypatch, capsys):
    from tests.bundles import bundle_for

    monkeypatch.setenv("QWEN3TTS_MODELS_DIR", str(tmp_path / "empty-store"))
    code = main(["synth", "--model", str(bundle_for("tiny06b", "fp32")), "--text", "Hello.", "-o",
                 str(tmp_path / "o.wav"), "--ref", str(CLIP), "--ref-text", "auto", "--max-frames", "3"])
    err = capsys.readouterr().err
    assert code == 2 and "qwen3tts models download whisper-base" in err and err.count("\n") == 1
    assert not (tmp_path / "o.wav").exists()


def test_synth_and_batch_with_ref_text_auto_clone_in_context(bundle, tmp_path, capsys):
    """The transcript is what the recogniser heard: the same voice as one made with that text typed in."""
    import shutil

    from tests.bundles import bundle_for

    tts = bundle_for("tiny06b", "fp32")
    heard = _reference("de_8k_4s")["text"]
    ref = tmp_path / CLIP.name
    shutil.copy(CLIP, ref)
    common = ["--greedy", "--max-frames", "3", "--language", "english"]
    assert main(["synth", "--model", str(tts), "--text", "Hello.", "-o", str(tmp_path / "auto.wav"), "--ref",
                 str(ref), "--ref-text", "auto", "--whisper-model", str(bundle), "--codes-out",
                 str(tmp_path / "auto.npy"), *common]) == 0
    assert heard in capsys.readouterr().err
    assert main(["synth", "--model", str(tts), "--text", "Hello.", "-o", str(tmp_path / "typed.wav"), "--ref",
                 str(ref), "--ref-text", heard, "--codes-out", str(tmp_path / "typed.npy"), *common]) == 0
    assert np.array_equal(np.load(tmp_path / "auto.npy"), np.load(tmp_path / "typed.npy"))
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text(json.dumps({"name": "a", "text": "Hello.", "language": "english", "ref": ref.name,
                                "ref_text": "auto", "max_frames": 3}) + "\n", encoding="utf-8")
    assert main(["batch", "--model", str(tts), "--jobs", str(jobs), "--out-dir", str(tmp_path / "out"),
                 "--greedy", "--codes", "--whisper-model", str(bundle)]) == 0
    assert np.array_equal(np.load(tmp_path / "out" / "a.codes.npy"), np.load(tmp_path / "typed.npy"))
