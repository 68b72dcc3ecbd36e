"""Streaming playback rebuffers instead of stuttering: the Player's fill callback driven block by block.

The fake device is pulled by hand (FakeAudioBackend(manual=True)), so "the audio clock" is the number of blocks
pulled and chunks can arrive at an exact rate slower than real time. The sounds have no zero sample: an exact
zero in the output is silence the player inserted.
"""

from __future__ import annotations

import numpy as np
import pytest
import soxr

from engine import estimated_frames
from qwen3tts_gui.audio_io import Player

from .fakes import SPF, FakeAudioBackend

SR = 24000
BLOCK = 1024  # FakeStream's output block, as SoundDeviceBackend asks for


def sound_without_zeros(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.uniform(0.05, 0.5, n) * rng.choice([-1.0, 1.0], n)).astype(np.float32)


def frame_chunks(seconds: float) -> list[np.ndarray]:
    """One chunk per generated frame (80 ms), as the engine streams them."""
    return np.split(sound_without_zeros(int(seconds * SR) // SPF * SPF), int(seconds * SR) // SPF)


def pull_to_the_end(stream, limit: int = 10_000) -> list[np.ndarray]:
    """The blocks a stream plays until its callback stops it (a player that never ends fails, not hangs)."""
    blocks = []
    while (block := stream.pull()) is not None:
        blocks.append(block)
        assert len(blocks) < limit, "the sound never ended"
    return blocks


class Run:
    """What one streamed playback did, block by block."""

    def __init__(self) -> None:
        self.blocks: list[np.ndarray] = []
        self.ahead: list[int] = []  # device samples ready beyond what was heard, before each block
        self.complete: list[bool] = []  # whether the sound was complete before each block
        self.positions: list[int] = []  # the `position` signal after each block
        self.buffering: list[bool] = []  # the `buffering` state after each block
        self.expected = np.zeros(0, np.float32)  # everything appended, at the device rate

    @property
    def heard(self) -> np.ndarray:
        return np.concatenate(self.blocks)

    def gaps(self) -> list[tuple[int, int]]:
        """(first silent block, block where sound resumes) of every pause inside the sound."""
        gaps, start = [], None
        for i, block in enumerate(self.blocks):
            if start is None and block[-1] == 0 and i + 1 < len(self.blocks):
                start = i + 1 if block[0] != 0 else i  # a block that ran dry part-way starts the pause after it
            elif start is not None and block[0] != 0:
                gaps.append((start, i))
                start = None
        return gaps


def stream_slowly(chunks: list[np.ndarray], real_time_factor: float, device_rate: int = SR,
                  expected_length: int | None = None) -> tuple[Run, Player]:
    """Play chunks[0] at once; chunk k arrives real_time_factor times its audio after chunk 0 (on the audio clock).

    expected_length: the guess of the final length the player is told (as the output panel does), if any.

    Each append is resampled by a second soxr stream exactly as the player does it, so `expected` is what the
    device must hear (without the silences) and `ahead` is counted independently of the player's own state.
    """
    backend = FakeAudioBackend(manual=True, device_output_rate=None if device_rate == SR else device_rate)
    player = Player(backend)
    run = Run()
    player.position.connect(run.positions.append)
    shown = [False]
    player.buffering.connect(lambda on: shown.__setitem__(0, on))
    resampler = soxr.ResampleStream(SR, device_rate, 1, dtype="float32") if device_rate != SR else None

    def converted(samples: np.ndarray, last: bool) -> np.ndarray:
        return samples if resampler is None else resampler.resample_chunk(samples, last=last)

    ends = np.cumsum([len(c) for c in chunks])
    last = len(chunks) - 1
    assert player.play(chunks[0], SR, complete=False)
    if expected_length is not None:
        player.expect_length(expected_length)
    run.expected = converted(chunks[0], False)
    stream = backend.streams[-1]
    clock, arrived, heard_sound = 0, 1, 0
    while True:
        while arrived <= last and (ends[arrived] - ends[0]) * real_time_factor * device_rate / SR <= clock:
            player.append(chunks[arrived], complete=arrived == last)
            run.expected = np.concatenate([run.expected, converted(chunks[arrived], arrived == last)])
            arrived += 1
        run.ahead.append(len(run.expected) - heard_sound)
        run.complete.append(arrived > last)
        block = stream.pull()
        if block is None:
            break
        assert clock < 4 * real_time_factor * ends[-1] * device_rate / SR, "the sound never ended"
        run.blocks.append(block)
        heard_sound += int(np.count_nonzero(block))
        player._poll()  # what the GUI timer does every 30 ms
        run.buffering.append(shown[0])
        clock += len(block)
    return run, player


def test_rebuffering_waits_for_a_growing_threshold_and_loses_nothing(qtbot):
    chunks = frame_chunks(20.0)
    # the q8 model's measured factor; no expected length, so the steps alone decide
    run, _ = stream_slowly(chunks, real_time_factor=1.25)
    heard = run.heard
    # nothing dropped, duplicated or reordered: without the silences it is exactly what was appended
    np.testing.assert_array_equal(heard[heard != 0], np.concatenate(chunks))
    gaps = run.gaps()
    assert run.blocks[0].all()  # the first chunk plays at once
    assert len(gaps) >= 3  # enough pauses to see the threshold grow
    thresholds = [int(s * SR) for s in Player.REBUFFER_SECONDS]
    assert thresholds == sorted(set(thresholds)) and thresholds[0] >= SR // 4  # it grows; the first is no 80 ms
    for k, (first_silent, resume) in enumerate(gaps):
        need = thresholds[min(k, len(thresholds) - 1)]
        # it resumes at the first block with the threshold ready (or the sound complete), not before
        assert run.ahead[resume] >= need or run.complete[resume]
        for i in range(first_silent, resume):
            assert run.ahead[i] < need and not run.complete[i]


@pytest.mark.parametrize("already, real_time_factor, pauses", [
    (1, 1.25, 2),  # from the first chunk: one pause before any rate is measured, one that plays the rest through
    (50, 2.0, 1),  # play pressed 4 s into the take: the rate counts only what arrives after that
])
def test_an_expected_length_lets_the_rest_play_through(qtbot, already, real_time_factor, pauses):
    """Told the final length, a pause waits for what the measured arrival rate needs, then no further gap."""
    frames = frame_chunks(20.0)
    chunks = [np.concatenate(frames[:already]), *frames[already:]]
    total = sum(len(c) for c in chunks)
    run, _ = stream_slowly(chunks, real_time_factor, expected_length=total)
    heard = run.heard
    np.testing.assert_array_equal(heard[heard != 0], np.concatenate(chunks))
    assert len(run.gaps()) == pauses
    # ... and waited no longer than needed: the take ends within 1 s after its last chunk arrived
    last_arrival = real_time_factor * (total - len(chunks[0]))
    assert len(run.blocks) * BLOCK <= last_arrival + SR


@pytest.mark.parametrize("seconds, guess", [(20.0, 0.7), (20.0, 1.3), (60.0, 1.0)])
def test_a_wrong_or_long_expected_length_keeps_the_floor_and_the_cap(qtbot, seconds, guess):
    chunks = frame_chunks(seconds)
    total = sum(len(c) for c in chunks)
    run, _ = stream_slowly(chunks, real_time_factor=1.25, expected_length=int(guess * total))
    heard = run.heard
    np.testing.assert_array_equal(heard[heard != 0], np.concatenate(chunks))
    cap = int(Player.REBUFFER_SECONDS[-1] * SR)
    for k, (first_silent, resume) in enumerate(run.gaps()):
        floor = Player.REBUFFER_SECONDS[min(k, len(Player.REBUFFER_SECONDS) - 1)] * SR
        assert run.ahead[resume] >= floor or run.complete[resume]
        assert all(run.ahead[i] < cap for i in range(first_silent, resume))  # never waits past the cap
    if seconds == 60.0:  # the rest needs more than the cap here: one pause waits for exactly the cap
        assert any(cap <= run.ahead[resume] < cap + SPF for _, resume in run.gaps())


def test_position_frozen_and_buffering_shown_while_rebuffering(qtbot):
    run, _ = stream_slowly(frame_chunks(6.0), real_time_factor=2.0)
    gaps = run.gaps()
    assert gaps
    for first_silent, resume in gaps:
        paused = run.positions[first_silent - 1 : resume]  # from the block that ran dry to the last silent one
        assert len(set(paused)) == 1  # the cursor waits with the sound
        assert all(run.buffering[first_silent:resume])
        assert not run.buffering[resume]  # shown until the sound goes on
        assert run.positions[resume] > paused[0]
    assert not run.buffering[0] and not run.buffering[-1]


def test_completing_the_sound_ends_rebuffering_at_once(qtbot):
    backend = FakeAudioBackend(manual=True)
    player = Player(backend)
    sound = sound_without_zeros(3 * SPF)
    assert player.play(sound[:SPF], SR, complete=False)
    stream = backend.streams[-1]
    heard = [stream.pull(), stream.pull(), stream.pull()]  # 1920 samples in 1024-blocks: it runs dry
    assert not heard[2].any()
    player._poll()
    assert player.is_buffering
    player.append(sound[SPF:], complete=True)  # 160 ms, far below the threshold: the end of the take
    heard += pull_to_the_end(stream)
    assert backend.output_finished == 1
    out = np.concatenate(heard)
    np.testing.assert_array_equal(out[out != 0], sound)
    assert heard[3][0] != 0  # the very next block
    player._poll()
    assert not player.is_buffering and not player.playing


def test_finished_take_never_rebuffers_and_seeks(qtbot):
    backend = FakeAudioBackend(manual=True)
    player = Player(backend)
    events = []
    player.buffering.connect(events.append)
    sound = sound_without_zeros(2 * SR)
    assert player.play(sound, SR, complete=True, start=SR // 2)
    stream = backend.streams[-1]
    pull_to_the_end(stream)
    player._poll()
    out = backend.played_samples()
    np.testing.assert_array_equal(out[: len(sound) - SR // 2], sound[SR // 2 :])  # no pause anywhere
    assert not out[len(sound) - SR // 2 :].any() and events == []


def test_rebuffering_through_the_resampler(qtbot):
    """A device that only plays 48 kHz: thresholds count device samples, nothing is lost in resampling."""
    chunks = frame_chunks(8.0)
    run, player = stream_slowly(chunks, real_time_factor=1.5, device_rate=48000)
    assert player.backend.opened_rates == [48000]
    heard = run.heard
    np.testing.assert_array_equal(heard[heard != 0], run.expected[run.expected != 0])
    assert len(run.expected) == 2 * sum(len(c) for c in chunks)  # the whole sound, flushed at the end
    gaps = run.gaps()
    assert gaps
    for k, (_, resume) in enumerate(gaps):
        need = Player.REBUFFER_SECONDS[min(k, len(Player.REBUFFER_SECONDS) - 1)] * 48000
        assert run.ahead[resume] >= need or run.complete[resume]


def test_output_panel_shows_buffering(qtbot, make_window, audio):
    from .fakes import FakeSynthesizer

    synth = FakeSynthesizer(hold_at_frame=10)  # generation stalls there: playback must run dry and wait
    window = make_window(synth=synth)
    window.text_edit.setPlainText("A longer sentence so that playback can start before the end of generation.")
    assert window.generate()
    qtbot.waitUntil(lambda: len(window.output.wave.samples) > 0, timeout=5000)
    window.output.toggle_play()
    note = window.output.buffering_note
    qtbot.waitUntil(note.isVisible, timeout=5000)
    frames = estimated_frames(window.text_edit.toPlainText())  # the first frame's estimate (the fake's is the engine's)
    assert window.ctx.player._expected_length == frames * SPF  # the panel passes on the length being generated
    assert window.ctx.player.playing and window.output.play_btn.text() == "■  Stop"
    synth.release.set()
    qtbot.waitUntil(lambda: not note.isVisible(), timeout=20000)
    qtbot.waitUntil(lambda: audio.output_finished >= 1, timeout=20000)
    qtbot.waitUntil(lambda: not window.ctx.player.playing, timeout=5000)
    assert not note.isVisible()
