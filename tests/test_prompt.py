"""engine.prompt layouts on random tables; the fixture comparison is in test_synth_parity."""

from __future__ import annotations

import numpy as np
import pytest

from engine.errors import TextError
from engine.text.prompt import PromptIds, build_prompt

H = 8
rng = np.random.default_rng(0)
TEXT = rng.standard_normal((200, H)).astype(np.float32)
CODEC = rng.standard_normal((400, H)).astype(np.float32)
IDS = PromptIds(tts_pad=150, tts_bos=151, tts_eos=152, codec_pad=300, codec_bos=301, codec_eos=302, think=306,
                nothink=307, think_bos=308, think_eos=309, language_ids={"english": 258, "beijing_dialect": 270})
ROLE = [100, 101, 102]
TAIL = [103, 102, 100, 101, 102]
X = rng.standard_normal(H).astype(np.float32)


def T(ids):
    return TEXT[np.asarray(ids, np.int64)].reshape(len(ids), H)


def C(ids):
    return CODEC[np.asarray(ids, np.int64)].reshape(len(ids), H)


def ids_for(n):
    return ROLE + list(range(10, 10 + n)) + TAIL


def prompt(n, language="english", non_streaming=False, ref=None):
    kw = {}
    if ref is not None:
        n_ref_text, frames = ref
        kw = dict(ref_ids=ROLE + list(range(60, 60 + n_ref_text)) + [103, 102], ref_frame_rows=frames)
    return build_prompt(ids_for(n), language, X, IDS, T, C, non_streaming=non_streaming, **kw)


def test_xvector_streaming_layout():
    p = prompt(5)
    assert p.prefill.shape == (10, H)
    np.testing.assert_array_equal(p.prefill[:3], T(ROLE))
    np.testing.assert_array_equal(p.prefill[3:7], T([150] * 4) + C([306, 308, 258, 309]))
    np.testing.assert_array_equal(p.prefill[7], T([150])[0] + X)
    np.testing.assert_array_equal(p.prefill[8], T([151])[0] + C([300])[0])
    np.testing.assert_array_equal(p.prefill[9], T([10])[0] + C([301])[0])
    np.testing.assert_array_equal(p.trailing, np.concatenate([T([11, 12, 13, 14]), T([152])]))
    assert prompt(5, "auto").prefill.shape == (9, H)


def test_xvector_non_streaming_layout():
    p = prompt(5, non_streaming=True)
    assert p.prefill.shape == (5 + 11, H)
    np.testing.assert_array_equal(p.prefill[9:14], T(range(10, 15)) + C([300] * 5))
    np.testing.assert_array_equal(p.prefill[14], T([152])[0] + C([300])[0])
    np.testing.assert_array_equal(p.prefill[15], T([150])[0] + C([301])[0])
    np.testing.assert_array_equal(p.trailing, T([150]))
    assert prompt(5, "auto", non_streaming=True).prefill.shape == (5 + 10, H)


@pytest.mark.parametrize("n_text,n_ref_text,t_ref", [(6, 4, 3), (2, 3, 20)])
def test_icl_streaming_both_cases(n_text, n_ref_text, t_ref):
    frames = rng.standard_normal((t_ref, H)).astype(np.float32)
    p = prompt(n_text, ref=(n_ref_text, frames))
    a = np.concatenate([T(list(range(60, 60 + n_ref_text)) + list(range(10, 10 + n_text))), T([152])])
    b = np.concatenate([C([301]), frames])
    head = 3 + 4 + 1 + 1  # role, think/lang rows, x-vector row, TBOS row (codec_bos moves to the ICL block)
    t1, t2 = len(a), len(b)
    assert p.prefill.shape == (head + t2, H)
    if t1 > t2:  # text longer than the reference: the surplus is fed one row per frame
        np.testing.assert_array_equal(p.prefill[head:], a[:t2] + b)
        np.testing.assert_array_equal(p.trailing, a[t2:])
    else:  # text absorbed in the prefill, padded with TPAD
        np.testing.assert_array_equal(p.prefill[head:head + t1], a + b[:t1])
        np.testing.assert_array_equal(p.prefill[head + t1:], T([150] * (t2 - t1)) + b[t1:])
        np.testing.assert_array_equal(p.trailing, T([150]))


def test_icl_non_streaming():
    frames = rng.standard_normal((4, H)).astype(np.float32)
    p = prompt(3, ref=(2, frames), non_streaming=True)
    head = 9
    assert p.prefill.shape == (head + (2 + 3 + 1) + (4 + 1), H)
    np.testing.assert_array_equal(p.prefill[head + 6], C([301])[0] + T([150])[0])
    np.testing.assert_array_equal(p.trailing, T([150]))


def test_bad_language_and_empty_text():
    with pytest.raises(TextError):
        prompt(3, "klingon")
    with pytest.raises(TextError):
        build_prompt(ROLE + TAIL, "english", X, IDS, T, C)
    assert IDS.languages() == ["auto", "english"]


@pytest.mark.parametrize("non_streaming", [False, True])
def test_instruct_rows_come_first_text_only(non_streaming):
    instruct = [100, 104, 20, 21, 22, 103, 102]  # <|im_start|>user\n ... <|im_end|>\n, used whole
    plain = prompt(4, non_streaming=non_streaming)
    styled = build_prompt(ids_for(4), "english", X, IDS, T, C, non_streaming=non_streaming, instruct_ids=instruct)
    np.testing.assert_array_equal(styled.prefill[:7], T(instruct))
    np.testing.assert_array_equal(styled.prefill[7:], plain.prefill)
    np.testing.assert_array_equal(styled.trailing, plain.trailing)


def test_no_speaker_row():
    """VoiceDesign: the codec track goes straight from think_eos to codec_pad."""
    p = build_prompt(ids_for(3), "english", None, IDS, T, C)
    assert p.prefill.shape == (9, H)
    np.testing.assert_array_equal(p.prefill[7], T([151])[0] + C([300])[0])
    np.testing.assert_array_equal(p.prefill[8], T([10])[0] + C([301])[0])
