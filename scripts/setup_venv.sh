# Sourced by studio.sh and qwen3tts.sh (from the repository root): on first run, create .venv and install the
# app into it, saying what is happening (pip's own progress lines, not a silent minute).
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "First run: creating the virtual environment .venv with $PY ..." >&2
  "$PY" -m venv .venv
fi
# Install again when pyproject.toml changed since the last install (a new library or a new package of the app, which
# an older editable install does not know), or the qwen3tts command still points at its old home (engine.cli).
stamp=.venv/.installed-pyproject
want=$(cksum < pyproject.toml)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ] || ! .venv/bin/python -c "import engine, qwen3tts_gui" 2>/dev/null \
    || ! grep -qs qwen3tts_cli .venv/bin/qwen3tts; then
  echo "Installing Qwen3-TTS Studio and its libraries into .venv (about 120 MB to download; 1-2 minutes)..." >&2
  .venv/bin/pip install --disable-pip-version-check -e . >&2
  printf '%s\n' "$want" > "$stamp"
  echo "Set-up done." >&2
fi
