"""Import the official qwen-tts package (reference environment only: torch + qwen-tts).

qwen_tts imports torchaudio for the unused 25 Hz tokenizer, and the torchaudio wheel here cannot load next to the
CPU torch: a stub module stands in for it.
"""

from __future__ import annotations

import importlib.machinery
import os
import sys
import types
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def install_torchaudio_stub() -> None:
    if "torchaudio" in sys.modules:
        return
    ta = types.ModuleType("torchaudio")
    comp = types.ModuleType("torchaudio.compliance")
    kaldi = types.ModuleType("torchaudio.compliance.kaldi")

    def _unavailable(*_a: Any, **_k: Any) -> Any:
        raise RuntimeError("torchaudio stub: not available here")

    kaldi.fbank = _unavailable  # type: ignore[attr-defined]
    comp.kaldi = kaldi  # type: ignore[attr-defined]
    ta.compliance = comp  # type: ignore[attr-defined]
    for m, name in ((ta, "torchaudio"), (comp, "torchaudio.compliance"), (kaldi, "torchaudio.compliance.kaldi")):
        m.__spec__ = importlib.machinery.ModuleSpec(name, None)  # transformers probes find_spec()
        sys.modules[name] = m


install_torchaudio_stub()
