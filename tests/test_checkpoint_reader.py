"""The numpy safetensors reader: dtypes (bf16 widened exactly), row slices, and clear errors."""

import json
import struct

import numpy as np
import pytest
from safetensors.numpy import save_file

from engine.convert.checkpoint import Checkpoint, SafetensorsFile
from engine.errors import ConvertError


def _write_bf16(path, name, arr):
    bits = (arr.astype(np.float32).view(np.uint32) >> 16).astype("<u2")
    header = json.dumps({name: {"dtype": "BF16", "shape": list(arr.shape), "data_offsets": [0, bits.nbytes]}}).encode()
    path.write_bytes(struct.pack("<Q", len(header)) + header + bits.tobytes())


def test_bf16_is_widened_exactly_and_rows_match(tmp_path):
    rng = np.random.default_rng(0)
    exact = ((rng.standard_normal((7, 5)).astype(np.float32).view(np.uint32) >> 16) << 16).view(np.float32)
    _write_bf16(tmp_path / "m.safetensors", "w", exact)
    f = SafetensorsFile(tmp_path / "m.safetensors")
    np.testing.assert_array_equal(f.get("w"), exact)
    np.testing.assert_array_equal(f.get_rows("w", 2, 5), exact[2:5])
    f.close()


def test_fp32_and_fp16_rows(tmp_path):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((6, 3)).astype(np.float32)
    b = rng.standard_normal((4, 2)).astype(np.float16)
    save_file({"a": a, "b": b}, str(tmp_path / "m.safetensors"))
    f = SafetensorsFile(tmp_path / "m.safetensors")
    np.testing.assert_array_equal(f.get_rows("a", 1, 4), a[1:4])
    np.testing.assert_array_equal(f.get_rows("b", 0, 2), b[:2].astype(np.float32))
    with pytest.raises(ConvertError, match="no tensor"):
        f.get_rows("c", 0, 1)
    f.close()


def test_truncated_file_is_refused(tmp_path):
    a = np.ones((100, 10), np.float32)
    save_file({"a": a}, str(tmp_path / "m.safetensors"))
    data = (tmp_path / "m.safetensors").read_bytes()
    (tmp_path / "m.safetensors").write_bytes(data[: len(data) - 100])
    with pytest.raises(ConvertError, match="truncated"):
        SafetensorsFile(tmp_path / "m.safetensors")


def test_foreign_folder_is_refused(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    with pytest.raises(ConvertError, match="not a Qwen3-TTS checkpoint"):
        Checkpoint.open(tmp_path)
    with pytest.raises(ConvertError, match="not a folder"):
        Checkpoint.open(tmp_path / "missing")
