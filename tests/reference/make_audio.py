"""Reference speech for the fixtures: espeak-ng -> sox resample -> soundfile (WAV/FLAC).

Needs the espeak-ng and sox programs (Debian: apt-get install espeak-ng sox), numpy, soundfile.
No torch. Deterministic for a given espeak-ng/sox/libsndfile build.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import soundfile as sf


@dataclass(frozen=True)
class AudioSpec:
    file: str
    voice: str
    speed: int
    text: str
    language: str
    sample_rate: int
    channels: int
    subtype: str  # soundfile subtype: PCM_16 | FLOAT
    seconds: float  # total length (speech + silence padding)
    peak: float


AUDIO: list[AudioSpec] = [
    AudioSpec("en_16k_mono_1s.wav", "en-us", 175, "Hello there.", "english", 16000, 1, "PCM_16", 1.2, 0.7),
    AudioSpec("en_22k_stereo_3s.flac", "en-us", 175, "The quick brown fox jumps over the lazy dog.",
              "english", 22050, 2, "PCM_16", 3.2, 0.6),
    AudioSpec("zh_44k_mono_5s.wav", "cmn", 210, "今天天气很好，我们去公园散步吧。", "chinese", 44100, 1,
              "PCM_16", 5.2, 0.5),
    AudioSpec("en_48k_stereo_12s.flac", "en-us", 165,
              "Please call Stella. Ask her to bring these things with her from the store: six spoons "
              "of fresh snow peas, five thick slabs of blue cheese, and maybe a snack for her brother Bob.",
              "english", 48000, 2, "PCM_16", 12.0, 0.8),
    AudioSpec("zh_16k_stereo_4s.wav", "cmn", 200, "你好，世界！这是一个小测试。", "chinese", 16000, 2,
              "PCM_16", 4.0, 0.6),
    AudioSpec("en_44k_stereo_2s.flac", "en-us", 175, "Good morning, how are you?", "english", 44100, 2,
              "PCM_16", 2.0, 0.4),
    AudioSpec("zh_48k_mono_3s.flac", "cmn", 175, "我叫通义千问。", "chinese", 48000, 1, "PCM_16", 3.0, 0.7),
    AudioSpec("en_24k_mono_2s.wav", "en-us", 175, "Speech synthesis test.", "english", 24000, 1, "FLOAT",
              2.0, 0.3),
]

LEAD_SILENCE = 0.1  # seconds before the speech


def _speak(spec: AudioSpec, tmp: Path) -> np.ndarray:
    raw = tmp / "raw.wav"
    res = tmp / "res.wav"
    subprocess.run(["espeak-ng", "-v", spec.voice, "-s", str(spec.speed), "-w", str(raw), spec.text],
                   check=True, capture_output=True)
    # sox's default 'rate' effect (high quality) to the target rate, float output
    subprocess.run(["sox", str(raw), "-e", "floating-point", "-b", "32", str(res), "rate",
                    str(spec.sample_rate)], check=True, capture_output=True)
    y, sr = sf.read(str(res), dtype="float32", always_2d=False)
    assert sr == spec.sample_rate, (sr, spec)
    return np.asarray(y, dtype=np.float32)


def render(spec: AudioSpec, tmp: Path) -> np.ndarray:
    """Return the exact samples (n,) or (n, 2) to write for `spec`."""
    speech = _speak(spec, tmp)
    speech = speech / max(float(np.max(np.abs(speech))), 1e-9) * spec.peak
    n_total = int(round(spec.seconds * spec.sample_rate))
    lead_in = int(round(LEAD_SILENCE * spec.sample_rate))
    if lead_in + len(speech) > n_total:
        raise SystemExit(f"{spec.file}: speech {len(speech) / spec.sample_rate:.2f}s does not fit")
    mono = np.zeros(n_total, dtype=np.float32)
    mono[lead_in:lead_in + len(speech)] = speech
    if spec.channels == 1:
        return mono
    # right channel: quieter and slightly delayed, so the channel mean matters
    delay = 23
    right = np.zeros_like(mono)
    right[delay:] = 0.8 * mono[:-delay]
    return np.stack([mono, right], axis=1)


def write_all(out_dir: Path) -> list[dict]:
    out_dir.mkdir(parents=True, exist_ok=True)
    index = []
    with tempfile.TemporaryDirectory() as td:
        for spec in AUDIO:
            y = render(spec, Path(td))
            fmt = "FLAC" if spec.file.endswith(".flac") else "WAV"
            final = out_dir / spec.file
            tmp = final.with_name(final.name + ".tmp")
            sf.write(str(tmp), y, spec.sample_rate, subtype=spec.subtype, format=fmt)
            os.replace(tmp, final)
            info = sf.info(str(final))
            entry = asdict(spec)
            entry.update(format=fmt, frames=int(info.frames), seconds=info.frames / info.samplerate,
                         transcript=spec.text)
            for k in ("voice", "speed", "text", "peak"):
                entry.pop(k)
            entry["espeak"] = {"voice": spec.voice, "speed": spec.speed, "peak": spec.peak}
            index.append(entry)
    tmpi = out_dir / "index.json.tmp"
    tmpi.write_text(json.dumps(index, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmpi, out_dir / "index.json")
    return index


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1] / "fixtures" / "audio"
    for e in write_all(target):
        print(e["file"], e["sample_rate"], e["channels"], f"{e['seconds']:.2f}s")
