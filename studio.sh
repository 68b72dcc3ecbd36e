#!/usr/bin/env bash
# Sets up a virtual environment (first run only) and starts Qwen3-TTS Studio.
# Usage: ./studio.sh [--model BUNDLE]
set -euo pipefail
cd "$(dirname "$0")"
. scripts/setup_venv.sh
# Qt's own message names the wrong library when an X11 one is missing: name the missing ones; on a terminal, offer
# to run the README's apt-get line (y/N); without one, print it and stop here (exit 1).
.venv/bin/python -m qwen3tts_gui.qt_system_libs
exec .venv/bin/python -m qwen3tts_gui "$@"
