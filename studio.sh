#!/usr/bin/env bash
# Sets up a virtual environment (first run only) and starts Qwen3-TTS Studio.
# Usage: ./studio.sh [--model BUNDLE]
set -euo pipefail
cd "$(dirname "$0")"
. scripts/setup_venv.sh
# Qt's own message names the wrong library when an X11 one is missing: name the missing ones and the apt-get line.
.venv/bin/python -m qwen3tts_gui.qt_system_libs
exec .venv/bin/python -m qwen3tts_gui "$@"
