#!/usr/bin/env bash
# The command line (qwen3tts) from a checkout: sets up .venv on first run like studio.sh, then runs it.
# Usage: ./qwen3tts.sh synth --model BUNDLE --text "Hello." -o hello.wav     (./qwen3tts.sh --help)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
(cd "$here" && . scripts/setup_venv.sh)
exec "$here/.venv/bin/qwen3tts" "$@"
