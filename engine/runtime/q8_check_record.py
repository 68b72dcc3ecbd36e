"""The 8-bit check's record in a bundle manifest ("q8_check"): what engine/convert/q8_check.py measured when the
bundle was made, read back by the model listings. One self-contained typed class; from_json refuses anything
but what to_json writes, with one line naming the bad field.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..errors import BundleError

RECORD_VERSION = 1
OUTCOMES = ("q8", "float")  # within the bound as 8-bit (some Linears perhaps fp32), or fell back to a float bundle
NETWORKS = ("talker", "code_predictor")


class CheckRecordError(BundleError):
    """A manifest's 8-bit check record that is not what the checker writes."""


def _number(data: dict[str, Any], key: str, where: str, low: float = 0.0, high: float = math.inf) -> float:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not low <= value <= high:
        raise CheckRecordError(f"the 8-bit check record is damaged: {where}{key} is {value!r}, not a number "
                               f"from {low:g} to {high:g}")
    return float(value)


def _table(data: Any, where: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise CheckRecordError(f"the 8-bit check record is damaged: {where or 'the record'} is not a table")
    return data


@dataclass(frozen=True)
class NetworkAccuracy:
    """One network's teacher-forced figures against fp32: final, and before any Linear was promoted."""

    kl: float  # mean sampling KL(fp32 || bundle), T 0.9, top-k 50 (q8_check.sampling_kl)
    top1: float  # share of positions whose most likely code equals fp32's
    kl_unchecked: float
    top1_unchecked: float

    def to_json(self) -> dict[str, float]:
        return {"kl": self.kl, "top1": self.top1, "kl_unchecked": self.kl_unchecked,
                "top1_unchecked": self.top1_unchecked}

    @classmethod
    def from_json(cls, data: Any, where: str) -> NetworkAccuracy:
        d = _table(data, where)
        return cls(_number(d, "kl", where + "."), _number(d, "top1", where + ".", 0, 1),
                   _number(d, "kl_unchecked", where + "."), _number(d, "top1_unchecked", where + ".", 0, 1))


@dataclass(frozen=True)
class PromotedLayer:
    """A Linear kept in fp32 and why: its 8-bit product alone moved its network's logits by `kl_alone`."""

    name: str  # a Linear (engine/convert/q8_layers.py linear_name, "talker.3.down") or a whole layer ("talker.3")
    kl_alone: float
    extra_bytes_per_frame: int  # weight bytes one frame reads more than at 8 bits

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "kl_alone": self.kl_alone, "extra_bytes_per_frame": self.extra_bytes_per_frame}

    @classmethod
    def from_json(cls, data: Any, where: str) -> PromotedLayer:
        d = _table(data, where)
        name = d.get("name")
        if not isinstance(name, str) or not name.startswith(tuple(f"{n}." for n in NETWORKS)) or len(name) > 80:
            raise CheckRecordError(f"the 8-bit check record is damaged: {where}.name is {name!r}")
        extra = d.get("extra_bytes_per_frame")
        if type(extra) is not int or extra < 0:
            raise CheckRecordError(f"the 8-bit check record is damaged: {where}.extra_bytes_per_frame is {extra!r}")
        return cls(name, _number(d, "kl_alone", where + "."), extra)


@dataclass(frozen=True)
class Q8CheckRecord:
    bound: float  # the largest KL allowed per network
    talker: NetworkAccuracy
    code_predictor: NetworkAccuracy
    promoted: tuple[PromotedLayer, ...]
    promoted_share: float  # share of the Linear weights kept fp32
    outcome: str  # OUTCOMES
    reason: str  # why it fell back to a float bundle ("" when it did not)
    rounds: int  # bundles measured (1: the first one was within the bound)
    seconds: float  # the whole check
    languages: tuple[str, ...]  # of the calibration prompts
    frames: int  # teacher-forced frames per prompt
    # 8-bit Linears whose outlier input channels were split off into fp32 (engine/convert/q8_split.py; the
    # manifest's talker part names the channels); absent from records made before, and when none were
    split: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"version": RECORD_VERSION, "bound": self.bound, "talker": self.talker.to_json(),
                "code_predictor": self.code_predictor.to_json(), "promoted": [p.to_json() for p in self.promoted],
                "promoted_share": self.promoted_share, "outcome": self.outcome, "reason": self.reason,
                "rounds": self.rounds, "seconds": self.seconds, "languages": list(self.languages),
                "frames": self.frames} | ({"split": list(self.split)} if self.split else {})

    @classmethod
    def from_json(cls, data: Any) -> Q8CheckRecord:
        d = _table(data, "")
        if d.get("version") != RECORD_VERSION:
            raise CheckRecordError(f"the 8-bit check record has version {d.get('version')!r}; this app reads "
                                   f"{RECORD_VERSION}: check the model again")
        outcome, reason = d.get("outcome"), d.get("reason")
        if outcome not in OUTCOMES:
            raise CheckRecordError(f"the 8-bit check record is damaged: outcome is {outcome!r}")
        if not isinstance(reason, str) or len(reason) > 500 or "\n" in reason:
            raise CheckRecordError("the 8-bit check record is damaged: reason is not one line of text")
        promoted = d.get("promoted")
        if not isinstance(promoted, list) or len(promoted) > 10000:
            raise CheckRecordError("the 8-bit check record is damaged: promoted is not a list")
        languages = d.get("languages")
        if not isinstance(languages, list) or not all(isinstance(x, str) and len(x) < 16 for x in languages):
            raise CheckRecordError("the 8-bit check record is damaged: languages is not a list of names")
        split = d.get("split", [])
        if not isinstance(split, list) or len(split) > 10000 or not all(
                isinstance(n, str) and n.startswith(tuple(f"{net}." for net in NETWORKS)) and len(n) <= 80
                for n in split):
            raise CheckRecordError("the 8-bit check record is damaged: split is not a list of Linear names")
        rounds, frames = d.get("rounds"), d.get("frames")
        if type(rounds) is not int or rounds < 1 or type(frames) is not int or frames < 1:
            raise CheckRecordError(f"the 8-bit check record is damaged: rounds {rounds!r}, frames {frames!r}")
        return cls(_number(d, "bound", ""), NetworkAccuracy.from_json(d.get("talker"), "talker"),
                   NetworkAccuracy.from_json(d.get("code_predictor"), "code_predictor"),
                   tuple(PromotedLayer.from_json(p, f"promoted[{i}]") for i, p in enumerate(promoted)),
                   _number(d, "promoted_share", "", 0, 1), outcome, reason, rounds, _number(d, "seconds", ""),
                   tuple(languages), frames, tuple(split))

    @property
    def within(self) -> bool:
        return self.talker.kl <= self.bound and self.code_predictor.kl <= self.bound

    def summary(self) -> str:
        """One phrase for listings, e.g. "8-bit, checked: KL 8.1e-04 / 1.2e-03 (talker / code predictor)"."""
        figures = f"KL {self.talker.kl:.1e} / {self.code_predictor.kl:.1e} (talker / code predictor)"
        if self.outcome == "float":
            return f"float: 8-bit failed its check ({self.reason})"
        split = f", outlier channels split in {len(self.split)}" if self.split else ""
        kept = f", {len(self.promoted)} kept float" if self.promoted else ""
        return f"8-bit, checked: {figures}{split}{kept}"


def read_check_record(manifest: Any) -> Q8CheckRecord | None:
    """The record of a manifest (None: a bundle made before the check, or not 8-bit). CheckRecordError when the
    record is there but damaged."""
    if not isinstance(manifest, dict) or "q8_check" not in manifest:
        return None
    return Q8CheckRecord.from_json(manifest["q8_check"])
