"""The live tier's environment (tests/reference/requirements.txt) can import the engine: it lists every runtime
dependency of pyproject.toml except the ones named here, each with the reason it is left out."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOT_NEEDED = {
    "pyside6-essentials": "the GUI only",
    "sounddevice": "the GUI only",
    "tokenizers": "qwen-tts pins it through transformers (an older, compatible release)",
    "huggingface-hub": "the model store only; qwen-tts pins an older release",
    "filelock": "the model store's download lock only (huggingface_hub brings it along)",
    "starlette": "the speech server only (qwen3tts_server), which the live tier never starts",
    "uvicorn": "the speech server only (qwen3tts_server), which the live tier never starts",
    "h11": "the speech server only (uvicorn's parser), which the live tier never starts",
}


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[; ]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def test_reference_environment_has_the_engine_dependencies() -> None:
    runtime = {_name(r) for r in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]}
    lines = (ROOT / "tests" / "reference" / "requirements.txt").read_text().splitlines()
    listed = {_name(line) for line in lines if line.strip() and not line.startswith("#")}
    assert runtime - listed - set(NOT_NEEDED) == set()
