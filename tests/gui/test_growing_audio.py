"""The growing audio the player and the waveform share: chunks appended in any sizes read back as one recording,
room grows by doubling (or to what the caller reserves), and setting it afresh copies."""

from __future__ import annotations

import itertools

import numpy as np

from qwen3tts_gui.data.growing_audio import GrowingAudio


def test_chunks_of_any_size_read_back_as_the_whole_recording():
    rng = np.random.default_rng(7)
    whole = rng.standard_normal(10_000).astype(np.float32)
    audio = GrowingAudio()
    cuts = [0, 1, 1, 700, 701, 4000, 9999, 10_000]  # empty, one-sample and large chunks
    for a, b in itertools.pairwise(cuts):
        audio.append(whole[a:b], room=16)
        assert audio.length == b
        np.testing.assert_array_equal(audio.samples, whole[:b])
    assert audio.samples.dtype == np.float32
    assert not audio.complete


def test_room_doubles_or_takes_the_reserved_size_and_keeps_what_was_there():
    audio = GrowingAudio()
    audio.append(np.ones(10, np.float32), room=100)
    assert len(audio.data) == 100  # the reserved room at once
    first = audio.data
    audio.append(np.full(90, 2, np.float32))
    assert audio.data is first  # fits: no copy
    audio.append(np.full(5, 3, np.float32))
    assert len(audio.data) == 200  # twice the room when it runs out
    np.testing.assert_array_equal(audio.samples, np.r_[np.ones(10), np.full(90, 2), np.full(5, 3)])
    audio.append(np.zeros(1000, np.float32), room=10)
    assert len(audio.data) == 1105  # more than double needed: exactly what is needed
    assert audio.length == 1105


def test_set_copies_flattens_and_converts_and_append_continues_after_it():
    source = np.arange(6, dtype=np.float64).reshape(3, 2)
    audio = GrowingAudio()
    audio.set(source, complete=False)
    source[:] = -1  # the caller's array changing does not reach the stored audio
    np.testing.assert_array_equal(audio.samples, np.arange(6, dtype=np.float32))
    assert audio.samples.dtype == np.float32 and not audio.complete
    audio.append(np.array([6, 7], np.float32))
    np.testing.assert_array_equal(audio.samples, np.arange(8, dtype=np.float32))
    audio.set(np.zeros(0, np.float32))
    assert audio.length == 0 and audio.complete
