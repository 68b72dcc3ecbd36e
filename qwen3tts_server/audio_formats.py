"""The response's audio: 24 kHz mono, encoded as the request's response_format asks.

wav and pcm stream: their bytes go out as the audio is made (a WAV header with an open length, as OpenAI's own
streamed WAV has, then 16-bit samples; pcm is the samples alone, 16-bit little-endian, as OpenAI's pcm).
flac, mp3 and opus (in Ogg) are written whole by the audio library (soundfile / libsndfile) when the speech ends."""

from __future__ import annotations

import io
import struct

import numpy as np

from engine import SAMPLE_RATE

MEDIA_TYPES = {"mp3": "audio/mpeg", "opus": "audio/ogg", "wav": "audio/wav", "flac": "audio/flac",
               "pcm": "audio/pcm"}
STREAMED = ("wav", "pcm")
# soundfile's format and subtype for the formats written whole
WHOLE = {"flac": ("FLAC", "PCM_16"), "mp3": ("MP3", "MPEG_LAYER_III"), "opus": ("OGG", "OPUS")}
OPEN_LENGTH = 0xFFFFFFFF  # a streamed WAV's RIFF and data sizes: not known until the end


def to_int16(samples: np.ndarray) -> np.ndarray:
    """Float samples as 16-bit integers: scaled by 32768, rounded to nearest, clipped. Every format is made from
    these, so wav, pcm and flac hold the same samples (libsndfile's own conversion rounds differently per format)."""
    x = np.rint(np.asarray(samples, np.float32) * np.float32(32768.0))
    return np.clip(x, -32768, 32767).astype("<i2")


def pcm16(samples: np.ndarray) -> bytes:
    """16-bit little-endian bytes."""
    return to_int16(samples).tobytes()


def wav_header() -> bytes:
    """A 44-byte PCM WAV header (mono, 16-bit, SAMPLE_RATE) whose lengths are left open for streaming."""
    byte_rate = SAMPLE_RATE * 2
    return (b"RIFF" + struct.pack("<I", OPEN_LENGTH) + b"WAVE"
            + b"fmt " + struct.pack("<IHHIIHH", 16, 1, 1, SAMPLE_RATE, byte_rate, 2, 16)
            + b"data" + struct.pack("<I", OPEN_LENGTH))


class Encoder:
    """One response's encoder: add() the samples as they come (streamed formats return their bytes at once,
    the others keep them), finish() returns what is left."""

    def __init__(self, fmt: str):
        self.format = fmt
        self.streams = fmt in STREAMED
        self.media_type = MEDIA_TYPES[fmt]
        self._kept: list[np.ndarray] = []
        self._started = False

    def start(self) -> bytes:
        """The bytes that open the body (the WAV header), once."""
        if self._started:
            return b""
        self._started = True
        return wav_header() if self.format == "wav" else b""

    def add(self, samples: np.ndarray) -> bytes:
        if self.streams:
            return self.start() + pcm16(samples)
        self._kept.append(np.asarray(samples, np.float32))
        return b""

    def finish(self) -> bytes:
        if self.streams:
            return self.start()
        audio = np.concatenate(self._kept) if self._kept else np.zeros(0, np.float32)
        return encode_whole(audio, self.format)


def encode_whole(audio: np.ndarray, fmt: str) -> bytes:
    import soundfile as sf

    container, subtype = WHOLE[fmt]
    if audio.size == 0:  # the encoders need at least one sample to write a valid file
        audio = np.zeros(1, np.float32)
    buf = io.BytesIO()
    samples = to_int16(audio) if subtype == "PCM_16" else np.clip(audio, -1.0, 1.0)
    sf.write(buf, samples, SAMPLE_RATE, format=container, subtype=subtype)
    return buf.getvalue()
