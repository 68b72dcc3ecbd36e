"""A cloned voice: x-vector, optional ICL reference (codes + transcript), saved as a small versioned file."""

from __future__ import annotations

import datetime as _dt
import io
import json
import os
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .errors import VoiceError
from .fileio import write_atomic

VOICE_FORMAT = "qwen3tts-voice"
VOICE_VERSION = 1
VOICE_SUFFIX = ".qvoice"


@dataclass
class Voice:
    """What a synthesis needs from a reference recording. Computed once, reused for free."""

    xvector: np.ndarray  # (D,) float32, D = talker width
    model_id: str  # fingerprint of the speaker/speech encoders that made it
    ref_codes: np.ndarray | None = None  # (T, 16) int64: ICL reference frames
    ref_text: str | None = None  # ICL transcript; None means x-vector-only
    language: str = "auto"
    name: str = ""
    created: str = field(default_factory=lambda: _dt.datetime.now().isoformat(timespec="seconds"))
    ref_audio: np.ndarray | None = None  # 24 kHz float32 reference, kept for playback in the app

    @property
    def icl(self) -> bool:
        return self.ref_codes is not None and bool(self.ref_text)

    def save(self, path: str | os.PathLike) -> Path:
        """Write atomically (temporary file + rename)."""
        path = Path(path)
        meta = {
            "format": VOICE_FORMAT,
            "version": VOICE_VERSION,
            "model_id": self.model_id,
            "ref_text": self.ref_text,
            "language": self.language,
            "name": self.name,
            "created": self.created,
        }
        arrays = {"xvector": np.asarray(self.xvector, np.float32)}
        if self.ref_codes is not None:
            arrays["ref_codes"] = np.asarray(self.ref_codes, np.int64)
        if self.ref_audio is not None:
            arrays["ref_audio"] = np.asarray(self.ref_audio, np.float32)
        path.parent.mkdir(parents=True, exist_ok=True)
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr("voice.json", json.dumps(meta, ensure_ascii=False, indent=1))
            for name, arr in arrays.items():
                buf = io.BytesIO()
                np.save(buf, arr, allow_pickle=False)
                z.writestr(f"{name}.npy", buf.getvalue())
        write_atomic(path, out.getbuffer())
        return path

    @classmethod
    def load(cls, path: str | os.PathLike, model_id: str | None = None) -> Voice:
        """Read a voice file; with model_id, refuse a voice made by a different model."""
        path = Path(path)
        try:
            with zipfile.ZipFile(path) as z:
                meta = json.loads(z.read("voice.json"))
                arrays = {
                    n[:-4]: np.load(io.BytesIO(z.read(n)), allow_pickle=False)
                    for n in z.namelist()
                    if n.endswith(".npy")
                }
        except FileNotFoundError:
            raise VoiceError(f"voice file {path} does not exist") from None
        except (OSError, KeyError, ValueError, zipfile.BadZipFile, json.JSONDecodeError) as e:
            raise VoiceError(f"{path} is not a readable voice file ({e})") from None
        if meta.get("format") != VOICE_FORMAT:
            raise VoiceError(f"{path} is not a Qwen3-TTS Studio voice file")
        if meta.get("version") != VOICE_VERSION:
            raise VoiceError(f"{path} has voice format version {meta.get('version')}; expected {VOICE_VERSION}")
        if "xvector" not in arrays:
            raise VoiceError(f"{path} is damaged: it has no x-vector")
        if model_id is not None and meta.get("model_id") != model_id:
            raise VoiceError(
                f"voice {path.name} was made with a different model; create it again from its reference audio"
            )
        return cls(
            xvector=arrays["xvector"].astype(np.float32),
            model_id=meta.get("model_id", ""),
            ref_codes=arrays.get("ref_codes"),
            ref_text=meta.get("ref_text"),
            language=meta.get("language", "auto"),
            name=meta.get("name", ""),
            created=meta.get("created", ""),
            ref_audio=arrays.get("ref_audio"),
        )
