"""The waveform's envelope kept up to date as audio streams in equals the envelope of the whole recording computed
at once from its samples, at every scale; a finished stream keeps its envelope only for the same recording."""

from __future__ import annotations

import numpy as np
import pytest

from qwen3tts_gui.widgets.wave_peaks import BLOCK, WavePeaks
from qwen3tts_gui.widgets.waveform import WaveformView


def envelope_from_samples(samples: np.ndarray, width: int, span: int):
    """Columns of whole blocks of `per` samples (rounded up to whole 256-sample blocks when that is over one);
    the last column is padded with silence."""
    per = -(-span // width)
    if per >= BLOCK:
        per = -(-per // BLOCK) * BLOCK
    cols = -(-len(samples) // per)
    lo, hi, rms = (np.zeros(cols, np.float32) for _ in range(3))
    for c in range(cols):
        part = np.zeros(per, np.float32)
        chunk = samples[c * per:(c + 1) * per]
        part[: len(chunk)] = chunk
        lo[c], hi[c] = part.min(), part.max()
        rms[c] = np.sqrt(np.sum(part.astype(np.float64) ** 2) / per)
    return lo, hi, rms


@pytest.mark.parametrize("seconds, width", [(0.5, 300), (3.0, 1200), (40.0, 1200), (40.0, 97)])
def test_streamed_envelope_equals_the_whole_one(seconds, width):
    rng = np.random.default_rng(1)
    samples = (rng.standard_normal(int(seconds * 24000)) * 0.3).astype(np.float32)
    buffer = np.zeros(len(samples) + 5000, np.float32)
    peaks, length = WavePeaks(), 0
    spans = [len(samples) // 2, len(samples), 2 * len(samples)]  # the expected length changes while streaming
    while length < len(samples):
        end = min(len(samples), length + int(rng.integers(1, 9000)))
        buffer[length:end] = samples[length:end]
        length = end
        peaks.extend(buffer, length)
        span = max(length, spans[int(rng.integers(0, 3))])
        got = peaks.columns(buffer, width, span)
        want = envelope_from_samples(samples[:length], width, span)
        assert len(got[0]) <= width
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_a_finished_stream_keeps_its_envelope_only_for_the_same_recording(qtbot):
    view = WaveformView()
    qtbot.addWidget(view)
    view.resize(400, 80)
    samples = (np.random.default_rng(2).standard_normal(24000 * 20) * 0.3).astype(np.float32)
    view.begin_stream(24000, 24000 * 30)
    for i in range(0, 24000 * 15, 7680):
        view.append(samples[i:min(i + 7680, 24000 * 15)])
        view.grab()
    view.finish_stream(samples)
    assert np.array_equal(view.samples, samples)
    view.grab()
    np.testing.assert_allclose(view._column_peaks(400)[1], envelope_from_samples(samples, 400, len(samples))[1])

    other = samples.copy()
    other[::1000] += 0.5  # not what was streamed: shown afresh
    view.begin_stream(24000, 24000 * 30)
    view.append(samples[:24000 * 5])
    view.finish_stream(other)
    assert np.array_equal(view.samples, other)
    np.testing.assert_allclose(view._column_peaks(400)[1], envelope_from_samples(other, 400, len(other))[1])
