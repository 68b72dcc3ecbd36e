"""Reference coach: quick checks of a reference recording (length, clipping, silence, level)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

BEST_MIN_S, BEST_MAX_S = 3.0, 10.0
WINDOW_S = 0.02
SILENCE_DB = -45.0  # a 20 ms window quieter than this is silence
CLIP_LEVEL = 0.995


@dataclass
class CoachNote:
    level: str  # "ok" | "warn" | "bad"
    text: str


def to_mono(samples: np.ndarray) -> np.ndarray:
    samples = np.asarray(samples, np.float32)
    return samples.mean(axis=1) if samples.ndim == 2 else samples.reshape(-1)


def _window_db(mono: np.ndarray, sr: int) -> np.ndarray:
    w = max(1, int(sr * WINDOW_S))
    n = len(mono) // w
    if n == 0:
        return np.full(1, 20 * np.log10(max(float(np.sqrt(np.mean(mono**2))) if len(mono) else 0.0, 1e-9)))
    rms = np.sqrt(np.mean(mono[: n * w].reshape(n, w).astype(np.float64) ** 2, axis=1))
    return 20 * np.log10(np.maximum(rms, 1e-9))


def voiced_range(samples: np.ndarray, sr: int, pad_s: float = 0.15) -> tuple[int, int]:
    """Sample range without the leading and trailing silence (plus a little padding): a trim suggestion."""
    mono = to_mono(samples)
    db = _window_db(mono, sr)
    loud = np.flatnonzero(db > SILENCE_DB)
    if len(loud) == 0:
        return 0, len(mono)
    w = max(1, int(sr * WINDOW_S))
    pad = int(pad_s * sr)
    return max(0, loud[0] * w - pad), min(len(mono), (loud[-1] + 1) * w + pad)


def analyze_reference(samples: np.ndarray, sr: int) -> list[CoachNote]:
    mono = to_mono(samples)
    notes: list[CoachNote] = []
    seconds = len(mono) / sr if sr else 0.0
    peak = float(np.max(np.abs(mono))) if len(mono) else 0.0
    if peak < 1e-4:
        return [CoachNote("bad", "The recording is silent. Check the microphone and record again.")]

    if seconds < 0.5:
        notes.append(CoachNote("bad", f"Too short ({seconds:.1f} s): record at least 3 seconds of speech."))
    elif seconds < BEST_MIN_S:
        notes.append(CoachNote("warn", f"Short ({seconds:.1f} s): 3-10 seconds of speech works best."))
    elif seconds > BEST_MAX_S:
        notes.append(CoachNote("warn", f"Long ({seconds:.1f} s): 3-10 seconds works best; select a part to trim."))
    else:
        notes.append(CoachNote("ok", f"Length {seconds:.1f} s: good."))

    clipped = int(np.count_nonzero(np.abs(mono) >= CLIP_LEVEL))
    if clipped > max(3, len(mono) // 2000):
        notes.append(CoachNote("warn", "Clipping: the level hits the maximum; record with less input gain."))

    db = _window_db(mono, sr)
    silent = db <= SILENCE_DB
    if silent.all():
        notes.append(CoachNote("bad", "Almost silent: nothing above background noise was found."))
    else:
        loud = np.flatnonzero(~silent)
        edge_s = (loud[0] + (len(db) - 1 - loud[-1])) * WINDOW_S
        inner = silent[loud[0] : loud[-1] + 1]
        if edge_s > 1.0:
            notes.append(CoachNote("warn", f"{edge_s:.1f} s of silence at the ends: trim it."))
        if len(inner) > 10 and inner.mean() > 0.4:
            notes.append(CoachNote("warn", "Long pauses: the voice is quiet for much of the recording."))
        active_db = float(np.median(db[~silent]))
        peak_db = 20 * np.log10(peak)
        if peak_db < -20 or active_db < -38:
            notes.append(CoachNote("warn", f"Low level (peak {peak_db:.0f} dBFS): speak closer or raise the gain."))
        elif clipped <= max(3, len(mono) // 2000):
            notes.append(CoachNote("ok", f"Level good (peak {peak_db:.0f} dBFS)."))
    return notes
