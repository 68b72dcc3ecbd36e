"""JSON files that must hold one object (engine/io/json_file.py): a checkpoint's config files, a bundle's manifest,
a tokenizer's vocabulary. Truncated, empty, wrong-typed, huge and non-regular files are one line each, and a FIFO in
their place is never waited on (a plain read of one blocks for ever)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

import engine.io.json_file as json_file
from engine import is_whisper_bundle, is_whisper_checkpoint
from engine.errors import BundleError, ConvertError
from engine.io.json_file import json_object_or_none, read_json_object
from engine.runtime.bundle_writer import is_bundle

from .test_faults_bad_files import finishes

WHISPER = Path(__file__).resolve().parents[1] / "fixtures" / "whisper" / "models" / "tinywhisper80"


@pytest.mark.parametrize("content, says", [
    (b'{"model_type": "whis', "is not valid JSON"),
    (b"", "is not valid JSON"),
    (b"[1, 2]", "does not hold a JSON object"),
    (b"\xff\xfe{}", "is not valid JSON"),
])
def test_a_file_that_is_not_one_json_object_is_one_line(tmp_path, content, says):
    path = tmp_path / "config.json"
    path.write_bytes(content)
    with pytest.raises(ConvertError, match=says) as caught:
        read_json_object(path, ConvertError)
    assert str(caught.value).startswith(str(path)) and "\n" not in str(caught.value)
    assert json_object_or_none(path) is None


def test_a_huge_file_is_refused_from_its_size(tmp_path, monkeypatch):
    monkeypatch.setattr(json_file, "MAX_JSON_BYTES", 100)
    path = tmp_path / "vocab.json"
    path.write_text(json.dumps({str(i): i for i in range(100)}))
    with pytest.raises(BundleError, match="more than the 100 a model's JSON file has"):
        read_json_object(path, BundleError, "the vocabulary")


def test_a_fifo_or_a_folder_is_refused_not_waited_on(tmp_path):
    fifo = tmp_path / "config.json"
    os.mkfifo(fifo)
    with pytest.raises(ConvertError, match="is not a regular file") as caught:
        finishes(lambda: read_json_object(fifo, ConvertError))
    assert "\n" not in str(caught.value)
    (tmp_path / "manifest.json").mkdir()
    with pytest.raises(ConvertError, match="cannot be read"):
        read_json_object(tmp_path / "manifest.json", ConvertError)
    with pytest.raises(ConvertError, match="cannot be read"):
        read_json_object(tmp_path / "missing.json", ConvertError)


def test_telling_what_a_folder_is_never_waits_on_a_fifo(tmp_path):
    """is_whisper_checkpoint, is_whisper_bundle and is_bundle read config.json / manifest.json to tell: a FIFO
    there hung all three."""
    os.mkfifo(tmp_path / "config.json")
    os.mkfifo(tmp_path / "manifest.json")
    assert finishes(lambda: (is_whisper_checkpoint(tmp_path), is_whisper_bundle(tmp_path), is_bundle(tmp_path))) == (
        False, False, False)


def test_converting_a_folder_with_a_fifo_for_its_config_is_one_line(tmp_path, capsys):
    """convert asks first whether the folder is a Whisper checkpoint: with a FIFO for config.json it hung there."""
    from .conftest import run_cli

    src = tmp_path / "ckpt"
    shutil.copytree(WHISPER, src)
    (src / "config.json").unlink()
    os.mkfifo(src / "config.json")
    code, err = finishes(lambda: run_cli(capsys, "convert", src, tmp_path / "b"))
    lines = err.strip().splitlines()
    assert code != 0 and len(lines) == 1 and "Traceback" not in err and not (tmp_path / "b").exists(), err


def test_the_model_list_never_waits_on_a_fifo_beside_a_model(tmp_path, monkeypatch):
    """The store read source.json (where a model came from) with a plain read: a FIFO there hung `models list`
    and the app's Models dialog."""
    from engine.store import ModelStore

    monkeypatch.setenv("QWEN3TTS_MODELS_DIR", str(tmp_path))
    model = tmp_path / "m"
    model.mkdir()
    (model / "manifest.json").write_text(json.dumps({"format": "qwen3tts-bundle", "precision": "fp16"}))
    os.mkfifo(model / "source.json")
    (listed,) = finishes(lambda: ModelStore().installed())
    assert listed.name == "m" and listed.precision == "fp16" and listed.repo_id == ""


@pytest.mark.parametrize("content, says", [
    (b'{"format": "qwen3tts-bundle", "ver', "it is not valid JSON"),
    (b"", "it is not valid JSON"),
    (b'["qwen3tts-bundle"]', "it does not hold a JSON object"),
    (b" " * 200, "it is 200 bytes, more than the 100 a model's JSON file has"),
], ids=["truncated", "empty", "a list", "huge"])
def test_a_damaged_manifest_is_one_line(tmp_path, capsys, monkeypatch, content, says):
    from engine.runtime.bundle import Bundle

    from .conftest import REF, run_cli

    monkeypatch.setattr(json_file, "MAX_JSON_BYTES", 100)
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "manifest.json").write_bytes(content)
    with pytest.raises(BundleError, match=f"The manifest of {tmp_path / 'b'} is damaged: {says}") as caught:
        Bundle.open(tmp_path / "b")
    assert "\n" not in str(caught.value)
    code, err = run_cli(capsys, "synth", "--model", tmp_path / "b", "--text", "Hello.", "-o", tmp_path / "a.wav",
                        "--ref", REF, "--threads", "1")
    lines = err.strip().splitlines()
    assert code != 0 and len(lines) == 1 and says in lines[0] and "Traceback" not in err, err
