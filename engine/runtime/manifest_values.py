"""Checked readers of a bundle manifest's values, for the typed parts (manifest_parts.py and the Whisper part):
each returns the value of `key` in the table `info` as its type, or raises a BundleError in one line that says where
(`where`: the bundle and the part), which key and what is wrong with it. A key that must be there and is not is the
part table's own BundleError (Bundle.part wraps it); a key added after the first conversions has a default.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import BundleError


def whole(info: Mapping[str, Any], key: str, where: str) -> int:
    value = info[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise BundleError(f"{where}: {key!r} is not a whole number ({value!r}); convert the checkpoint again.")
    return value


def text(info: Mapping[str, Any], key: str, where: str) -> str:
    value = info[key]
    if not isinstance(value, str):
        raise BundleError(f"{where}: {key!r} is not a name ({value!r}); convert the checkpoint again.")
    return value


def real(info: Mapping[str, Any], key: str, where: str) -> float:
    value = info[key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BundleError(f"{where}: {key!r} is not a number ({value!r}); convert the checkpoint again.")
    return float(value) if isinstance(value, int) else value


def positive(info: Mapping[str, Any], key: str, where: str) -> int:
    value = whole(info, key, where)
    if value < 1:
        raise BundleError(f"{where}: {key!r} is {value}, not a positive count; convert the checkpoint again.")
    return value


def size(info: Mapping[str, Any], key: str, where: str) -> int:
    value = whole(info, key, where)
    if value < 0:
        raise BundleError(f"{where}: {key!r} is {value}, not a count; convert the checkpoint again.")
    return value


def count(info: Mapping[str, Any], key: str, where: str) -> int:
    """A count the converter writes; bundles made before it was recorded lack it (0)."""
    return size(info, key, where) if key in info else 0


def table(info: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    value = info[key]
    if not isinstance(value, Mapping):
        raise BundleError(f"{where}: {key!r} is not a table of values; convert the checkpoint again.")
    return value


def names(info: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = info.get(key) or []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise BundleError(f"{where}: {key!r} is not a list of names; convert the checkpoint again.")
    return tuple(value)


def wholes(info: Mapping[str, Any], key: str, where: str) -> tuple[int, ...]:
    value = info[key]
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise BundleError(f"{where}: {key!r} is not a list of whole numbers; convert the checkpoint again.")
    return tuple(value)


def window(info: Mapping[str, Any], where: str) -> int | None:
    """sliding_window: None (plain causal attention) or a positive length."""
    if info.get("sliding_window") is None:
        return None
    return positive(info, "sliding_window", where)
