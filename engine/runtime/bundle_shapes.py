"""Every network's layer shapes checked against the config it was converted from, when a bundle opens.

The manifest's sizes and checksums cover only the files it lists: a manifest with an empty file list let a
.param whose RMSNorm width was changed (192 -> 576) load and "speak" noise with exit 0. The .param files are text
and say each layer's widths, so the widths are compared with what the model's config allows, whatever the
manifest lists (about 10 ms for the full-size talker, code predictor and speech decoder together):

- the talker and code predictor: one SDPA per layer; every RMSNorm as wide as the stack or an attention head,
  with the stack's epsilon; every InnerProduct (and the 8-bit Gemm of q8 bundles) maps between widths of that
  stack (hidden, attention, fused q/k/v, MLP, fused gate/up, the talker's width, the vocabularies; an
  InnerProduct may also read the few outlier channels a q8 Linear splits off, as many as the manifest lists);
- the speech decoder and the codec encoder's transformer: one SDPA per layer, every RMSNorm and LayerNorm as
  wide as a width its config names;
- the text table's shape (a table of the wrong shape was reported as a problem with the text);
- the typed parts themselves (manifest_parts.py), read here so that a damaged value is refused at open (a
  manifest's max_position_embeddings of -1 made every text "too long").
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from ..errors import BundleError
from ..io.safefile import npy_bytes_needed
from .manifest_parts import (
    CodecDecoderPart,
    CodecEncoderPart,
    ManifestPart,
    SpeakerPart,
    StackShape,
    TalkerPart,
    TextPart,
)
from .whisper_part import WhisperPart

Record = TypeVar("Record", bound=ManifestPart)


class Bundle(Protocol):
    """What the check reads of a bundle being opened (bundle.Bundle, which calls the check: named here, not
    imported, so the two modules do not import each other)."""

    path: Path

    @property
    def speech_config(self) -> dict[str, Any]: ...

    def has(self, kind: type[ManifestPart]) -> bool: ...

    def record(self, kind: type[Record]) -> Record: ...

    def file(self, rel: str) -> Path: ...

MAX_PARAM_BYTES = 16 * 2**20  # the full-size talker's .param is under 100 KB


@dataclass(frozen=True)
class Layer:
    kind: str
    name: str
    params: dict[str, str]

    def number(self, key: str, default: float | None = None) -> float | None:
        value = self.params.get(key)
        if value is None:
            return default
        try:
            return float(value)
        except ValueError:
            return math.nan


def param_layers(text: str) -> list[Layer]:
    """The layers of an ncnn .param text (ValueError when it is not one)."""
    lines = [line.split() for line in text.splitlines() if line.strip()]
    if not lines or lines[0] != ["7767517"] or len(lines) < 2:
        raise ValueError("it is not an ncnn network description")
    layers = []
    for words in lines[2:]:
        if len(words) < 4:
            raise ValueError(f"a layer line is cut short ({' '.join(words)[:60]})")
        try:
            n_in, n_out = int(words[2]), int(words[3])
        except ValueError:
            raise ValueError(f"layer {words[1]} has no input and output counts") from None
        params = dict(w.split("=", 1) for w in words[4 + n_in + n_out:] if "=" in w)
        layers.append(Layer(words[0], words[1], params))
    return layers


def check_layer_shapes(bundle: Bundle) -> None:
    """BundleError naming the first network, layer and width that the bundle's config does not allow; the typed
    parts are read here, so a damaged value is refused when the bundle opens."""
    speech_config = bundle.speech_config  # the config the speech tokenizer's widths are checked against
    if bundle.has(WhisperPart):
        bundle.record(WhisperPart)
    if bundle.has(SpeakerPart):
        bundle.record(SpeakerPart)
    if bundle.has(TextPart):
        _check_text(bundle, bundle.record(TextPart))
    if bundle.has(TalkerPart):
        talker = bundle.record(TalkerPart)
        heads = {talker.vocab_size, talker.codebook_size, talker.talker.hidden}
        split_widths = {len(c) for c in talker.split_channels.values()}  # outlier channels' fp32 products (q8_split)
        _check_stack(bundle, talker.talker_graph, talker.talker, heads, split_widths)
        _check_stack(bundle, talker.cp_graph, talker.code_predictor, heads, split_widths)
    if bundle.has(CodecDecoderPart):
        dec = bundle.record(CodecDecoderPart)
        config = speech_config.get("decoder_config") or {}
        _check_norms(bundle, dec.graph, _widths(config, dec.to_manifest()), dec.layers)
    if bundle.has(CodecEncoderPart):
        enc = bundle.record(CodecEncoderPart)
        config = speech_config.get("encoder_config") or {}
        _check_norms(bundle, enc.tf_net, _widths(config, enc.to_manifest()), enc.layers)


def _check_text(bundle: Bundle, text: TextPart) -> None:
    """The text table's shape (a wrong one was reported as a problem with the text; TextPart checks the context
    length, a damaged one of which made every text "too long")."""
    table = text.table
    expected = (text.text_vocab, text.hidden)
    path = bundle.file(f"{table}.npy")
    try:
        with open(path, "rb") as f:
            shape, dtype, _needed, _offset = npy_bytes_needed(f)
    except FileNotFoundError:
        raise BundleError(f"model bundle {bundle.path} is incomplete: {table}.npy is missing") from None
    except (OSError, ValueError, SyntaxError) as e:
        raise _damaged(bundle, f"{table}.npy", f"it is not a table ({str(e)[:80] or type(e).__name__})") from None
    if tuple(shape) != expected:
        raise _damaged(bundle, f"{table}.npy", f"its shape is {tuple(shape)}; the config's text vocabulary and "
                                               f"width make {expected}")


def _check_stack(bundle: Bundle, graph: str, stack: StackShape, heads: set[int], split_widths: set[int]) -> None:
    hidden, head_dim, layers = stack.hidden, stack.head_dim, stack.layers
    attention, kv = stack.heads * head_dim, stack.kv_heads * head_dim
    mlp = stack.intermediate
    outputs = {hidden, attention, kv, attention + 2 * kv, mlp, 2 * mlp} | heads
    inputs = {hidden, attention, mlp} | heads | split_widths
    layers_seen = 0
    for layer in _layers(bundle, graph):
        where = f"{graph}.param, layer {layer.name}"
        if layer.kind == "SDPA":
            layers_seen += 1
        elif layer.kind == "RMSNorm":
            width, eps = layer.number("0"), layer.number("1", 0.0)
            _allowed(bundle, where, "RMSNorm width", width, {hidden, head_dim})
            if eps is None or not math.isclose(eps, stack.eps, rel_tol=1e-3):
                raise _damaged(bundle, where, f"its RMSNorm epsilon {layer.params.get('1')} is not the config's "
                                              f"{stack.eps}")
        elif layer.kind == "InnerProduct":
            out, size = layer.number("0"), layer.number("2")
            _allowed(bundle, where, "output width", out, outputs)
            if size is not None and out:
                _allowed(bundle, where, "input width", size / out, inputs)
        elif layer.kind == "Gemm" and layer.params.get("5") == "1":  # a constant B: 8-bit weights, or the one-hot
            # columns that pick a split Linear's outlier channels (q8_split.selection)
            _allowed(bundle, where, "output width", layer.number("8"), outputs | split_widths)
            _allowed(bundle, where, "input width", layer.number("9"), inputs)
    if layers_seen != layers:
        raise _damaged(bundle, f"{graph}.param", f"it has {layers_seen} attention layers; the config has {layers}")


def _check_norms(bundle: Bundle, graph: str, widths: set[int], layers: int) -> None:
    layers_seen = 0
    for layer in _layers(bundle, graph):
        if layer.kind == "SDPA":
            layers_seen += 1
        elif layer.kind in ("RMSNorm", "LayerNorm"):
            _allowed(bundle, f"{graph}.param, layer {layer.name}", f"{layer.kind} width", layer.number("0"), widths)
    if layers_seen != layers:
        raise _damaged(bundle, f"{graph}.param", f"it has {layers_seen} attention layers; the config has {layers}")


def _widths(*configs: dict[str, Any]) -> set[int]:
    """Every whole number a config names (widths, channel lists): the widths its layers may have."""
    found: set[int] = set()

    def walk(value: Any) -> None:
        if isinstance(value, bool):
            return
        if isinstance(value, int):
            found.add(value)
        elif isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    for config in configs:
        walk(config)
    return found


def _layers(bundle: Bundle, graph: str) -> list[Layer]:
    path = bundle.file(f"{graph}.param")
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_PARAM_BYTES + 1)
        if len(data) > MAX_PARAM_BYTES:
            raise ValueError(f"it is larger than the {MAX_PARAM_BYTES // 2**20} MB a network description has")
        return param_layers(data.decode("utf-8"))
    except FileNotFoundError:
        raise BundleError(f"model bundle {bundle.path} is incomplete: {graph}.param is missing") from None
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise _damaged(bundle, f"{graph}.param", str(e) or type(e).__name__) from None


def _allowed(bundle: Bundle, where: str, what: str, value: float | None, allowed: Iterable[int]) -> None:
    allowed = set(allowed)
    if value is None or not math.isfinite(value) or value != int(value) or int(value) not in allowed:
        shown = "none" if value is None else (f"{value:g}" if math.isfinite(value) else "not a number")
        raise _damaged(bundle, where, f"its {what} {shown} is not one the model's config has "
                                      f"({', '.join(map(str, sorted(allowed)[:8]))}{'...' if len(allowed) > 8 else ''})")


def _damaged(bundle: Bundle, where: str, why: str) -> BundleError:
    return BundleError(f"The model bundle {bundle.path} is damaged: {where}: {why}; convert the checkpoint again.")
