"""The formats audio is saved in, as one list: the engine's writers, the command line's output checks and help,
and the app's save dialog all read it. Imports nothing heavy, so a front end can name the formats at start-up."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AudioFormat:
    """An audio file the app, the command line and the engine write: its name ending, libsndfile's format name
    and how a file dialog calls it."""

    suffix: str
    soundfile: str
    label: str


# The one list of the formats audio is saved in: adding one here (and libsndfile writing it) is all it takes.
AUDIO_FORMATS = (
    AudioFormat(".wav", "WAV", "WAV audio"),
    AudioFormat(".flac", "FLAC", "FLAC audio"),
    AudioFormat(".ogg", "OGG", "Ogg Vorbis audio"),
)
SAVE_FORMATS = {f.suffix: f.soundfile for f in AUDIO_FORMATS}
SAVE_SUFFIXES = tuple(SAVE_FORMATS)
SAVE_SUFFIX_WORDS = ", ".join(SAVE_SUFFIXES[:-1]) + f" or {SAVE_SUFFIXES[-1]}"  # ".wav, .flac or .ogg"
