"""Reference coach: quick checks of a reference recording (length, clipping, silence, level), and of its
transcript against the clip and against what the speech recogniser heard."""

from __future__ import annotations

import re
from dataclasses import dataclass
from difflib import SequenceMatcher

import numpy as np

BEST_MIN_S, BEST_MAX_S = 3.0, 10.0
WINDOW_S = 0.02
SILENCE_DB = -45.0  # a 20 ms window quieter than this is silence
CLIP_LEVEL = 0.995


@dataclass
class CoachNote:
    level: str  # "ok" | "warn" | "bad"
    text: str
    fix: str = ""  # the one-click fix's button text, if there is one
    action: str = ""  # what the fix does: "use_heard", "edit_transcript", "language:<name>"


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


# Speech runs at about 2-3 words a second (read English: ~2.5); even fast talkers stay under 5. Past 6 a second
# (plus a couple for the clip's edges) the transcript holds words the clip does not; under 0.4 a second over 3 s
# of speech it leaves most of them out.
MAX_WORDS_PER_S, MIN_WORDS_PER_S, MIN_CHECKED_S = 6.0, 0.4, 3.0
FAR_FROM_HEARD = 0.5  # word-sequence similarity (difflib's ratio) under which a typed transcript is another text
# Chinese and Japanese are written without spaces: their characters count as half a word each (Mandarin is
# spoken at about 4-5 characters a second, 2-2.5 "words")
_UNSPACED = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_WORD = re.compile(r"\w+")


def transcript_units(text: str) -> list[str]:
    """The words of a transcript for comparing and counting: lower case without punctuation, and each Chinese or
    Japanese character one unit."""
    units: list[str] = []
    for word in _WORD.findall(text.lower()):
        pieces = _UNSPACED.split(word)
        units.extend(p for p in pieces if p)
        units.extend(_UNSPACED.findall(word))
    return units


def word_count(text: str) -> float:
    units = transcript_units(text)
    unspaced = sum(1 for u in units if _UNSPACED.fullmatch(u))
    return len(units) - unspaced / 2


def speech_seconds(samples: np.ndarray, sr: int) -> float:
    """How long the clip has sound in it: from the first to the last window above the silence level."""
    mono = to_mono(samples)
    if not len(mono) or not sr or not np.isfinite(mono).all():
        return 0.0
    db = _window_db(mono, sr)
    loud = np.flatnonzero(db > SILENCE_DB)
    return 0.0 if len(loud) == 0 else (loud[-1] + 1 - loud[0]) * WINDOW_S


def similarity(a: str, b: str) -> float:
    """0..1: how much of the two transcripts' word sequences agree."""
    return SequenceMatcher(None, transcript_units(a), transcript_units(b), autojunk=False).ratio()


def transcript_notes(typed: str, seconds: float, heard: str | None = None, heard_language: str = "",
                     voice_language: str = "auto", languages: tuple[str, ...] = ()) -> list[CoachNote]:
    """The transcript against the clip (`seconds` of speech, speech_seconds) and against what the recogniser
    heard (`heard`: its text, None when nothing was transcribed); `heard_language` the language it detected
    (a name such as "german", empty if it was not detected), offered for the voice when the model speaks it
    (`languages`) and the voice is not already in it."""
    notes: list[CoachNote] = []
    typed = typed.strip()
    heard_words = word_count(heard) if heard else 0.0
    if seconds > 0 and heard is not None and heard_words == 0:
        notes.append(CoachNote("warn", "No words were heard, though the clip has sound: type what is said, or the "
                               "voice copies only the timbre.", "Type it", "edit_transcript"))
    elif seconds > 0 and not typed and heard_words:
        notes.append(CoachNote("warn", "No transcript: the voice will copy only the timbre, not the delivery.",
                               "Use what was heard", "use_heard"))
    elif typed and heard_words and similarity(typed, heard or "") < FAR_FROM_HEARD:
        notes.append(CoachNote("warn", f"The transcript is far from what was heard (“{_short(heard or '')}”): "
                               "a transcript that does not match the clip makes the clone worse.",
                               "Use what was heard", "use_heard"))
    elif typed and seconds > 0:
        words = word_count(typed)
        # the recogniser's own words are no fix for themselves (a small model can repeat a word many times)
        differs = heard_words and transcript_units(typed) != transcript_units(heard or "")
        fix = ("Use what was heard", "use_heard") if differs else ("Edit it", "edit_transcript")
        if words > MAX_WORDS_PER_S * seconds + 2:
            notes.append(CoachNote("warn", f"{words:.0f} words for {seconds:.1f} s of speech: far too many, the "
                                   "transcript says more than the clip.", *fix))
        elif seconds >= MIN_CHECKED_S and words < MIN_WORDS_PER_S * seconds:
            notes.append(CoachNote("warn", f"Only {words:.0f} word{'s' if words != 1 else ''} for {seconds:.1f} s "
                                   "of speech: the transcript leaves out most of what is said.", *fix))
    if heard_language and heard_language in languages and heard_language != voice_language:
        title = heard_language.replace("_", " ").title()
        notes.append(CoachNote("ok", f"The reference sounds {title}.", f"Use {title} for the voice",
                               f"language:{heard_language}"))
    return notes


def _short(text: str, limit: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
