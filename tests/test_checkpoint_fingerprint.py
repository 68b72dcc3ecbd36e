"""A converted model records which checkpoint it came from (the fingerprint of its files) and at which precision
it was asked for, so that importing the same checkpoint again finds it."""

from __future__ import annotations

import shutil
from pathlib import Path

from engine import checkpoint_fingerprint, convert_checkpoint
from engine.store import ModelStore

CHECKPOINT = Path(__file__).resolve().parent / "fixtures" / "models" / "tiny06b"


def test_fingerprint_is_the_files_not_the_folder(tmp_path):
    copy = tmp_path / "elsewhere"
    shutil.copytree(CHECKPOINT, copy)
    assert checkpoint_fingerprint(copy) == checkpoint_fingerprint(CHECKPOINT)
    config = copy / "config.json"
    config.write_text(config.read_text() + " ")
    assert checkpoint_fingerprint(copy) != checkpoint_fingerprint(CHECKPOINT)


def test_the_store_finds_a_model_by_its_checkpoint_and_precision(tmp_path):
    store = ModelStore(tmp_path)
    convert_checkpoint(CHECKPOINT, tmp_path / "tiny", "fp16")
    fingerprint = checkpoint_fingerprint(CHECKPOINT)
    found = store.converted_from(fingerprint, "fp16")
    assert found is not None and found.name == "tiny" and found.checkpoint == (fingerprint, "fp16")
    assert store.converted_from(fingerprint, "q8") is None
    assert store.converted_from("0" * 32, "fp16") is None and store.converted_from("", "") is None
