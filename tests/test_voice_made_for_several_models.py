"""A voice made again for another model keeps what it was made for before: one file serves both models."""

from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import pytest

from engine import Voice, VoiceError
from engine.voice import MAX_OTHERS


def _voice(model_id: str, width: int = 8, seed: int = 0, icl: bool = True) -> Voice:
    rng = np.random.default_rng(seed)
    return Voice(xvector=rng.standard_normal(width).astype(np.float32), model_id=model_id,
                 ref_codes=rng.integers(0, 100, (5, 16)) if icl else None, ref_text="Hi." if icl else None,
                 name="Anna", ref_audio=np.zeros(2400, np.float32))


def test_made_again_keeps_the_earlier_making_and_the_file_serves_both(tmp_path):
    first = _voice("model-a", 8, seed=1)
    again = _voice("model-b", 16, seed=2).keeping(first)
    path = again.save(tmp_path / "anna.qvoice")
    assert Voice.summary(path).made_for == ("model-b", "model-a")
    b = Voice.load(path, model_id="model-b")
    a = Voice.load(path, model_id="model-a")
    assert a.model_id == "model-a" and np.array_equal(a.xvector, first.xvector)
    assert np.array_equal(a.ref_codes, first.ref_codes) and a.ref_text == "Hi." and a.name == "Anna"
    assert b.model_id == "model-b" and np.array_equal(b.xvector, again.xvector)
    with pytest.raises(VoiceError, match="different model"):
        Voice.load(path, model_id="model-c")
    # made again for a third model: both earlier makings stay
    third = _voice("model-c", 4, seed=3).keeping(Voice.load(path))
    assert set(third.made_for) == {"model-a", "model-b", "model-c"}
    assert np.array_equal(third.for_model("model-a").xvector, first.xvector)


def test_a_voice_keeps_at_most_so_many_other_makings():
    voice = _voice("m0", icl=False)
    for i in range(1, MAX_OTHERS + 5):
        voice = _voice(f"m{i}", icl=False).keeping(voice)
    assert len(voice.others) == MAX_OTHERS and voice.model_id == f"m{MAX_OTHERS + 4}"


def _rewrite_meta(path, drop=(), **changes):
    with zipfile.ZipFile(path) as z:
        members = {n: z.read(n) for n in z.namelist()}
    meta = json.loads(members["voice.json"])
    meta.update(changes)
    for key in drop:
        meta.pop(key)
    members["voice.json"] = json.dumps(meta).encode()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for n, data in members.items():
            z.writestr(n, data)
    path.write_bytes(buf.getvalue())


@pytest.mark.parametrize("others", ["model-a", [1], ["x"] * 2, [f"m{i}" for i in range(MAX_OTHERS + 1)],
                                    ["no-arrays"]])
def test_a_damaged_list_of_other_makings_is_one_line(tmp_path, others):
    path = _voice("model-b").save(tmp_path / "v.qvoice")
    _rewrite_meta(path, others=others)
    with pytest.raises(VoiceError, match="damaged"):
        Voice.load(path)


def test_a_voice_file_from_before_reads_as_made_for_its_model(tmp_path):
    path = _voice("model-a").save(tmp_path / "old.qvoice")
    _rewrite_meta(path, drop=["others"])  # the format of before
    voice = Voice.load(path, model_id="model-a")
    assert voice.others == {} and Voice.summary(path).made_for == ("model-a",)
