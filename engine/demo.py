"""The demo model: a tiny random-weight checkpoint shipped with the app (engine/demo_checkpoint/), converted into
a bundle on request. It speaks noise; it is for trying the app without downloading a model.

tools/random_checkpoint/ writes that checkpoint (`python -m tools.random_checkpoint` regenerates it;
tests/test_demo.py checks the shipped files are exactly what it writes).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from .errors import EngineError
from .io.fileio import write_own_file
from .io.json_file import json_object_or_none
from .runtime.bundle import DEMO_MARK, MANIFEST
from .runtime.bundle_writer import is_bundle

Progress = Callable[[float, str], None]

DEMO_CHECKPOINT = Path(__file__).resolve().parent / "demo_checkpoint"

# Demo CustomVoice speakers: offsets from the codebook start as in the real table (serena 3066, eric 2875,
# dylan 2878 with a real codebook of 2048); dialect language ids as in CustomVoice configs (2062, 2074).
DEMO_SPEAKERS = {"serena": (1018, False), "eric": (827, "sichuan_dialect"), "dylan": (830, "beijing_dialect")}
DEMO_DIALECTS = {"sichuan_dialect": 14, "beijing_dialect": 26}
DEMO_KINDS = ("base", "custom_voice", "voice_design")


def make_demo_bundle(dest: str | os.PathLike, progress: Progress | None = None, overwrite: bool = False,
                     precision: str = "fp32", kind: str = "base") -> Path:
    """A tiny random-weight bundle that speaks noise: the shipped demo checkpoint converted into `dest`.
    kind "custom_voice" (1.7B-like: follows instructions, three preset speakers, two with a dialect) or
    "voice_design" gives the same weights under the other model kinds, for trying their panels."""
    from .convert import convert_checkpoint

    if kind not in DEMO_KINDS:
        raise EngineError(f"Unknown model kind {kind!r}; choose one of {', '.join(DEMO_KINDS)}.")
    dest = Path(dest)
    if dest.exists() and not overwrite and not (dest.is_dir() and not any(dest.iterdir())):
        raise EngineError(f"{dest} already exists; choose a new folder or remove it")
    if not (DEMO_CHECKPOINT / "config.json").is_file():
        raise EngineError(f"This installation lacks the demo checkpoint ({DEMO_CHECKPOINT}); reinstall the app.")
    with tempfile.TemporaryDirectory(prefix="qwen3tts-demo-") as tmp:
        ckpt = Path(tmp) / "checkpoint"
        shutil.copytree(DEMO_CHECKPOINT, ckpt)
        config = json.loads((ckpt / "config.json").read_text(encoding="utf-8"))
        config[DEMO_MARK] = True  # copied into the manifest: how the app knows this bundle is its own demo
        if kind != "base":
            _demo_kind(config, kind)
        write_own_file(ckpt / "config.json", (json.dumps(config, indent=2, ensure_ascii=False) + "\n").encode())
        return convert_checkpoint(ckpt, dest, precision=precision, progress=progress, overwrite=overwrite)


def _demo_kind(config: dict, kind: str) -> None:
    """Turn the demo config into a 1.7B-like CustomVoice or VoiceDesign one (the weights stay the same)."""
    tc = config["talker_config"]
    codebook = int(tc["vocab_size"]) - 1024
    config["tts_model_type"], config["tts_model_size"] = kind, "1b7"
    if kind == "custom_voice":
        tc["spk_id"] = {name: codebook + off for name, (off, _) in DEMO_SPEAKERS.items()}
        tc["spk_is_dialect"] = {name: dialect for name, (_, dialect) in DEMO_SPEAKERS.items()}
        tc["codec_language_id"].update({k: codebook + v for k, v in DEMO_DIALECTS.items()})


def is_demo_bundle(path: str | os.PathLike) -> bool:
    """True only for a bundle made by make_demo_bundle (the app may replace it; it holds nothing of the user's)."""
    path = Path(path)
    if not is_bundle(path):
        return False
    config = (json_object_or_none(path / MANIFEST) or {}).get("config")
    return isinstance(config, dict) and config.get(DEMO_MARK) is True
