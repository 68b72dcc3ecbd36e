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
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ncnn
import numpy as np

from .errors import BundleError

FORMAT = "qwen3tts-bundle"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
PRECISIONS = ("fp32", "fp16", "bf16", "q8")
NCNN_PRECISIONS = ("fp32", "fp16", "bf16")  # ncnn option sets; q8 weights live in the graphs themselves


def make_net_options(net: ncnn.Net, precision: str = "fp32", threads: int = 2) -> None:
    """Set every ncnn option we depend on; the pip wheel defaults to fp16 arithmetic, which breaks parity."""
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
    _tables: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    @classmethod
    def open(cls, path: str | os.PathLike) -> Bundle:
        path = Path(path)
        mpath = path / MANIFEST
        if not path.is_dir():
            raise BundleError(f"{path} is not a folder; a model bundle is a folder made by 'qwen3tts convert'")
        if not mpath.is_file():
            raise BundleError(f"{path} is not a model bundle (no {MANIFEST}); convert a checkpoint first")
        try:
            manifest = json.loads(mpath.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise BundleError(f"{mpath} is damaged: {e}") from None
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
            raise BundleError(f"{path} is not a Qwen3-TTS Studio bundle")
        version = manifest.get("version")
        if version != FORMAT_VERSION:
            raise BundleError(
                f"{path} has bundle format version {version}; this app reads version {FORMAT_VERSION}: "
                "convert the checkpoint again"
            )
        for rel, info in manifest.get("files", {}).items():
            f = path / rel
            if not f.is_file():
                raise BundleError(f"model bundle {path} is incomplete: {rel} is missing")
            size = f.stat().st_size
            if size != info["size"]:
                raise BundleError(
                    f"model bundle {path} is damaged: {rel} has {size} bytes, expected {info['size']}"
                )
        return cls(path, manifest)

    def verify_checksums(self) -> None:
        """Full integrity check (reads every byte); slow for full-size bundles."""
        for rel, info in self.manifest.get("files", {}).items():
            if sha256_file(self.path / rel) != info["sha256"]:
                raise BundleError(f"model bundle {self.path} is damaged: {rel} fails its checksum")

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

    def part(self, name: str) -> dict[str, Any]:
        """Per-network metadata written by the converter (blob names, sizes, ids)."""
        try:
            return self.manifest["parts"][name]
        except KeyError:
            raise BundleError(f"model bundle {self.path} has no '{name}' part; convert it again") from None

    def file(self, rel: str) -> Path:
        return self.path / rel

    def table(self, name: str) -> np.ndarray:
        """A numpy table, memory-mapped read-only (large embedding tables are never read whole)."""
        if name not in self._tables:
            f = self.path / f"{name}.npy"
            try:
                self._tables[name] = np.load(f, mmap_mode="r")
            except (OSError, ValueError) as e:
                raise BundleError(f"model bundle {self.path}: table {name} is unreadable: {e}") from None
        return self._tables[name]

    def net(self, name: str, threads: int = 2, precision: str | None = None) -> ncnn.Net:
        """Load one ncnn network with explicit options."""
        net = ncnn.Net()
        make_net_options(net, precision or self.runtime_precision, threads)
        param, binf = self.path / f"{name}.param", self.path / f"{name}.bin"
        if net.load_param(str(param)) != 0:
            raise BundleError(f"model bundle {self.path}: {name}.param failed to load")
        if net.load_model(str(binf)) != 0:
            raise BundleError(f"model bundle {self.path}: {name}.bin failed to load")
        return net

    @property
    def runtime_precision(self) -> str:
        """fp16 bundles store fp16 weights; bf16 bundles store fp32 and let ncnn use bf16 storage; q8 bundles
        carry their 8-bit weights inside the talker graphs and run everything else in fp32."""
        return "fp32" if self.precision == "q8" else self.precision


class BundleWriter:
    """Writes a bundle into a temporary sibling folder and renames it into place when complete."""

    def __init__(self, dest: str | os.PathLike, overwrite: bool = False):
        self.dest = Path(dest)
        if self.dest.exists() and not overwrite:
            if not (self.dest.is_dir() and not any(self.dest.iterdir())):
                raise BundleError(f"{self.dest} already exists; choose a new folder or remove it")
        self.dest.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = Path(tempfile.mkdtemp(prefix=f".{self.dest.name}.", dir=self.dest.parent))
        self.manifest: dict[str, Any] = {"format": FORMAT, "version": FORMAT_VERSION, "parts": {}}

    def __enter__(self) -> BundleWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def path(self, rel: str) -> Path:
        p = self.tmp / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        return p

    def add_graph(self, name: str, graph) -> None:
        graph.save(self.path(f"{name}.param"), self.path(f"{name}.bin"))

    def add_table(self, name: str, array: np.ndarray) -> None:
        np.save(self.path(f"{name}.npy"), np.ascontiguousarray(array))

    def add_json(self, rel: str, data: Any) -> None:
        self.path(rel).write_text(json.dumps(data, indent=1, ensure_ascii=False), encoding="utf-8")

    def copy_file(self, src: Path, rel: str) -> None:
        shutil.copyfile(src, self.path(rel))

    def set_part(self, name: str, info: dict[str, Any]) -> None:
        self.manifest["parts"][name] = info

    def finish(self) -> Path:
        files = {}
        for f in sorted(self.tmp.rglob("*")):
            if f.is_file():
                rel = f.relative_to(self.tmp).as_posix()
                files[rel] = {"size": f.stat().st_size, "sha256": sha256_file(f)}
        self.manifest["files"] = files
        (self.tmp / MANIFEST).write_text(json.dumps(self.manifest, indent=1, ensure_ascii=False), encoding="utf-8")
        if self.dest.exists():
            old = self.dest.with_name(f".{self.dest.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(self.dest, old)
            os.replace(self.tmp, self.dest)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(self.tmp, self.dest)
        return self.dest
