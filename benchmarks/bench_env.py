"""Where the benchmarks find their interpreters and working space: environment variables, defaults in the repo.

    QWEN3TTS_PYTHON      this project's environment        (default: .venv/bin/python)
    QWEN3TTS_REF_PYTHON  the official implementation's one (default: .venv-ref/bin/python, as run_tests.sh makes)
    QWEN3TTS_BENCH_DIR   checkpoints, bundles and results  (default: bench-out/, ignored by git)
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUR_PYTHON = os.environ.get("QWEN3TTS_PYTHON", str(ROOT / ".venv" / "bin" / "python"))
REF_PYTHON = os.environ.get("QWEN3TTS_REF_PYTHON", str(ROOT / ".venv-ref" / "bin" / "python"))
WORK_DIR = Path(os.environ.get("QWEN3TTS_BENCH_DIR", str(ROOT / "bench-out")))
