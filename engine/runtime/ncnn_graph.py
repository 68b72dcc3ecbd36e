"""A tiny writer for ncnn .param/.bin files, and the one reader of .param text (parse_param).

The converter builds every network with this instead of pnnx: layers are added in topological order, blobs
consumed more than once get a Split layer automatically (ncnn requires one consumer per blob), and weights are
serialised with the tags ncnn's ModelBin expects.

.param syntax: magic 7767517, "layer_count blob_count", then one line per layer:
    Type name n_in n_out in_blobs... out_blobs... k=v ...
Integer params are written as ints, float params with a decimal point (ncnn tells them apart by that), and
array params as -23300-k=n,v1,v2,...
.bin: for each layer in order, its weights. A "tagged" weight starts with a 4-byte tag
(0 = fp32, 0x01306B47 = fp16) and is padded to 4 bytes; a "raw" weight is plain fp32 (bias, norm scales).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, overload

import numpy as np

from ..errors import BundleError

PARAM_MAGIC = 7767517
FP16_TAG = 0x01306B47

ParamValue = int | float | Sequence[int] | Sequence[float]


@dataclass
class Weight:
    """One weight array in a layer's .bin record. `tagged` weights may be stored as fp16."""

    data: np.ndarray
    tagged: bool = True
    fp16: bool = False

    def to_bytes(self) -> bytes:
        arr = np.ascontiguousarray(self.data)
        if not self.tagged:
            return arr.astype("<f4", copy=False).tobytes()
        if self.fp16:
            payload = arr.astype("<f2", copy=False).tobytes()
            payload += b"\0" * (-len(payload) % 4)
            return struct.pack("<I", FP16_TAG) + payload
        return struct.pack("<I", 0) + arr.astype("<f4", copy=False).tobytes()


@dataclass
class Packed:
    """A weight record the converter serialised itself (formats with their own layout, e.g. q8 blocks)."""

    payload: bytes

    def to_bytes(self) -> bytes:
        return self.payload


def tagged(arr: np.ndarray, fp16: bool = False) -> Weight:
    return Weight(np.asarray(arr, dtype=np.float32), tagged=True, fp16=fp16)


def raw(arr: np.ndarray) -> Weight:
    return Weight(np.asarray(arr, dtype=np.float32), tagged=False)


@dataclass
class _Layer:
    type: str
    name: str
    inputs: list[str]
    outputs: list[str]
    params: dict[int, ParamValue]
    weights: list[Weight | Packed]


def _format_value(v: ParamValue) -> str:
    if isinstance(v, bool):
        return str(int(v))
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        return _format_float(float(v))
    raise TypeError(f"not a scalar param: {v!r}")


def _format_float(f: float) -> str:
    text = repr(f)
    if text in ("inf", "-inf", "nan"):
        raise ValueError("ncnn params cannot hold inf/nan")
    if "." not in text and "e" not in text:
        text += ".0"
    return text


def _format_param(key: int, v: ParamValue) -> str:
    if isinstance(v, (list, tuple, np.ndarray)):
        items = list(v)
        return f"{-23300 - key}={len(items)}," + ",".join(_format_value(x) for x in items)
    return f"{key}={_format_value(v)}"


@dataclass
class Graph:
    """Collects layers, then writes <name>.param and <name>.bin."""

    layers: list[_Layer] = field(default_factory=list)
    _names: set[str] = field(default_factory=set)
    _counter: int = 0
    _outputs: set[str] = field(default_factory=set)
    split_params: dict[int, ParamValue] = field(default_factory=dict)  # params of the Split layers it adds

    def _fresh(self, prefix: str) -> str:
        self._counter += 1
        return f"{prefix}_{self._counter}"

    def input(self, name: str) -> str:
        """Declare a graph input blob (dynamic shape)."""
        self.layer("Input", [], outputs=[name], name=name)
        return name

    @overload
    def layer(
        self,
        type: str,
        inputs: Sequence[str],
        outputs: Literal[1] = 1,
        params: Mapping[int, ParamValue] | None = None,
        weights: Sequence[Weight | Packed] = (),
        name: str | None = None,
    ) -> str: ...

    @overload
    def layer(
        self,
        type: str,
        inputs: Sequence[str],
        outputs: int | Sequence[str],
        params: Mapping[int, ParamValue] | None = None,
        weights: Sequence[Weight | Packed] = (),
        name: str | None = None,
    ) -> str | list[str]: ...

    def layer(
        self,
        type: str,
        inputs: Sequence[str],
        outputs: int | Sequence[str] = 1,
        params: Mapping[int, ParamValue] | None = None,
        weights: Sequence[Weight | Packed] = (),
        name: str | None = None,
    ) -> str | list[str]:
        """Add a layer. Returns its output blob name (or the list of names when it has several)."""
        name = name or self._fresh(type.lower())
        if name in self._names:
            raise ValueError(f"duplicate layer name {name}")
        self._names.add(name)
        if isinstance(outputs, int):
            outs = [name if outputs == 1 else f"{name}_out{i}" for i in range(outputs)]
        else:
            outs = list(outputs)
        self.layers.append(_Layer(type, name, list(inputs), outs, dict(params or {}), list(weights)))
        return outs[0] if len(outs) == 1 else outs

    def layer_outputs(
        self,
        type: str,
        inputs: Sequence[str],
        outputs: int | Sequence[str],
        params: Mapping[int, ParamValue] | None = None,
        weights: Sequence[Weight | Packed] = (),
        name: str | None = None,
    ) -> list[str]:
        """Add a layer and return the names of all its outputs, one or several, as a list."""
        blobs = self.layer(type, inputs, outputs, params, weights, name)
        return [blobs] if isinstance(blobs, str) else blobs

    def output(self, blob: str) -> str:
        """Mark a blob as extracted by the caller: it keeps its name even when other layers consume it."""
        self._outputs.add(blob)
        return blob

    def _with_splits(self) -> list[_Layer]:
        consumers: dict[str, int] = {}
        for layer in self.layers:
            for b in layer.inputs:
                consumers[b] = consumers.get(b, 0) + 1
        for b in self._outputs:
            if b in consumers:
                consumers[b] += 1
        produced = {b for layer in self.layers for b in layer.outputs}
        missing = set(consumers) - produced
        if missing:
            raise ValueError(f"blobs consumed but never produced: {sorted(missing)}")

        result: list[_Layer] = []
        next_use: dict[str, list[str]] = {}
        for layer in self.layers:
            ins = [next_use[b].pop(0) if b in next_use else b for b in layer.inputs]
            outs = list(layer.outputs)
            splits: list[_Layer] = []
            for i, b in enumerate(outs):
                n = consumers.get(b, 0)
                if n <= 1:
                    continue
                names = [f"{b}__s{j}" for j in range(n)]
                if layer.type == "Input":
                    src = b  # inputs are fed by name: keep it
                else:
                    src = f"{b}__pre"
                    outs[i] = src
                    if b in self._outputs:
                        names[-1] = b  # the extracted copy keeps the public name
                next_use[b] = list(names)
                splits.append(_Layer("Split", f"{b}__split", [src], names, dict(self.split_params), []))
            result.append(_Layer(layer.type, layer.name, ins, outs, layer.params, layer.weights))
            result.extend(splits)
        return result

    def param_text(self) -> str:
        layers = self._with_splits()
        blobs = {b for layer in layers for b in layer.outputs}
        lines = [str(PARAM_MAGIC), f"{len(layers)} {len(blobs)}"]
        for layer in layers:
            parts = [layer.type, layer.name, str(len(layer.inputs)), str(len(layer.outputs))]
            parts += layer.inputs + layer.outputs
            parts += [_format_param(k, v) for k, v in sorted(layer.params.items())]
            lines.append(" ".join(parts))
        return "\n".join(lines) + "\n"

    def write_bin(self, f) -> int:
        """Write weights in layer order; returns the byte count."""
        total = 0
        for layer in self.layers:
            for w in layer.weights:
                data = w.to_bytes()
                f.write(data)
                total += len(data)
        return total

    def save(self, param_path: str | os.PathLike, bin_path: str | os.PathLike) -> None:
        param_path, bin_path = Path(param_path), Path(bin_path)
        param_path.write_text(self.param_text(), encoding="utf-8")
        with open(bin_path, "wb") as f:
            self.write_bin(f)


@dataclass(frozen=True)
class ParamLayer:
    """One layer line of a .param file, as written: Type name n_in n_out inputs... outputs... then its tokens."""

    type: str
    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    tokens: tuple[str, ...] = ()  # the layer's parameters as written: k=v, arrays as -23300-k=n,v1,...

    @property
    def params(self) -> dict[str, str]:
        """The scalar parameters, key -> value as written (arrays left out)."""
        return dict(t.split("=", 1) for t in self.tokens if "=" in t and not t.startswith("-"))

    def text(self) -> str:
        return " ".join([self.type, self.name, str(len(self.inputs)), str(len(self.outputs)),
                         *self.inputs, *self.outputs, *self.tokens])


def parse_param(text: str) -> list[ParamLayer]:
    """The layers of .param text, in order; BundleError when it is not .param text."""
    lines = text.strip().splitlines()
    if not lines or lines[0].strip() != str(PARAM_MAGIC):
        raise BundleError("not an ncnn .param file (bad magic number)")
    layers = []
    for line in lines[2:]:
        t = line.split()
        if not t:
            continue
        try:
            n_in, n_out = int(t[2]), int(t[3])
        except (IndexError, ValueError):
            raise BundleError(f"not an ncnn .param layer line: {line[:80]!r}") from None
        layers.append(ParamLayer(t[0], t[1], tuple(t[4:4 + n_in]), tuple(t[4 + n_in:4 + n_in + n_out]),
                                 tuple(t[4 + n_in + n_out:])))
    return layers


def layers_param_text(layers: Sequence[ParamLayer]) -> str:
    """.param text of these layers (the header counts them and the blobs they make)."""
    blobs = {b for layer in layers for b in layer.outputs}
    return "\n".join([str(PARAM_MAGIC), f"{len(layers)} {len(blobs)}", *(layer.text() for layer in layers)]) + "\n"
