#!/usr/bin/env bash
# Sets up the environments and runs the whole test suite:
#   1. the default tier (no torch): unit, parity against committed fixtures, GUI (offscreen), CLI;
#   2. the live oracle tier: regenerates the fixtures with the official qwen-tts and compares.
# Usage: ./run_tests.sh [extra pytest args for tier 1]     SKIP_REFERENCE=1 skips tier 2.
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3}
export QT_QPA_PLATFORM=offscreen HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PIP_DISABLE_PIP_VERSION_CHECK=1
mkdir -p .test-results
rm -f .test-results/*.xml

# pip stays quiet once an environment exists; on first set-up its progress lines show what is downloading.
quiet() { if [ -e "$1/.installed" ]; then echo -q; fi; }
if [ ! -x .venv/bin/python ]; then
  echo "== Creating .venv: the app, test tools and PyInstaller (about 140 MB to download) ==" >&2
  "$PY" -m venv .venv
fi
.venv/bin/pip install $(quiet .venv) -e '.[test,package]'
touch .venv/.installed
.venv/bin/ruff check .
.venv/bin/mypy  # the engine, the app, the CLI, the server and tools/, no module silenced (pyproject.toml [tool.mypy])

status=0
echo "== Default tier: unit, parity against the committed fixtures, GUI, CLI ==" >&2
.venv/bin/python -m pytest -m "not reference" --ignore=tests/parity_live --junitxml=.test-results/default.xml "$@" || status=$?

if [ "${SKIP_REFERENCE:-0}" != 1 ]; then
  if [ ! -x .venv-ref/bin/python ]; then
    echo "== Creating .venv-ref: the official implementation for the live tier, PyTorch (CPU) and qwen-tts" \
         "(about 460 MB to download, 1.9 GB on disk) ==" >&2
    "$PY" -m venv .venv-ref
  fi
  # torch first and pinned: an unpinned torch would pull a multi-GB CUDA build.
  .venv-ref/bin/pip install $(quiet .venv-ref) torch==2.13.0
  .venv-ref/bin/pip install $(quiet .venv-ref) -r tests/reference/requirements.txt
  touch .venv-ref/.installed
  echo "== Live tier: regenerating the fixtures with the official implementation (1-3 minutes, more on a busy machine) ==" >&2
  rc=0
  .venv-ref/bin/python -m pytest -m reference tests/parity_live --junitxml=.test-results/reference.xml || rc=$?
  if [ "$rc" != 0 ]; then status=$rc; fi  # 5 (no tests collected) fails too
fi

.venv/bin/python scripts/summarize_junit.py .test-results/*.xml
exit "$status"
