"""Reference audio in and synthesised audio out: loading, 24 kHz resampling, saving, the speaker mel.

load_audio reproduces the official front end (qwen_tts Qwen3TTSModel._load_audio_to_np + librosa):
    librosa.load(path, sr=None, mono=True)   soundfile read as float32, channel mean (numpy float32 mean)
    librosa.resample(y, orig_sr=sr, target_sr=24000)   soxr 'soxr_hq', then length fixed to ceil(n * ratio)
mel_spectrogram reproduces qwen_tts mel_spectrogram(..., n_fft=1024, num_mels=128, hop 256, fmin 0, fmax 12000).
"""

from __future__ import annotations

import io
import math
import os
from pathlib import Path

import numpy as np
import soundfile as sf
import soxr

from ..codec_format import SAMPLE_RATE
from ..errors import AudioError
from .audio_formats import SAVE_FORMATS, SAVE_SUFFIX_WORDS
from .fileio import create_new, os_reason, write_atomic
from .safefile import regular_file_problem

MIN_SECONDS = 0.5
MAX_SECONDS = 600  # longer than any sensible reference; also bounds what the app loads for display
MIN_RATE, MAX_RATE = 1000, 768000
MAX_CHANNELS = 64
SILENCE_PEAK = 1e-4  # below this peak amplitude a reference carries no voice (about -80 dBFS)


# Speaker-encoder mel parameters (fixed in the official extract_speaker_embedding).
N_FFT = 1024
HOP = 256
N_MELS = 128
FMIN = 0.0
FMAX = 12000.0
MEL_FLOOR = 1e-5
_PAD = (N_FFT - HOP) // 2  # 384

AudioSource = str | os.PathLike | tuple[np.ndarray, int]


# ----------------------------------------------------------------------------------------------------------
# Reading
# ----------------------------------------------------------------------------------------------------------


def _describe(src: AudioSource) -> str:
    return f"the reference {Path(src).name}" if isinstance(src, (str, os.PathLike)) else "the audio"


def _check_header(path: Path, sr: int, frames: int, channels: int) -> None:
    """Refuse, before decoding, what would take absurd memory: a header's rate, length and channels are
    claims (a 144 KB file saying 1 Hz resampled to 24 kHz asked for 24 GB)."""
    if not MIN_RATE <= sr <= MAX_RATE:
        raise AudioError(f"{path.name} claims a sample rate of {sr} Hz; this app reads {MIN_RATE} to {MAX_RATE} Hz.")
    if frames / sr > MAX_SECONDS:
        raise AudioError(f"{path.name} is {frames / sr:.0f} s long; a reference may be at most {MAX_SECONDS} s.")
    if not 1 <= channels <= MAX_CHANNELS:
        raise AudioError(f"{path.name} claims {channels} channels; this app reads 1 to {MAX_CHANNELS}.")


def _read(path: Path, always_2d: bool) -> tuple[np.ndarray, int]:
    """soundfile read as float32 (the same call librosa makes); every failure becomes an AudioError."""
    problem = regular_file_problem(path, "audio file")
    if problem:
        raise AudioError(problem)
    try:
        with sf.SoundFile(path) as f:
            sr = f.samplerate
            _check_header(path, sr, f.frames, f.channels)
            data = f.read(frames=-1, dtype="float32", always_2d=always_2d)
    except (sf.LibsndfileError, sf.SoundFileRuntimeError, RuntimeError, ValueError, TypeError) as e:
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise AudioError(f"cannot read {path.name}: not an audio format this app reads, or the file is damaged ({msg})") from None
    except OSError as e:
        raise AudioError(f"cannot read {path.name}: {e.strerror or e}") from None
    return data, int(sr)


def read_audio_file(path: str | os.PathLike) -> tuple[np.ndarray, int]:
    """Raw samples (frames, channels) float32 and the file's sample rate, for display and playback."""
    data, sr = _read(Path(path), always_2d=True)
    return np.ascontiguousarray(data, dtype=np.float32), sr


def _int_to_float(a: np.ndarray) -> np.ndarray:
    """Integer PCM arrays are scaled the way soundfile reads the same samples from a file."""
    if a.dtype == np.uint8:
        return (a.astype(np.float32) - 128.0) / 128.0
    bits = a.dtype.itemsize * 8
    return (a.astype(np.float64) / float(2 ** (bits - 1))).astype(np.float32)


def _from_array(samples: np.ndarray, sr: object) -> tuple[np.ndarray, int]:
    a = np.asarray(samples)
    if a.dtype.kind in "iu":
        a = _int_to_float(a)
    elif a.dtype.kind != "f":
        raise AudioError(f"audio samples must be a float or integer array, not {a.dtype}")
    try:
        rate = int(sr)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        raise AudioError(f"sample rate must be a positive integer, not {sr!r}") from None
    if rate <= 0 or rate != sr:
        raise AudioError(f"sample rate must be a positive integer, not {sr!r}")
    if not MIN_RATE <= rate <= MAX_RATE:
        raise AudioError(f"A sample rate of {rate} Hz is out of range; this app reads {MIN_RATE} to {MAX_RATE} Hz.")
    a = a.astype(np.float32)  # the official path: a[0].astype(np.float32)
    if a.ndim == 2:
        a = np.mean(a, axis=-1).astype(np.float32)  # (frames, channels), like soundfile's layout
    elif a.ndim != 1:
        raise AudioError(f"audio samples must be 1-D (mono) or 2-D (frames, channels), not {a.ndim}-D")
    return a, rate


def _load_file(path: Path) -> tuple[np.ndarray, int]:
    data, sr = _read(path, always_2d=False)
    y = data.T  # librosa's (channels, frames) view
    if y.ndim > 1:
        y = np.mean(y, axis=tuple(range(y.ndim - 1)))  # librosa.to_mono
    return y.astype(np.float32), sr


def _check(y: np.ndarray, sr: int, what: str) -> None:
    if y.size == 0:
        raise AudioError(f"{what} is empty (no samples)")
    if not np.isfinite(y).all():
        raise AudioError(f"{what} contains invalid samples (NaN or infinity)")
    seconds = y.size / sr
    if seconds < MIN_SECONDS:
        raise AudioError(f"{what} is too short ({seconds:.2f} s); a reference needs at least {MIN_SECONDS} s")
    if float(np.max(np.abs(y))) < SILENCE_PEAK:
        raise AudioError(f"{what} is silent; record or choose a reference with audible speech")


def resample_to_24k(y: np.ndarray, sr: int) -> np.ndarray:
    """librosa.resample(y, orig_sr=sr, target_sr=24000, res_type='soxr_hq') (fix=True, scale=False)."""
    return resample(y, sr, SAMPLE_RATE)


def resample(y: np.ndarray, sr: int, target: int) -> np.ndarray:
    """librosa.resample(y, orig_sr=sr, target_sr=target, res_type='soxr_hq') (fix=True, scale=False)."""
    if sr == target:
        return y
    ratio = float(target) / sr
    n_out = int(np.ceil(y.shape[-1] * ratio))
    out = soxr.resample(np.ascontiguousarray(y), sr, target, quality="soxr_hq")
    if out.shape[-1] > n_out:
        out = out[:n_out]
    elif out.shape[-1] < n_out:
        out = np.pad(out, (0, n_out - out.shape[-1]))
    return np.asarray(out, dtype=y.dtype)


def read_mono(src: AudioSource) -> tuple[np.ndarray, int]:
    """A file path or (samples, sample_rate) pair as float32 mono samples (librosa's channel mean) and its rate,
    with the header and sample-rate checks of load_audio but none of a reference's length or loudness checks."""
    if isinstance(src, tuple):
        if len(src) != 2:
            raise AudioError("audio must be a file path or a (samples, sample_rate) pair")
        return _from_array(src[0], src[1])
    if isinstance(src, (str, os.PathLike)):
        return _load_file(Path(src))
    raise AudioError(f"audio must be a file path or a (samples, sample_rate) pair, not {type(src).__name__}")


def load_audio(src: AudioSource) -> np.ndarray:
    """A reference as float32 mono 24 kHz, identical to the official loader (file path or (samples, rate))."""
    if isinstance(src, tuple):
        if len(src) != 2:
            raise AudioError("audio must be a file path or a (samples, sample_rate) pair")
        y, sr = _from_array(src[0], src[1])
    elif isinstance(src, (str, os.PathLike)):
        y, sr = _load_file(Path(src))
    else:
        raise AudioError(f"audio must be a file path or a (samples, sample_rate) pair, not {type(src).__name__}")
    _check(y, sr, _describe(src))
    return np.ascontiguousarray(resample_to_24k(y, sr), dtype=np.float32)


# ----------------------------------------------------------------------------------------------------------
# Writing
# ----------------------------------------------------------------------------------------------------------


def save_audio(path: str | os.PathLike, samples: np.ndarray, sr: int = SAMPLE_RATE, subtype: str | None = None,
               exclusive: bool = False) -> Path:
    """Write .wav / .flac / .ogg atomically (temp file + rename); nothing is left behind on failure. exclusive:
    only if no file of that name exists, decided at the moment of writing (FileExistsError otherwise).

    samples: (n,) or (n, channels) float. Integer subtypes (the default PCM_16 for WAV/FLAC) are clipped to
    [-1, 1] first, so over-range samples saturate instead of wrapping around.
    """
    path = Path(path)
    fmt = SAVE_FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise AudioError(f"cannot save {path.name}: use a {SAVE_SUFFIX_WORDS} file name")
    a = np.asarray(samples, dtype=np.float32)
    if a.ndim not in (1, 2):
        raise AudioError(f"cannot save {path.name}: samples must be (n,) or (n, channels), not {a.shape}")
    if not np.isfinite(a).all():
        raise AudioError(f"cannot save {path.name}: the audio contains NaN or infinite samples")
    if int(sr) <= 0:
        raise AudioError(f"cannot save {path.name}: invalid sample rate {sr}")
    if subtype is None:
        subtype = sf.default_subtype(fmt)
    elif not sf.check_format(fmt, subtype):
        raise AudioError(f"cannot save {path.name}: {fmt} files cannot hold {subtype} samples")
    if subtype.startswith("PCM") or subtype in ("ULAW", "ALAW"):
        a = np.clip(a, -1.0, 1.0)
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise AudioError(f"cannot save {path.name}: folder {parent} does not exist")
    if path.is_dir():
        raise AudioError(f"cannot save {path}: it is a folder")
    buf = io.BytesIO()  # encode in memory first: file-system errors then surface as plain OSErrors
    try:
        sf.write(buf, a, int(sr), subtype=subtype, format=fmt)
    except (sf.LibsndfileError, sf.SoundFileRuntimeError, RuntimeError, ValueError, TypeError) as e:
        raise AudioError(f"cannot save {path.name}: encoding {fmt} failed ({e})") from None
    try:
        (create_new if exclusive else write_atomic)(path, buf.getbuffer())
    except FileExistsError:
        if exclusive:
            raise
        raise AudioError(f"cannot save {path.name}: a file of that name appeared meanwhile") from None
    except OSError as e:
        raise AudioError(f"cannot save {path.name}: {os_reason(e)}") from None
    return path


# ----------------------------------------------------------------------------------------------------------
# Mel spectrogram (speaker encoder input)
# ----------------------------------------------------------------------------------------------------------


def _hz_to_mel(f: np.ndarray) -> np.ndarray:
    """librosa.hz_to_mel, Slaney scale (htk=False)."""
    f = np.atleast_1d(np.asarray(f, dtype=np.float64))
    f_sp = 200.0 / 3
    mels = f / f_sp
    min_log_hz = 1000.0
    min_log_mel = min_log_hz / f_sp
    logstep = np.log(6.4) / 27.0
    log_t = f >= min_log_hz
    mels[log_t] = min_log_mel + np.log(f[log_t] / min_log_hz) / logstep
    return mels


def _mel_to_hz(m: np.ndarray) -> np.ndarray:
    """librosa.mel_to_hz, Slaney scale (htk=False)."""
    m = np.atleast_1d(np.asarray(m, dtype=np.float64))
    f_sp = 200.0 / 3
    freqs = f_sp * m
    min_log_hz = 1000.0
    min_log_mel = min_log_hz / f_sp
    logstep = np.log(6.4) / 27.0
    log_t = m >= min_log_mel
    freqs[log_t] = min_log_hz * np.exp(logstep * (m[log_t] - min_log_mel))
    return freqs


def mel_filterbank(sr: int = SAMPLE_RATE, n_fft: int = N_FFT, n_mels: int = N_MELS, fmin: float = FMIN,
                   fmax: float = FMAX) -> np.ndarray:
    """librosa.filters.mel(sr, n_fft, n_mels, fmin, fmax) with its defaults (Slaney scale and norm), float32,
    computed step for step like librosa (float64 ramps, stored float32, scaled in place)."""
    weights = np.zeros((n_mels, 1 + n_fft // 2), dtype=np.float32)
    fftfreqs = np.fft.rfftfreq(n=n_fft, d=1.0 / sr)
    mel_f = _mel_to_hz(np.linspace(_hz_to_mel(np.asarray(fmin))[0], _hz_to_mel(np.asarray(fmax))[0], n_mels + 2))
    fdiff = np.diff(mel_f)
    ramps = np.subtract.outer(mel_f, fftfreqs)
    for i in range(n_mels):
        lower = -ramps[i] / fdiff[i]
        upper = ramps[i + 2] / fdiff[i + 1]
        weights[i] = np.maximum(0, np.minimum(lower, upper))
    enorm = 2.0 / (mel_f[2 : n_mels + 2] - mel_f[:n_mels])
    weights *= enorm[:, np.newaxis]
    return weights


def _hann_periodic(n: int) -> np.ndarray:
    """torch.hann_window(n) (periodic), built the way torch does in float32: arange * f32(2*pi/n), cos, * -0.5
    + 0.5. torch's vectorised cos differs from a correctly rounded one by 1 ulp in a few dozen entries; that
    moves only mel bins some 80 dB below the frame peak, by < 1e-4."""
    ang = np.arange(n, dtype=np.float32) * np.float32(2.0 * math.pi / n)
    cos = np.cos(ang.astype(np.float64)).astype(np.float32)
    return (cos * np.float32(-0.5) + np.float32(0.5)).astype(np.float32)


def mel_spectrogram(audio24k: np.ndarray, block_frames: int = 1024) -> np.ndarray:
    """The speaker encoder input, (frames, 128) float32: reflect pad 384, |STFT| (periodic Hann 1024, hop 256,
    sqrt(re^2 + im^2 + 1e-9)), Slaney mel 0..12 kHz, log(clamp(., 1e-5)). Computed in float64 (the official
    runs float32 torch; the difference is float32 rounding), in blocks so long references stay small."""
    y = np.asarray(audio24k, dtype=np.float32)
    if y.ndim != 1:
        raise AudioError(f"mel input must be mono 1-D audio, not shape {y.shape}")
    if y.size <= _PAD:
        raise AudioError(f"audio is too short for a mel spectrogram ({y.size} samples)")
    padded = np.pad(y, (_PAD, _PAD), mode="reflect").astype(np.float64)
    n_frames = 1 + (padded.size - N_FFT) // HOP
    frames = np.lib.stride_tricks.sliding_window_view(padded, N_FFT)[::HOP][:n_frames]
    window = _hann_periodic(N_FFT).astype(np.float64)
    basis = mel_filterbank().astype(np.float64).T  # (513, 128)
    out = np.empty((n_frames, N_MELS), dtype=np.float32)
    for s in range(0, n_frames, block_frames):
        spec = np.fft.rfft(frames[s : s + block_frames] * window, axis=-1)
        mag = np.sqrt(spec.real**2 + spec.imag**2 + 1e-9)
        out[s : s + block_frames] = np.log(np.maximum(mag @ basis, MEL_FLOOR))
    return out
