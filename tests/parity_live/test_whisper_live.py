"""The committed Whisper fixtures equal a fresh run of transformers on this machine, and the engine agrees with it.

tests/reference/make_whisper_fixtures.py rebuilds both tiny checkpoints from their seeds (from the committed
vocabulary) and reruns WhisperProcessor + generate (greedy) on the committed clips into a temporary folder. The
checkpoints must be identical; token ids, texts and detected languages identical; log-mel features within 1e-5 of
the committed ones (float32 STFT rounding on another CPU or thread count); and the engine, converted from the
fresh checkpoints, gives the fresh token ids.

Run in the reference environment: .venv-ref/bin/python -m pytest tests/parity_live -m reference
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.reference

ROOT = Path(__file__).resolve().parents[2]
WHISPER = ROOT / "tests" / "fixtures" / "whisper"
SCRIPT = ROOT / "tests" / "reference" / "make_whisper_fixtures.py"
REGENERATED_MEL_TOLERANCE = 1e-5


@pytest.fixture(scope="module")
def fresh(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("whisper-live")
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    subprocess.run([sys.executable, str(SCRIPT), "--steps", "models,outputs", "--out", str(out),
                    "--tokenizer", str(WHISPER / "tokenizer"), "--audio", str(WHISPER / "audio")],
                   check=True, env=env, cwd=ROOT)
    return out / "whisper"


def test_checkpoints_rebuilt_from_their_seeds_are_identical(fresh):
    for model in (WHISPER / "models").iterdir():
        for f in model.iterdir():
            assert (fresh / "models" / model.name / f.name).read_bytes() == f.read_bytes(), f"{model.name}/{f.name}"


def test_outputs_regenerated_by_transformers_match_the_committed_ones(fresh):
    committed = sorted((WHISPER / "outputs").rglob("*.npz"))
    assert committed
    for f in committed:
        rel = f.relative_to(WHISPER / "outputs")
        with np.load(f) as a, np.load(fresh / "outputs" / rel) as b:
            assert sorted(a.files) == sorted(b.files), rel
            for k in a.files:
                if k == "logmel":
                    assert float(np.max(np.abs(a[k] - b[k]))) <= REGENERATED_MEL_TOLERANCE, rel
                else:
                    assert np.array_equal(a[k], b[k]), f"{rel}:{k}"


def test_the_engine_on_the_fresh_checkpoints_gives_the_fresh_tokens(fresh, tmp_path):
    sys.path.insert(0, str(ROOT))
    import engine

    for model in sorted((fresh / "models").iterdir()):
        bundle = engine.convert_checkpoint(model, tmp_path / model.name)
        transcriber = engine.Transcriber(bundle, threads=2)
        for f in sorted((fresh / "outputs" / model.name).glob("*.npz")):
            with np.load(f) as d:
                if f.stem.startswith("silence"):
                    result = transcriber.transcribe_features(d["logmel"])
                else:
                    (clip,) = [p for p in (WHISPER / "audio").iterdir() if p.stem == f.stem]
                    result = transcriber.transcribe(clip)
                assert list(result.token_ids) == d["detect_ids"].tolist(), f"{model.name}/{f.stem}"
                assert result.prompt_ids[1] == int(d["detect_lang_id"])
