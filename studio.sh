#!/usr/bin/env bash
# Sets up a virtual environment (first run only) and starts Qwen3-TTS Studio.
# Usage: ./studio.sh [--model BUNDLE]
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then "$PY" -m venv .venv; fi
if ! .venv/bin/python -c "import engine, qwen3tts_gui" 2>/dev/null; then
  .venv/bin/pip install -q -e .
fi
exec .venv/bin/python -m qwen3tts_gui "$@"
