"""The Whisper bundle's one manifest part as a typed record (the text-to-speech parts are in manifest_parts.py):
engine/convert/whisper.py writes it, engine/nets/whisper.py and the transcriber read it (Bundle.record), and a
damaged value is one BundleError line naming the bundle, the part and the key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, ClassVar

from ..errors import BundleError
from .manifest_values import positive, real, table, text

# preprocessor_config.json's front-end values, recorded as the checkpoint has them (None where it has none)
FRONT_END = ("feature_size", "sampling_rate", "n_fft", "hop_length", "chunk_length", "n_samples", "nb_max_frames")


@dataclass(frozen=True)
class WhisperSpec:
    """The shapes of one Whisper model (the converter reads them from its config.json)."""

    mels: int
    d_model: int
    encoder_layers: int
    decoder_layers: int
    encoder_heads: int
    decoder_heads: int
    source_positions: int
    target_positions: int
    vocab_size: int
    embed_scale: float  # the token table is stored times this (sqrt(d_model) or 1)

    def to_manifest(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_manifest(cls, info: Mapping[str, Any], where: str) -> WhisperSpec:
        spec = cls(positive(info, "mels", where), positive(info, "d_model", where),
                   positive(info, "encoder_layers", where), positive(info, "decoder_layers", where),
                   positive(info, "encoder_heads", where), positive(info, "decoder_heads", where),
                   positive(info, "source_positions", where), positive(info, "target_positions", where),
                   positive(info, "vocab_size", where), real(info, "embed_scale", where))
        for key in ("encoder_heads", "decoder_heads"):
            if spec.d_model % getattr(spec, key):
                raise BundleError(f"{where}: 'd_model' {spec.d_model} is not a multiple of {key!r} "
                                  f"({getattr(spec, key)}); convert the checkpoint again.")
        return spec


@dataclass(frozen=True)
class WhisperPart:
    """The encoder and decoder graphs, the token and position tables, the model's shapes and its front end."""

    PART: ClassVar[str] = "whisper"

    encoder_graph: str
    decoder_graph: str
    tokens_table: str  # (vocab, d_model), times embed_scale
    positions_table: str  # (target_positions, d_model)
    spec: WhisperSpec
    preprocessor: Mapping[str, int | None]  # FRONT_END, each a whole number or None

    def to_manifest(self) -> dict[str, Any]:
        return {"encoder_graph": self.encoder_graph, "decoder_graph": self.decoder_graph,
                "tables": {"tokens": self.tokens_table, "positions": self.positions_table},
                "spec": self.spec.to_manifest(), "preprocessor": {k: self.preprocessor.get(k) for k in FRONT_END}}

    @classmethod
    def from_manifest(cls, info: Mapping[str, Any], where: str = "the whisper part") -> WhisperPart:
        tables = table(info, "tables", where)
        front_end = table(info, "preprocessor", where)
        for key in FRONT_END:
            value = front_end.get(key)
            if value is not None and (type(value) is not int or value < 1):
                raise BundleError(f"{where}: the front end's {key!r} is not a positive whole number ({value!r}); "
                                  "convert the checkpoint again.")
        return cls(text(info, "encoder_graph", where), text(info, "decoder_graph", where),
                   text(tables, "tokens", f"{where}, its tables"), text(tables, "positions", f"{where}, its tables"),
                   WhisperSpec.from_manifest(table(info, "spec", where), f"{where}, its spec"),
                   {k: front_end.get(k) for k in FRONT_END})
