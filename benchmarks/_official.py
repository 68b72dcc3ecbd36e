"""Import the official qwen-tts package (reference environment only: torch + qwen-tts).

qwen_tts imports torchaudio for the unused 25 Hz tokenizer, and the torchaudio wheel here cannot load next to the
CPU torch. The parity oracle (tests/reference/oracle.py) installs the stand-in module and sets the offline
environment on import; the benchmarks reuse it rather than keeping a copy.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "reference"))

from oracle import install_torchaudio_stub  # noqa: E402

install_torchaudio_stub()
