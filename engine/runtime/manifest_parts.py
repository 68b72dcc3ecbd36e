"""The bundle manifest's parts as typed records: the converter writes one (to_manifest), a network reads it
(from_manifest), and mypy checks both sides against the one declaration, where the manifest was a table of string
keys written in convert/ and read in nets/. Reading keeps old bundles opening: a key they lack has its default,
a key that must be there is a BundleError naming it (Bundle.part's tables raise it), a value of the wrong type is
a BundleError saying so.

SpeakerPart is the first part declared this way; the others still speak in keys (see docs/architecture.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import BundleError


def _whole(info: Mapping[str, Any], key: str, where: str) -> int:
    value = info[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise BundleError(f"{where}: {key!r} is not a whole number ({value!r}); convert the checkpoint again.")
    return value


def _text(info: Mapping[str, Any], key: str, where: str) -> str:
    value = info[key]
    if not isinstance(value, str):
        raise BundleError(f"{where}: {key!r} is not a name ({value!r}); convert the checkpoint again.")
    return value


@dataclass(frozen=True)
class SpeakerPart:
    """The speaker encoder (x-vector network) of a Base model; `present` False for the other kinds, which have
    none (then only model_type is recorded)."""

    present: bool
    model_type: str | None = None  # tts_model_type of the checkpoint ("base", "custom_voice", ...)
    graph: str = ""  # the net's .param/.bin name in the bundle
    input: str = ""  # blob names
    output: str = ""
    mel_dim: int = 0  # mel channels in
    enc_dim: int = 0  # x-vector length out (the talker's width)
    sample_rate: int = 0
    min_frames: int = 0  # the fewest mel frames the network takes
    channels: tuple[int, ...] = ()

    def to_manifest(self) -> dict[str, Any]:
        if not self.present:
            return {"present": False, "model_type": self.model_type}
        return {"present": True, "graph": self.graph, "input": self.input, "output": self.output,
                "mel_dim": self.mel_dim, "enc_dim": self.enc_dim, "sample_rate": self.sample_rate,
                "min_frames": self.min_frames, "channels": list(self.channels)}

    @classmethod
    def from_manifest(cls, info: Mapping[str, Any], where: str = "the speaker part") -> SpeakerPart:
        if not info.get("present", False):
            model_type = info.get("model_type")
            return cls(False, model_type if isinstance(model_type, str) else None)
        channels = info.get("channels", [])
        if not isinstance(channels, list) or not all(isinstance(c, int) and not isinstance(c, bool) for c in channels):
            raise BundleError(f"{where}: 'channels' is not a list of whole numbers; convert the checkpoint again.")
        return cls(True, None, _text(info, "graph", where), _text(info, "input", where), _text(info, "output", where),
                   _whole(info, "mel_dim", where), _whole(info, "enc_dim", where), _whole(info, "sample_rate", where),
                   _whole(info, "min_frames", where), tuple(channels))
