"""Whisper's log-mel front end in numpy: transformers' WhisperFeatureExtractor (80 or 128 bins), to within 1e-4.

One 30 s window: the 16 kHz audio padded with zeros to 480000 samples, a centred STFT (400-point periodic Hann
window, hop 160, reflect padding) whose last frame is dropped, power through a Slaney-style mel filter bank
(0-8000 Hz, area-normalised), log10 floored at 1e-10 and at 8 below the window's maximum, then (x + 4) / 4.
Computed in float64 and returned as float32; the reference computes in float32 with torch (differences seen on the
fixture clips: tests/test_whisper.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache

import numpy as np

from ..errors import BundleError

SAMPLE_RATE = 16000
N_FFT = 400
HOP = 160
WINDOW_SECONDS = 30
WINDOW_SAMPLES = SAMPLE_RATE * WINDOW_SECONDS  # 480000
WINDOW_FRAMES = WINDOW_SAMPLES // HOP  # 3000


def check_front_end(recorded: Mapping[str, int | None], n_mels: int, what: str) -> None:
    """A BundleError when the checkpoint's feature extractor (preprocessor_config.json, as its bundle recorded it)
    computes other features than this front end: another rate, FFT, hop or window would be transcribed as noise."""
    ours = {"feature_size": n_mels, "sampling_rate": SAMPLE_RATE, "n_fft": N_FFT, "hop_length": HOP,
            "chunk_length": WINDOW_SECONDS, "n_samples": WINDOW_SAMPLES, "nb_max_frames": WINDOW_FRAMES}
    for key, value in recorded.items():
        if value is not None and key in ours and value != ours[key]:
            raise BundleError(f"{what} was converted from a checkpoint whose feature extractor has {key} {value}; "
                              f"this app's front end has {ours[key]} and cannot transcribe with it.")


def _hertz_to_mel(freq: np.ndarray) -> np.ndarray:
    """Slaney's mel scale: linear below 1 kHz, logarithmic above (transformers.audio_utils.hertz_to_mel)."""
    mels = 3.0 * freq / 200.0
    log_region = freq >= 1000.0
    mels[log_region] = 15.0 + np.log(freq[log_region] / 1000.0) * (27.0 / np.log(6.4))
    return mels


def _mel_to_hertz(mels: np.ndarray) -> np.ndarray:
    freq = 200.0 * mels / 3.0
    log_region = mels >= 15.0
    freq[log_region] = 1000.0 * np.exp(np.log(6.4) / 27.0 * (mels[log_region] - 15.0))
    return freq


@lru_cache(maxsize=4)
def mel_filters(n_mels: int, sample_rate: int = SAMPLE_RATE, n_fft: int = N_FFT) -> np.ndarray:
    """(n_fft // 2 + 1, n_mels) triangular filters, Slaney-normalised (transformers.audio_utils.mel_filter_bank with
    norm="slaney", mel_scale="slaney", 0-8000 Hz)."""
    mel_edges = np.linspace(_hertz_to_mel(np.array([0.0]))[0], _hertz_to_mel(np.array([8000.0]))[0], n_mels + 2)
    filter_freqs = _mel_to_hertz(mel_edges)
    fft_freqs = np.linspace(0, sample_rate // 2, n_fft // 2 + 1)
    diff = np.diff(filter_freqs)
    slopes = filter_freqs[None, :] - fft_freqs[:, None]
    down = -slopes[:, :-2] / diff[:-1]
    up = slopes[:, 2:] / diff[1:]
    filters = np.maximum(0.0, np.minimum(down, up))
    filters *= (2.0 / (filter_freqs[2:n_mels + 2] - filter_freqs[:n_mels]))[None, :]
    filters.setflags(write=False)
    return filters


@lru_cache(maxsize=1)
def _hann(n: int = N_FFT) -> np.ndarray:
    """The periodic Hann window (torch.hann_window's default)."""
    return 0.5 - 0.5 * np.cos(2.0 * np.pi * np.arange(n) / n)


def log_mel(audio16k: np.ndarray, n_mels: int) -> np.ndarray:
    """The (n_mels, 3000) float32 log-mel features of one 30 s window (audio longer than that is cut, shorter is
    padded with zeros, as the reference's processor does)."""
    x = np.zeros(WINDOW_SAMPLES, np.float64)
    n = min(audio16k.size, WINDOW_SAMPLES)
    x[:n] = audio16k[:n]
    half = N_FFT // 2
    padded = np.pad(x, (half, half), mode="reflect")
    frames = np.lib.stride_tricks.sliding_window_view(padded, N_FFT)[::HOP][:WINDOW_FRAMES]
    spectrum = np.fft.rfft(frames * _hann(), axis=1)
    power = spectrum.real ** 2 + spectrum.imag ** 2  # (3000, 201)
    mel = power @ mel_filters(n_mels)  # (3000, n_mels)
    log_spec = np.log10(np.maximum(mel, 1e-10))
    log_spec = np.maximum(log_spec, log_spec.max() - 8.0)
    return ((log_spec + 4.0) / 4.0).T.astype(np.float32)
