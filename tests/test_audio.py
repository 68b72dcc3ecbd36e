"""Reference-audio front end against the official path (tests/fixtures/outputs/common/audio_*.npz), bad input,
and atomic saving.

The fixtures hold what the official qwen-tts produced for each reference file: `audio24k` (librosa.load +
soxr_hq resample) and `mel` (the speaker encoder's input, float32 torch).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from engine.errors import AudioError, EngineError
from engine.io import audio as A
from engine.io import fileio
from tests.bundles import FIXTURES, OUTPUTS

AUDIO_DIR = FIXTURES / "audio"
COMMON = OUTPUTS / "common"
PARITY_ATOL = 1e-4
# Mel bins this far below their frame's loudest bin are dominated by the reference's own float32 FFT rounding
# (torch/MKL float32 vs float64 of the same formula differs by up to ~1.2e-3 there, measured on these files;
# within 60 dB it stays under 1e-4). Those bins are checked against FAINT_ATOL, which still catches a wrong
# clamp, filterbank, window or padding (those move them by 1e-1 .. 10).
FAINT_DB = 60.0
FAINT_ATOL = 5e-3


def _audio_cases() -> list[dict]:
    idx = AUDIO_DIR / "index.json"
    if not idx.is_file():
        return []
    out = []
    for e in json.loads(idx.read_text(encoding="utf-8")):
        common = COMMON / f"audio_{e['file'].replace('.', '_')}.npz"
        if common.is_file():
            out.append({**e, "common": common})
    return out


CASES = _audio_cases()
IDS = [c["file"] for c in CASES]


def _ref(case: dict) -> tuple[np.ndarray, np.ndarray]:
    with np.load(case["common"]) as z:
        return z["audio24k"], z["mel"]


def test_fixtures_cover_formats():
    assert CASES, "no speaker-audio fixtures: run tests/reference/make_fixtures.py"
    rates = {c["sample_rate"] for c in CASES}
    assert 24000 in rates and len(rates) >= 4, rates
    assert any(c["channels"] > 1 for c in CASES), "a multi-channel reference is required"
    assert {c["format"] for c in CASES} >= {"WAV", "FLAC"}


# -- loading ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_load_audio_matches_official(case):
    want, _ = _ref(case)
    got = A.load_audio(AUDIO_DIR / case["file"])
    assert got.dtype == np.float32 and got.shape == want.shape
    err = float(np.abs(got - want).max())
    print(f"{case['file']}: load_audio max abs error {err:.3g} ({got.size} samples)")
    # Same libsndfile + libsoxr + numpy as the oracle: bit-identical here; 1e-6 allows another CPU's SIMD path.
    assert err <= 1e-6


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_load_audio_tuple_equals_file(case):
    path = AUDIO_DIR / case["file"]
    samples, sr = A.read_audio_file(path)
    assert samples.shape == (case["frames"], case["channels"]) and sr == case["sample_rate"]
    from_tuple = A.load_audio((samples if samples.shape[1] > 1 else samples[:, 0], sr))
    np.testing.assert_array_equal(from_tuple, A.load_audio(path))


def test_int16_tuple_scaled_like_the_file():
    case = next(c for c in CASES if c["subtype"] == "PCM_16")
    path = AUDIO_DIR / case["file"]
    pcm, sr = sf.read(path, dtype="int16")
    np.testing.assert_array_equal(A.load_audio((pcm, sr)), A.load_audio(path))


def test_accepts_every_container_and_sample_format(tmp_path):
    case = next(c for c in CASES if c["channels"] == 2)
    samples, sr = A.read_audio_file(AUDIO_DIR / case["file"])
    reference = A.load_audio((samples, sr))
    lossless = [("WAV", "PCM_16", ".wav"), ("WAV", "PCM_24", ".wav"), ("WAV", "PCM_32", ".wav"),
                ("WAV", "FLOAT", ".wav"), ("WAV", "DOUBLE", ".wav"), ("FLAC", "PCM_24", ".flac")]
    for fmt, subtype, suffix in lossless:
        p = tmp_path / f"ref_{subtype}{suffix}"
        sf.write(p, samples, sr, format=fmt, subtype=subtype)
        got = A.load_audio(p)
        # the fixture is 16-bit, so every lossless container holds the same values
        np.testing.assert_array_equal(got, reference, err_msg=f"{fmt}/{subtype}")
    lossy = [("OGG", "VORBIS", ".ogg"), ("MP3", "MPEG_LAYER_III", ".mp3")]
    for fmt, subtype, suffix in lossy:
        p = tmp_path / f"ref{suffix}"
        sf.write(p, samples, sr, format=fmt, subtype=subtype)
        got = A.load_audio(p)
        assert got.dtype == np.float32 and got.ndim == 1 and np.isfinite(got).all(), fmt
        # decoders may add a few ms of priming; the length stays that of the audio at 24 kHz
        assert abs(got.size - reference.size) < 0.1 * 24000, (fmt, got.size, reference.size)
        assert np.abs(got).max() > 0.1, fmt


@pytest.mark.parametrize("sr", [8000, 11025, 16000, 22050, 24000, 32000, 44100, 48000, 96000])
def test_any_rate_gives_24k_length(sr):
    t = np.arange(int(sr * 0.75)) / sr
    y = (0.3 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)
    out = A.load_audio((y, sr))
    assert out.dtype == np.float32 and out.size == int(np.ceil(y.size * 24000 / sr))


def test_multichannel_is_channel_mean(tmp_path):
    rng = np.random.default_rng(0)
    x = (0.2 * rng.standard_normal((24000, 4))).astype(np.float32)
    p = tmp_path / "quad.wav"
    sf.write(p, x, 24000, subtype="FLOAT")
    np.testing.assert_allclose(A.load_audio(p), x.mean(axis=1), atol=1e-7)


# -- bad input ----------------------------------------------------------------------------------------------


def _wav(path: Path, y: np.ndarray, sr: int = 24000, subtype: str = "FLOAT") -> Path:
    sf.write(path, y, sr, subtype=subtype)
    return path


def _bad(src, match: str):
    with pytest.raises(AudioError, match=match) as ei:
        A.load_audio(src)
    msg = str(ei.value)
    assert "\n" not in msg and len(msg) < 300
    assert isinstance(ei.value, EngineError)
    return msg


def test_missing_file(tmp_path):
    _bad(tmp_path / "nope.wav", "does not exist")


def test_folder(tmp_path):
    _bad(tmp_path, "folder")


def test_corrupt_bytes(tmp_path):
    p = tmp_path / "corrupt.wav"
    p.write_bytes(b"RIFF\x24\x00\x00\x00WAVEfmt " + os.urandom(300))
    _bad(p, "cannot read corrupt.wav")


def test_text_renamed_wav(tmp_path):
    p = tmp_path / "notes.wav"
    p.write_text("this is not audio, just a text file\n" * 20)
    _bad(p, "cannot read notes.wav")


def test_unknown_format(tmp_path):
    p = tmp_path / "clip.xyz"
    p.write_bytes(os.urandom(4096))
    _bad(p, "cannot read clip.xyz")


def test_truncated_flac(tmp_path):
    case = next(c for c in CASES if c["format"] == "FLAC")
    data = (AUDIO_DIR / case["file"]).read_bytes()
    p = tmp_path / "cut.flac"
    p.write_bytes(data[:40])
    _bad(p, "cannot read cut.flac")


def test_empty(tmp_path):
    _bad(_wav(tmp_path / "empty.wav", np.zeros(0, np.float32)), "empty")
    _bad((np.zeros(0, np.float32), 24000), "empty")


def test_silent(tmp_path):
    _bad(_wav(tmp_path / "silence.wav", np.zeros(24000, np.float32)), "silent")
    _bad((np.full(48000, 0.5 * A.SILENCE_PEAK, np.float32), 48000), "silent")


def test_just_above_silence_threshold_loads():
    y = np.zeros(24000, np.float32)
    y[100] = 2 * A.SILENCE_PEAK
    assert A.load_audio((y, 24000)).size == 24000


def test_too_short(tmp_path):
    t = np.arange(int(0.2 * 16000)) / 16000
    y = (0.5 * np.sin(2 * np.pi * 300 * t)).astype(np.float32)
    _bad(_wav(tmp_path / "short.wav", y, 16000), "too short")
    _bad((y, 16000), "too short")
    ok = np.tile(y, 3)[: 8000]  # exactly 0.5 s is enough
    assert A.load_audio((ok, 16000)).size == 12000


def test_non_finite(tmp_path):
    y = (0.1 * np.sin(np.arange(24000) / 10)).astype(np.float32)
    y[500] = np.nan
    _bad(_wav(tmp_path / "nan.wav", y), "NaN")
    _bad((y, 24000), "NaN")
    y[500] = np.inf
    _bad((y, 24000), "NaN or infinity")


def test_bad_arrays_and_rates():
    y = np.ones(24000, np.float32) * 0.1
    _bad((y, 0), "sample rate")
    _bad((y, -16000), "sample rate")
    _bad((y, 22050.5), "sample rate")
    _bad((y, "fast"), "sample rate")
    _bad((y.reshape(2, 3, 4000), 24000), "1-D")
    _bad((y.astype(np.complex64), 24000), "float or integer")
    _bad(y, "file path or")  # an array without its rate
    _bad((y, 24000, 1), "file path or")


# -- saving ---------------------------------------------------------------------------------------------


def _tone(n: int = 24000, ch: int = 1) -> np.ndarray:
    t = np.arange(n) / 24000
    y = 0.5 * np.sin(2 * np.pi * 220 * t)
    return np.stack([y * (1 - 0.3 * c) for c in range(ch)], axis=1).astype(np.float32) if ch > 1 else y.astype(np.float32)


@pytest.mark.parametrize("suffix", [".wav", ".flac", ".ogg", ".WAV"])
@pytest.mark.parametrize("channels", [1, 2])
def test_save_round_trip(tmp_path, suffix, channels):
    y = _tone(ch=channels)
    p = A.save_audio(tmp_path / f"out{suffix}", y)
    assert p.is_file() and [f.name for f in tmp_path.iterdir()] == [p.name]
    back, sr = A.read_audio_file(p)
    assert sr == 24000 and back.shape == (y.shape[0], channels)
    back = back[:, 0] if channels == 1 else back
    if suffix.lower() == ".ogg":  # lossy: same length, same waveform to within codec noise
        assert np.corrcoef(back.ravel(), y.ravel())[0, 1] > 0.99
    else:  # 16-bit PCM
        assert np.abs(back - y).max() <= 1.0 / 32768 + 1e-7


def test_save_float_subtype_is_exact(tmp_path):
    y = _tone()
    p = A.save_audio(tmp_path / "f.wav", y, subtype="FLOAT")
    np.testing.assert_array_equal(A.read_audio_file(p)[0][:, 0], y)


def test_save_clips_over_range_for_pcm(tmp_path):
    y = np.array([0.0, 1.5, -2.0, 0.25] * 100, np.float32)
    back = A.read_audio_file(A.save_audio(tmp_path / "c.wav", y))[0][:, 0]
    assert back.max() <= 1.0 and back.min() >= -1.0 and back[1] > 0.99 and back[2] == -1.0


def test_save_other_rate_and_replace(tmp_path):
    p = tmp_path / "x.flac"
    A.save_audio(p, _tone(16000), sr=16000)
    A.save_audio(p, _tone(8000), sr=48000)
    back, sr = A.read_audio_file(p)
    assert sr == 48000 and back.shape[0] == 8000


def test_save_bad_requests(tmp_path):
    with pytest.raises(AudioError, match=r"\.wav, \.flac or \.ogg"):
        A.save_audio(tmp_path / "x.mp4", _tone())
    with pytest.raises(AudioError, match="does not exist"):
        A.save_audio(tmp_path / "missing" / "x.wav", _tone())
    f = tmp_path / "file.txt"
    f.write_text("x")
    with pytest.raises(AudioError):
        A.save_audio(f / "x.wav", _tone())
    with pytest.raises(AudioError, match="NaN"):
        A.save_audio(tmp_path / "n.wav", np.array([0.0, np.nan] * 100, np.float32))
    with pytest.raises(AudioError, match="cannot hold"):
        A.save_audio(tmp_path / "v.ogg", _tone(), subtype="PCM_16")
    (tmp_path / "adir.wav").mkdir()
    with pytest.raises(AudioError, match="folder"):
        A.save_audio(tmp_path / "adir.wav", _tone())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir.wav", "file.txt"]


def _failing_write(errno_value: int):
    real = fileio._write_all

    def write(fd, data):
        real(fd, data[: len(data) // 2])  # half the file reaches the disk, then the device fails
        raise OSError(errno_value, os.strerror(errno_value))

    return write


@pytest.mark.parametrize("errno_value,match", [(28, "disk is full"), (13, "no permission"), (30, "read-only"),
                                               (5, "Input/output error")])
def test_save_is_atomic_when_writing_fails(tmp_path, monkeypatch, errno_value, match):
    p = tmp_path / "keep.wav"
    A.save_audio(p, _tone(), subtype="FLOAT")
    before = p.read_bytes()
    monkeypatch.setattr(fileio, "_write_all", _failing_write(errno_value))
    with pytest.raises(AudioError, match=match):
        A.save_audio(p, _tone(48000) * 0.1)
    with pytest.raises(AudioError, match=match):
        A.save_audio(tmp_path / "new.wav", _tone())
    assert p.read_bytes() == before  # the old file is untouched
    assert [f.name for f in tmp_path.iterdir()] == ["keep.wav"]  # no temp file, no partial new file


def test_save_encoder_failure_leaves_nothing(tmp_path, monkeypatch):
    def broken(*_a, **_k):
        raise sf.LibsndfileError(0, "simulated")

    monkeypatch.setattr(A.sf, "write", broken)
    with pytest.raises(AudioError, match="encoding WAV failed"):
        A.save_audio(tmp_path / "x.wav", _tone())
    assert not any(tmp_path.iterdir())


# -- mel ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_mel_matches_official(case):
    audio24k, want = _ref(case)
    got = A.mel_spectrogram(audio24k)
    assert got.dtype == np.float32 and got.shape == want.shape == (1 + (audio24k.size + 768 - 1024) // 256, 128)
    err = np.abs(got - want)
    below = (want.max(axis=1, keepdims=True) - want) * 20 / np.log(10)  # dB below the frame's loudest bin
    loud = below <= FAINT_DB
    print(f"{case['file']}: mel max abs error {err.max():.3g} overall, {err[loud].max():.3g} within {FAINT_DB:.0f} dB "
          f"of the frame peak ({loud.mean():.1%} of bins), {(err > PARITY_ATOL).sum()} bins > {PARITY_ATOL}")
    assert err[loud].max() <= PARITY_ATOL
    assert err.max() <= FAINT_ATOL


def test_mel_filterbank_properties():
    fb = A.mel_filterbank()
    assert fb.shape == (128, 513) and fb.dtype == np.float32
    assert (fb >= 0).all() and (fb.max(axis=1) > 0).all()
    # Slaney area normalisation: each triangle integrates to ~1 over Hz (bin spacing 24000/1024 Hz)
    area = fb.sum(axis=1) * 24000 / 1024
    assert np.allclose(area[8:], 1.0, atol=0.1)
    assert fb[:, 513 - 1].max() == 0  # nothing above fmax = 12 kHz = Nyquist


def test_mel_of_silence_is_the_floor():
    m = A.mel_spectrogram(np.zeros(24000, np.float32))
    assert np.all(m == np.float32(np.log(1e-5)))


def test_mel_blocks_do_not_change_the_result():
    rng = np.random.default_rng(1)
    y = (0.1 * rng.standard_normal(24000 * 3)).astype(np.float32)
    np.testing.assert_array_equal(A.mel_spectrogram(y, block_frames=7), A.mel_spectrogram(y))


def test_mel_rejects_bad_input():
    with pytest.raises(AudioError):
        A.mel_spectrogram(np.zeros((2, 24000), np.float32))
    with pytest.raises(AudioError):
        A.mel_spectrogram(np.zeros(100, np.float32))


def test_saved_files_get_ordinary_permissions(tmp_path):
    """mkstemp makes 0600 files; a saved take must follow the umask like any other file."""
    old = os.umask(0o022)
    try:
        p = A.save_audio(tmp_path / "take.wav", _tone())
    finally:
        os.umask(old)
    assert (p.stat().st_mode & 0o777) == 0o644


def test_every_audio_format_is_written_read_and_offered_by_all():
    """AUDIO_FORMATS is the one list: each format is one libsndfile writes, and the app's save dialog and the
    command line's output check take their suffixes from it."""
    import soundfile as sf

    from engine import AUDIO_FORMATS, SAVE_SUFFIX_WORDS, SAVE_SUFFIXES
    from qwen3tts_gui import save

    assert SAVE_SUFFIXES == tuple(f.suffix for f in AUDIO_FORMATS) == save.SUFFIXES
    for f in AUDIO_FORMATS:
        assert sf.check_format(f.soundfile) and f"{f.label} (*{f.suffix})" in save.FILTERS
        assert f.suffix in SAVE_SUFFIX_WORDS
