"""Read a Hugging Face Qwen3-TTS checkpoint folder with numpy only (bf16 and fp16 tensors included)."""

from __future__ import annotations

import hashlib
import json
import mmap
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ..errors import ConvertError
from ..io.json_file import read_json_object

_DTYPES: dict[str, np.dtype[Any]] = {
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "BF16": np.dtype("<u2"),
    "F64": np.dtype("<f8"),
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
    "I16": np.dtype("<i2"),
    "I8": np.dtype("i1"),
    "U8": np.dtype("u1"),
    "BOOL": np.dtype("?"),
}

REQUIRED_FILES = (
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "vocab.json",
    "merges.txt",
    "tokenizer_config.json",
    "speech_tokenizer/config.json",
    "speech_tokenizer/model.safetensors",
)


def checkpoint_fingerprint(src: str | Path, step: Callable[[float], None] | None = None) -> str:
    """The sha256 of a checkpoint's files (their names and bytes): the same wherever the checkpoint lies, another
    when any file differs. Reads every byte: the full-size 0.6B checkpoint (2.5 GB) took 8.7-9.0 s on a busy
    2-core AMD EPYC (load average 8), SHA-256 itself running at about 750 MB/s there; `step(fraction)` is called
    between blocks (progress, and a chance to cancel)."""
    paths = [Path(src) / rel for rel in REQUIRED_FILES]
    try:
        total = sum(p.stat().st_size for p in paths) or 1
        h = hashlib.sha256(b"qwen3tts-checkpoint-v1")
        done = 0
        for rel, path in zip(REQUIRED_FILES, paths, strict=True):
            h.update(f"{rel}\0{path.stat().st_size}\0".encode())
            with open(path, "rb") as f:
                while block := f.read(64 << 20):
                    h.update(block)
                    done += len(block)
                    if step is not None:
                        step(done / total)
    except OSError as e:
        raise ConvertError(f"cannot read the checkpoint {src}: {e.strerror or e}") from None
    return h.hexdigest()[:32]


class SafetensorsFile:
    """Memory-mapped safetensors reader: tensors are returned as float32 numpy arrays on demand."""

    def __init__(self, path: Path):
        self.path = path
        try:
            self._file = open(path, "rb")
            size = path.stat().st_size
            head = self._file.read(8)
            if len(head) < 8:
                raise ValueError("file is shorter than its header")
            (n,) = struct.unpack("<Q", head)
            if n > size - 8 or n > 100_000_000:
                raise ValueError("header length is out of range")
            header = json.loads(self._file.read(n))
            self._mm = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError, UnicodeDecodeError) as e:
            if getattr(self, "_file", None) is not None:
                self._file.close()
            raise ConvertError(f"{path} is not a readable safetensors file: {e}") from None
        self._base = 8 + n
        if not isinstance(header, dict):
            self._close_quietly()
            raise ConvertError(f"{path} is not a readable safetensors file: its header is not a JSON object")
        self.metadata = header.pop("__metadata__", {})
        self._index: dict[str, tuple[str, list[int], int, int]] = {}
        for name, info in header.items():
            try:
                entry = _index_entry(info)
            except (KeyError, TypeError, ValueError) as e:
                self._close_quietly()
                why = f"no {e.args[0]}" if isinstance(e, KeyError) else str(e)
                raise ConvertError(f"{path} is damaged: tensor {name} has a malformed entry ({why})") from None
            if self._base + entry[3] > size:
                self._close_quietly()
                raise ConvertError(f"{path} is truncated: tensor {name} lies past the end of the file")
            self._index[name] = entry

    def _close_quietly(self) -> None:
        self._mm.close()
        self._file.close()

    def keys(self) -> list[str]:
        return list(self._index)

    def __contains__(self, name: str) -> bool:
        return name in self._index

    def shape(self, name: str) -> tuple[int, ...]:
        return tuple(self._index[name][1])

    def get(self, name: str, dtype: np.dtype | type = np.float32) -> np.ndarray:
        """The tensor as a new array of `dtype` (bf16 is widened exactly)."""
        try:
            st_dtype, shape, start, end = self._index[name]
        except KeyError:
            raise ConvertError(f"{self.path.name} has no tensor {name}; is this the right kind of checkpoint?") from None
        if st_dtype not in _DTYPES:
            raise ConvertError(f"{self.path.name}: tensor {name} has unsupported dtype {st_dtype}")
        buf = np.frombuffer(self._mm, dtype=_DTYPES[st_dtype], count=(end - start) // _DTYPES[st_dtype].itemsize,
                            offset=self._base + start)
        if st_dtype == "BF16":
            arr = (buf.astype(np.uint32) << 16).view(np.float32)
        else:
            arr = buf
        return np.array(arr.reshape(shape), dtype=dtype)

    def get_rows(self, name: str, start: int, stop: int) -> np.ndarray:
        """Rows [start, stop) of a tensor as float32, reading only those bytes (for the 1.2 GB text table)."""
        try:
            st_dtype, shape, begin, _end = self._index[name]
        except KeyError:
            raise ConvertError(f"{self.path.name} has no tensor {name}; is this the right kind of checkpoint?") from None
        if st_dtype not in ("F32", "F16", "BF16"):
            return self.get(name)[start:stop]
        dt = _DTYPES[st_dtype]
        row = int(np.prod(shape[1:], dtype=np.int64))
        start, stop = max(0, start), min(int(shape[0]), stop)
        buf = np.frombuffer(self._mm, dtype=dt, count=(stop - start) * row,
                            offset=self._base + begin + start * row * dt.itemsize)
        if st_dtype == "BF16":
            buf = (buf.astype(np.uint32) << 16).view(np.float32)
        return buf.astype(np.float32).reshape((stop - start, *shape[1:]))

    def element_count(self) -> int:
        """How many values all tensors hold together (for estimating a bundle's size)."""
        return sum((end - start) // _DTYPES[dt].itemsize for dt, _, start, end in self._index.values()
                   if dt in _DTYPES)

    def close(self) -> None:
        try:
            self._mm.close()
        except BufferError:
            pass  # arrays still view the map (an error is on its way up): the map closes when they go
        self._file.close()


class Weights(Protocol):
    """What the converters read a checkpoint's weights through: a SafetensorsFile, or smoothed weights over one."""

    def keys(self) -> list[str]: ...
    def __contains__(self, name: str) -> bool: ...
    def shape(self, name: str) -> tuple[int, ...]: ...
    def get(self, name: str, dtype: np.dtype | type = np.float32) -> np.ndarray: ...
    def get_rows(self, name: str, start: int, stop: int) -> np.ndarray: ...
    def element_count(self) -> int: ...
    def close(self) -> None: ...


@dataclass
class Checkpoint:
    """A hub-layout Qwen3-TTS checkpoint folder (config JSON + main and speech-tokenizer weights)."""

    path: Path
    config: dict[str, Any]
    generation_config: dict[str, Any]
    speech_config: dict[str, Any]
    main: Weights
    speech: SafetensorsFile
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def open(cls, path: str | Path) -> Checkpoint:
        path = Path(path)
        if not path.is_dir():
            raise ConvertError(f"{path} is not a folder; point to a downloaded Qwen3-TTS checkpoint folder")
        missing = [f for f in REQUIRED_FILES if not (path / f).is_file()]
        config = read_json_object(path / "config.json", ConvertError) if (path / "config.json").is_file() else {}
        if config.get("model_type") != "qwen3_tts":
            raise ConvertError(
                f"{path} is not a Qwen3-TTS checkpoint (config.json model_type is "
                f"{config.get('model_type')!r}, expected 'qwen3_tts')"
            )
        if config.get("tokenizer_type") != "qwen3_tts_tokenizer_12hz":
            raise ConvertError(
                f"{path} uses speech tokenizer {config.get('tokenizer_type')!r}; only the 12 Hz models "
                "(qwen3_tts_tokenizer_12hz) are supported"
            )
        if missing:
            raise ConvertError(f"{path} is incomplete: missing {', '.join(missing)}")
        speech_config = read_json_object(path / "speech_tokenizer/config.json", ConvertError)
        if speech_config.get("model_type") not in (None, "qwen3_tts_tokenizer_12hz"):
            raise ConvertError(f"{path}/speech_tokenizer is not the 12 Hz speech tokenizer")
        return cls(
            path=path,
            config=config,
            generation_config=read_json_object(path / "generation_config.json", ConvertError),
            speech_config=speech_config,
            main=SafetensorsFile(path / "model.safetensors"),
            speech=SafetensorsFile(path / "speech_tokenizer/model.safetensors"),
        )

    @property
    def talker_config(self) -> dict[str, Any]:
        return self.config["talker_config"]

    def close(self) -> None:
        self.main.close()
        self.speech.close()


def _index_entry(info: Any) -> tuple[str, list[int], int, int]:
    """(dtype, shape, start, end) of one header entry, every field checked."""
    if not isinstance(info, dict):
        raise TypeError("not an object")
    dtype, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
    if not isinstance(dtype, str):
        raise TypeError(f"dtype {dtype!r} is not a name")
    if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
        raise ValueError(f"shape {shape!r} is not a list of sizes")
    if (not isinstance(offsets, list) or len(offsets) != 2 or not all(isinstance(o, int) for o in offsets)
            or not 0 <= offsets[0] <= offsets[1]):
        raise ValueError(f"data_offsets {offsets!r} are not a [start, end] pair")
    itemsize = _DTYPES[dtype].itemsize if dtype in _DTYPES else None
    if itemsize is not None and offsets[1] - offsets[0] != int(np.prod(shape, dtype=np.int64)) * itemsize:
        raise ValueError(f"shape {shape} does not match its {offsets[1] - offsets[0]} bytes")
    return dtype, shape, offsets[0], offsets[1]

