"""A converted model on disk: manifest.json, ncnn graphs and numpy tables.

Layout (all paths relative to the bundle folder):
    manifest.json           format, version, precision, model config values, parts, file list (size, sha256)
    config.json, generation_config.json, speech_tokenizer_config.json   copies of the source JSON
    tokenizer/              vocab.json, merges.txt, tokenizer_config.json
    <graph>.param/.bin      ncnn networks
    <table>.npy             numpy tables, memory-mapped on load
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

import ncnn
import numpy as np

from ..errors import BundleError
from ..io.fileio import read_own_file, write_own_file
from ..io.json_file import read_json_object
from .bundle_shapes import check_layer_shapes
from .cache_folder import cache_dir
from .device import CPU, Device, configure_gpu_net, gpu_load
from .manifest_parts import ManifestPart
from .whisper_part import WhisperPart

FORMAT = "qwen3tts-bundle"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
# The config key (True) that marks the app's own demo bundle: demo.py writes it, the model store reads it.
DEMO_MARK = "qwen3tts_studio_demo"
PRECISIONS = ("fp32", "fp16", "bf16", "q8")  # every precision a bundle may have (all of them load)
# What convert, the app and the model store offer. bf16 is left out: measured slower than fp32 at full size and
# less exact (docs/performance.md, "Precision"); the engine still converts and reads it, so existing bf16 bundles keep working.
OFFERED_PRECISIONS = ("fp32", "fp16", "q8")
NCNN_PRECISIONS = ("fp32", "fp16", "bf16")  # ncnn option sets; q8 weights live in the graphs themselves
MAX_VERIFIED_BYTES = 16 * 2**20  # the verified-files record: about 200 bytes a file, a few KB a bundle
Record = TypeVar("Record", bound=ManifestPart)


def make_net_options(net: ncnn.Net, precision: str = "fp32", threads: int = 2, device: Device = CPU) -> None:
    """Set every ncnn option we depend on; the pip wheel defaults to fp16 arithmetic, which breaks parity. On a
    GPU device the GPU's precision replaces `precision` (engine/runtime/device.py configure_gpu_net)."""
    if precision not in NCNN_PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}")
    opt = net.opt
    opt.num_threads = threads
    opt.use_vulkan_compute = False
    opt.use_fp16_packed = precision == "fp16"
    opt.use_fp16_storage = precision == "fp16"
    opt.use_fp16_arithmetic = False
    opt.use_bf16_storage = precision == "bf16"
    opt.use_int8_inference = False
    opt.use_packing_layout = True
    opt.lightmode = True
    if device.on_gpu:
        configure_gpu_net(net, device)


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


@dataclass
class Bundle:
    """A loaded bundle. Cheap to open: files are checked by size; tables are memory-mapped on first use."""

    path: Path
    manifest: dict[str, Any]
    _tables: dict[tuple[str, bool], np.ndarray] = field(default_factory=dict, repr=False)
    device: Device = CPU  # where net() puts the networks: see on()

    @classmethod
    def open(cls, path: str | os.PathLike) -> Bundle:
        path = Path(path)
        mpath = path / MANIFEST
        if not path.is_dir():
            raise BundleError(f"{path} is not a folder; a model bundle is a folder made by 'qwen3tts convert'")
        if not mpath.is_file():
            raise BundleError(f"{path} is not a model bundle (no {MANIFEST}); convert a checkpoint first")
        manifest = read_json_object(mpath, BundleError, f"The manifest of {path} is damaged: it")
        if manifest.get("format") != FORMAT:
            raise BundleError(f"{path} is not a Qwen3-TTS Studio bundle")
        version = manifest.get("version")
        if type(version) is not int:
            raise BundleError(f"The manifest of {path} is damaged: its version is {version!r}, not a whole number.")
        if version != FORMAT_VERSION:
            raise BundleError(
                f"{path} has bundle format version {version}; this app reads version {FORMAT_VERSION}: "
                "convert the checkpoint again"
            )
        files = manifest.get("files")
        if not isinstance(files, dict) or not isinstance(manifest.get("parts", {}), dict):
            raise BundleError(f"The manifest of {path} is damaged: it has no file list.")
        bundle = cls(path, manifest)
        for rel, info in files.items():
            if (not isinstance(info, dict) or type(info.get("size")) is not int
                    or not isinstance(info.get("sha256"), str)):
                raise BundleError(f"The manifest of {path} is damaged: the entry for {rel!r} has no size or checksum.")
            f = bundle.file(rel)
            if not f.is_file():
                raise BundleError(f"model bundle {path} is incomplete: {rel} is missing")
            size = f.stat().st_size
            if size != info["size"]:
                raise BundleError(
                    f"model bundle {path} is damaged: {rel} has {size} bytes, expected {info['size']}"
                )
        q8_format = manifest.get("q8_format")
        if q8_format is not None and (type(q8_format) is not int or q8_format < 1):
            raise BundleError(f"The manifest of {path} is damaged: its 8-bit format (q8_format) is "
                              f"{str(q8_format)[:20]!r}, not a version number; convert the checkpoint again.")
        precision = manifest.get("precision", "fp32")
        if precision not in PRECISIONS:
            raise BundleError(f"The manifest of {path} is damaged: its precision {str(precision)[:20]!r} is not one "
                              f"of {', '.join(PRECISIONS)}; convert the checkpoint again.")
        bundle.verify_checksums(cached=True)
        check_layer_shapes(bundle)  # whatever the manifest lists: its file list may leave a .param out
        return bundle

    def verify_checksums(self, cached: bool = False) -> None:
        """Check every file against the manifest's sha256 (weights damaged without a size change used to load
        and fail at frame 0). With cached=True a file whose size, mtime and inode match a previous successful
        check is not read again, so only the first load of a (2.5 GB) bundle pays for it."""
        cache = _VerifiedCache.load() if cached else None
        for rel, info in self.manifest.get("files", {}).items():
            f = self.file(rel)
            if cache is not None and cache.has(f, info["sha256"]):
                continue
            if sha256_file(f) != info["sha256"]:
                raise BundleError(f"The model bundle {self.path} is damaged: {rel} does not match its checksum; "
                                  "convert the checkpoint again.")
            if cache is not None:
                cache.add(f, info["sha256"])
        if cache is not None:
            cache.save()

    @property
    def precision(self) -> str:
        return self.manifest.get("precision", "fp32")

    @property
    def config(self) -> dict[str, Any]:
        """The source checkpoint's config.json."""
        return self.manifest["config"]

    @property
    def generation_config(self) -> dict[str, Any]:
        return self.manifest.get("generation_config", {})

    @property
    def model_id(self) -> str:
        """The converted model's fingerprint (engine/convert/text.py; "" in a bundle without a text part)."""
        value = self.manifest.get("model_id", "")
        return value if isinstance(value, str) else ""

    @property
    def q8_format(self) -> int | None:
        """The 8-bit weight format's version of a q8 bundle (bundles made before it was recorded: 1), else None."""
        value: int | None = self.manifest.get("q8_format")
        return value if value is not None else (1 if self.precision == "q8" else None)

    def listed_size(self, rel: str) -> int | None:
        """The size the manifest lists for file `rel` (checked against the file when the bundle opened), None for a
        file it does not list."""
        info = self.manifest.get("files", {}).get(rel)
        return info["size"] if isinstance(info, dict) else None

    @property
    def speech_config(self) -> dict[str, Any]:
        """The speech tokenizer's config.json ({} in a bundle without one: a Whisper bundle's)."""
        value = self.manifest.get("speech_config") or {}
        if not isinstance(value, dict):
            raise BundleError(f"The manifest of {self.path} is damaged: its speech_config is not a table of values.")
        return value

    @property
    def is_whisper(self) -> bool:
        """A speech-recognition bundle (converted from a Whisper checkpoint), not a text-to-speech one."""
        return self.manifest.get("model") == WhisperPart.PART

    def has(self, kind: type[ManifestPart]) -> bool:
        """Whether the manifest has the part `kind` declares (a bundle converted with some parts only lacks the
        others; a Whisper bundle has its one)."""
        return kind.PART in self.manifest.get("parts", {})

    def part(self, name: str) -> dict[str, Any]:
        """Per-network metadata written by the converter (blob names, sizes, ids)."""
        if self.is_whisper and name != WhisperPart.PART:
            raise BundleError(f"{self.path} is a speech-recognition (Whisper) model, not a text-to-speech model; "
                              "choose a Qwen3-TTS model for this")
        try:
            info = self.manifest["parts"][name]
        except KeyError:
            raise BundleError(f"model bundle {self.path} has no '{name}' part; convert it again") from None
        if not isinstance(info, dict):
            raise BundleError(f"The manifest of {self.path} is damaged: its '{name}' part is not a table of values.")
        return _Part.wrap(info, f"The manifest of {self.path} is damaged: its '{name}' part")

    def record(self, kind: type[Record]) -> Record:
        """The manifest part `kind` declares (manifest_parts.py) as that typed record; a missing, wrong-typed or
        out-of-range value is one BundleError line naming the bundle, the part and the key."""
        return kind.from_manifest(self.part(kind.PART), f"The manifest of {self.path} is damaged: its '{kind.PART}' part")

    def file(self, rel: str) -> Path:
        """A file of the bundle; a name from the manifest that points outside the bundle folder is refused."""
        if not isinstance(rel, str) or not rel or os.path.isabs(rel) or ".." in Path(rel).parts:
            raise BundleError(f"The manifest of {self.path} is damaged: {rel!r} is not a name inside the bundle.")
        f = self.path / rel
        if not Path(os.path.realpath(f)).is_relative_to(os.path.realpath(self.path)):
            raise BundleError(f"The model bundle {self.path} is damaged: {rel} points outside the bundle folder.")
        return f

    def table(self, name: str, in_memory: bool = False) -> np.ndarray:
        """A numpy table, memory-mapped read-only (large embedding tables are never read whole), or with
        in_memory=True read whole once (tables the frame loop reads: a memory-mapped row page-faults at its first
        read and again after the OS dropped the page, measured up to 6.5 ms per frame at full size)."""
        key = (name, in_memory)
        if key not in self._tables:
            f = self.file(f"{name}.npy")
            try:
                self._tables[key] = np.load(f) if in_memory else np.load(f, mmap_mode="r")
            except (OSError, ValueError) as e:
                raise BundleError(f"model bundle {self.path}: table {name} is unreadable: {e}") from None
        return self._tables[key]

    def on(self, device: Device) -> Bundle:
        """This bundle with its networks loaded on `device` (the CPU, or a GPU through ncnn's Vulkan backend);
        the tables are shared with this one."""
        return replace(self, device=device)

    def net(self, name: str, threads: int = 2, precision: str | None = None, *,
            param_text: str | None = None, packing: bool = True) -> ncnn.Net:
        """Load one ncnn network with explicit options, on self.device. param_text replaces the stored .param (a
        topology derived from it over the same weights); packing=False keeps ncnn's layout one element per lane.
        On a GPU a pipeline the driver cannot build, or weights it cannot hold, is a GpuError."""
        net = ncnn.Net()
        make_net_options(net, precision or self.runtime_precision, threads, self.device)
        net.opt.use_packing_layout = packing
        param, binf = self.file(f"{name}.param"), self.file(f"{name}.bin")
        with gpu_load(self.device, name):
            loaded = net.load_param(str(param)) if param_text is None else net.load_param_mem(param_text)
            if loaded != 0:
                raise BundleError(f"model bundle {self.path}: {name}.param failed to load")
            if net.load_model(str(binf)) != 0:
                raise BundleError(f"model bundle {self.path}: {name}.bin failed to load")
        return net

    @property
    def runtime_precision(self) -> str:
        """fp16 bundles store fp16 weights; bf16 bundles store fp32 and let ncnn use bf16 storage; q8 bundles
        carry their 8-bit weights inside the talker graphs and run everything else in fp32."""
        return "fp32" if self.precision == "q8" else self.precision


class _Part(dict):
    """A manifest part whose missing keys are a BundleError naming the key (a KeyError reached the app's
    "Unexpected error" dialog); nested tables behave the same."""

    where: str = ""

    @classmethod
    def wrap(cls, value: Any, where: str) -> Any:
        if not isinstance(value, dict):
            return value
        part = cls({k: cls.wrap(v, f"{where}.{k}") for k, v in value.items()})
        part.where = where
        return part

    def __missing__(self, key: str) -> Any:
        raise BundleError(f"{self.where} has no {key!r}; convert the checkpoint again.")


class _VerifiedCache:
    """Files whose checksum was verified, keyed by real path, with the size, mtime and inode they had then.

    Kept in the app's cache folder (engine/runtime/cache_folder.py), not in the bundle, which may be read-only;
    never through a link. Losing it only means verifying again."""

    def __init__(self, path: Path | None, entries: dict[str, list]):
        self.path, self.entries, self.changed = path, entries, False

    @classmethod
    def load(cls) -> _VerifiedCache:
        path = cache_dir() / "verified-bundle-files.json"
        try:
            entries = json.loads(read_own_file(path, MAX_VERIFIED_BYTES).decode("utf-8"))
            if not isinstance(entries, dict):
                entries = {}
        except (OSError, UnicodeDecodeError, ValueError, RecursionError):
            entries = {}
        return cls(path, entries)

    @staticmethod
    def _key(f: Path) -> tuple[str, list]:
        st = f.stat()
        return os.path.realpath(f), [st.st_size, st.st_mtime_ns, st.st_ino]

    def has(self, f: Path, sha256: str) -> bool:
        key, stamp = self._key(f)
        return self.entries.get(key) == [*stamp, sha256]

    def add(self, f: Path, sha256: str) -> None:
        key, stamp = self._key(f)
        self.entries[key] = [*stamp, sha256]
        self.changed = True

    def save(self) -> None:
        if not self.changed or self.path is None:
            return
        live = {k: v for k, v in self.entries.items() if os.path.exists(k)}  # forget deleted bundles
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_own_file(self.path, json.dumps(live).encode())
        except OSError:
            pass  # no cache: the next load verifies again
