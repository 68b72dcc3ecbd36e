"""Voice files: round trip, versioning, refusal of voices from another model, damaged files."""

import json
import zipfile

import numpy as np
import pytest

from engine.errors import VoiceError
from engine.voice import VOICE_VERSION, Voice


def _voice(icl: bool) -> Voice:
    rng = np.random.default_rng(3)
    return Voice(
        xvector=rng.standard_normal(64).astype(np.float32),
        model_id="abc123",
        ref_codes=rng.integers(0, 256, (37, 16)) if icl else None,
        ref_text="It was a bright cold day in April." if icl else None,
        language="english",
        name="Anna, calm",
        ref_audio=rng.standard_normal(24000).astype(np.float32) * 0.1,
    )


@pytest.mark.parametrize("icl", [True, False])
def test_round_trip_keeps_everything(tmp_path, icl):
    v = _voice(icl)
    path = v.save(tmp_path / "anna.qvoice")
    w = Voice.load(path, model_id="abc123")
    np.testing.assert_array_equal(w.xvector, v.xvector)
    assert w.icl == icl and w.ref_text == v.ref_text
    if icl:
        np.testing.assert_array_equal(w.ref_codes, v.ref_codes)
    np.testing.assert_array_equal(w.ref_audio, v.ref_audio)
    assert (w.name, w.language, w.created, w.model_id) == (v.name, v.language, v.created, v.model_id)
    assert [p.name for p in tmp_path.iterdir()] == ["anna.qvoice"]  # no temporary file left behind


def test_voice_from_another_model_is_refused(tmp_path):
    path = _voice(True).save(tmp_path / "v.qvoice")
    with pytest.raises(VoiceError, match="different model"):
        Voice.load(path, model_id="another")


def _rewrite_meta(path, **changes):
    with zipfile.ZipFile(path) as z:
        items = {n: z.read(n) for n in z.namelist()}
    meta = json.loads(items["voice.json"])
    meta.update(changes)
    items["voice.json"] = json.dumps(meta).encode()
    with zipfile.ZipFile(path, "w") as z:
        for n, data in items.items():
            z.writestr(n, data)


def test_other_versions_and_formats_are_refused(tmp_path):
    path = _voice(False).save(tmp_path / "v.qvoice")
    _rewrite_meta(path, version=VOICE_VERSION + 1)
    with pytest.raises(VoiceError, match="version"):
        Voice.load(path)
    _rewrite_meta(path, version=VOICE_VERSION, format="something-else")
    with pytest.raises(VoiceError, match="not a Qwen3-TTS Studio voice"):
        Voice.load(path)


def test_damaged_or_missing_files_are_refused(tmp_path):
    bad = tmp_path / "bad.qvoice"
    bad.write_bytes(b"not a zip at all")
    with pytest.raises(VoiceError, match="not a readable voice file"):
        Voice.load(bad)
    with pytest.raises(VoiceError, match="does not exist"):
        Voice.load(tmp_path / "missing.qvoice")
