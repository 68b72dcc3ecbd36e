"""A voice to speak with: a cloned voice (x-vector, optional ICL reference: codes + transcript, saved as a small
versioned file) or a preset speaker of a CustomVoice model; VoiceChoice is what a synthesis accepts.

A cloned voice is made by a model's encoders (model_id is their fingerprint: every bundle converted from one
checkpoint shares it). Made again for another model, it keeps what it was made for before beside the new
(`others`): one file then serves both models, and switching between them makes nothing again. Readers that
predate `others` ignore its members and read the voice as made for its model_id."""

from __future__ import annotations

import datetime as _dt
import io
import json
import os
import zipfile
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from .codec_format import SAMPLE_RATE
from .errors import VoiceError
from .io.fileio import create_new, os_reason, write_atomic, write_own_file
from .io.safefile import load_npy_bytes, npy_bytes_needed, regular_file_problem

VOICE_FORMAT = "qwen3tts-voice"
VOICE_VERSION = 1
VOICE_SUFFIX = ".qvoice"
MAX_VOICE_BYTES = 128 * 1024 * 1024  # unpacked; the reference audio (24 kHz float32) is at most a few MB
MAX_META_BYTES = 1024 * 1024
MAX_OTHERS = 16  # models a voice file keeps a making for besides its own


@dataclass
class MadeFor:
    """A voice as another model's encoders made it: its x-vector and, for in-context cloning, reference codes."""

    xvector: np.ndarray
    ref_codes: np.ndarray | None = None
_EMPTY = zipfile.ZipInfo()


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
    others: dict[str, MadeFor] = field(default_factory=dict)  # the same voice made for other models, by model_id

    @property
    def icl(self) -> bool:
        return self.ref_codes is not None and bool(self.ref_text)

    @property
    def made_for(self) -> tuple[str, ...]:
        """Every model_id this voice can speak with."""
        return (self.model_id, *self.others)

    def for_model(self, model_id: str) -> Voice | None:
        """This voice as `model_id` needs it: itself when made for it, else the making kept for that model, else
        None (it has to be made again from its reference)."""
        if model_id == self.model_id:
            return self
        made = self.others.get(model_id)
        if made is None:
            return None
        others = {k: v for k, v in self.others.items() if k != model_id}
        others[self.model_id] = MadeFor(self.xvector, self.ref_codes)
        return replace(self, xvector=made.xvector, ref_codes=made.ref_codes, model_id=model_id, others=others)

    def keeping(self, earlier: Voice) -> Voice:
        """This voice (just made for a new model) with what `earlier` was made for kept beside it, the oldest
        dropped past MAX_OTHERS."""
        others = dict(earlier.others)
        others[earlier.model_id] = MadeFor(earlier.xvector, earlier.ref_codes)
        others.pop(self.model_id, None)
        kept = dict(list(others.items())[-MAX_OTHERS:])
        return replace(self, others={**kept, **self.others})

    def to_bytes(self) -> bytes:
        """The voice file's content (a zip of voice.json and .npy arrays)."""
        meta = {
            "format": VOICE_FORMAT,
            "version": VOICE_VERSION,
            "model_id": self.model_id,
            "ref_text": self.ref_text,
            "language": self.language,
            "name": self.name,
            "created": self.created,
            "others": list(self.others),
        }
        arrays = {"xvector": np.asarray(self.xvector, np.float32)}
        for i, made in enumerate(self.others.values()):
            arrays[f"other{i}_xvector"] = np.asarray(made.xvector, np.float32)
            if made.ref_codes is not None:
                arrays[f"other{i}_ref_codes"] = np.asarray(made.ref_codes, np.int64)
        if self.ref_codes is not None:
            arrays["ref_codes"] = np.asarray(self.ref_codes, np.int64)
        if self.ref_audio is not None:
            arrays["ref_audio"] = np.asarray(self.ref_audio, np.float32)
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr("voice.json", json.dumps(meta, ensure_ascii=False, indent=1))
            for name, arr in arrays.items():
                buf = io.BytesIO()
                np.save(buf, arr, allow_pickle=False)
                z.writestr(f"{name}.npy", buf.getvalue())
        return out.getvalue()

    def save(self, path: str | os.PathLike, own_file: bool = False) -> Path:
        """Write atomically (temporary file + rename); an existing file keeps its mode. own_file: a file of the
        app's own voice library, never written through a link (engine/io/fileio.py write_own_file)."""
        path = Path(path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            return (write_own_file if own_file else write_atomic)(path, self.to_bytes())
        except OSError as e:
            raise VoiceError(f"Cannot save the voice file {path}: {os_reason(e)}.") from None

    def save_new(self, path: str | os.PathLike) -> Path:
        """Write only if `path` does not exist yet, exclusively (raises FileExistsError when it is taken)."""
        path = Path(path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            return create_new(path, self.to_bytes())
        except FileExistsError:
            raise
        except OSError as e:
            raise VoiceError(f"Cannot save the voice file {path}: {os_reason(e)}.") from None

    @classmethod
    def load(cls, path: str | os.PathLike, model_id: str | None = None) -> Voice:
        """Read a voice file; with model_id, the voice as that model needs it (for_model), refused when it was
        made by other models only."""
        path = Path(path)
        meta, arrays = _read(path, with_arrays=True)
        if "xvector" not in arrays:
            raise VoiceError(f"{path} is damaged: it has no x-vector")
        x, codes, audio = arrays["xvector"], arrays.get("ref_codes"), arrays.get("ref_audio")
        _check_made(path, x, codes)
        if audio is not None and (audio.ndim != 1 or audio.dtype.kind != "f"):
            raise VoiceError(f"{path} is damaged: its reference audio is not mono samples")
        others = {}
        for i, other in enumerate(meta["others"]):
            ox, ocodes = arrays.get(f"other{i}_xvector"), arrays.get(f"other{i}_ref_codes")
            if ox is None:
                raise VoiceError(f"{path} is damaged: it names a making for another model without its x-vector")
            _check_made(path, ox, ocodes)
            others[other] = MadeFor(ox.astype(np.float32), ocodes)
        voice = cls(
            xvector=x.astype(np.float32),
            model_id=meta["model_id"],
            ref_codes=codes,
            ref_text=meta["ref_text"],
            language=meta["language"],
            name=meta["name"],
            created=meta["created"],
            ref_audio=audio,
            others=others,
        )
        if model_id is None:
            return voice
        fitted = voice.for_model(model_id)
        if fitted is None:
            raise VoiceError(
                f"voice {path.name} was made with a different model; create it again from its reference audio"
            )
        return fitted

    @classmethod
    def summary(cls, path: str | os.PathLike) -> VoiceSummary:
        """What a voice list shows, read from the file's metadata without decompressing its audio."""
        path = Path(path)
        meta, lengths = _read(path, with_arrays=False)
        audio = lengths.get("ref_audio")
        return VoiceSummary(path=path, name=meta["name"] or path.stem, language=meta["language"],
                            created=meta["created"], ref_text=meta["ref_text"], model_id=meta["model_id"],
                            ref_seconds=None if audio is None else audio / SAMPLE_RATE,
                            others=tuple(meta["others"]))


@dataclass
class VoiceSummary:
    """A voice file's metadata (see Voice.summary)."""

    path: Path
    name: str
    language: str
    created: str
    ref_text: str | None
    model_id: str
    ref_seconds: float | None
    others: tuple[str, ...] = ()  # other models the file holds a making for (Voice.others)

    @property
    def made_for(self) -> tuple[str, ...]:
        return (self.model_id, *self.others)

    @property
    def icl(self) -> bool:
        return bool(self.ref_text)


def _check_made(path: Path, xvector: np.ndarray, codes: np.ndarray | None) -> None:
    if xvector.ndim != 1 or xvector.dtype.kind != "f" or not np.isfinite(xvector).all():
        raise VoiceError(f"{path} is damaged: its x-vector is not a list of finite numbers")
    if codes is not None and (codes.ndim != 2 or codes.dtype.kind not in "iu"):
        raise VoiceError(f"{path} is damaged: its reference codes are not a (frames, groups) integer table")


def _read(path: Path, with_arrays: bool) -> tuple[dict, dict]:
    """(checked metadata, arrays) or, without arrays, (metadata, {name: length of its first axis})."""
    problem = regular_file_problem(path, "voice file")
    if problem:
        raise VoiceError(problem)
    try:
        with zipfile.ZipFile(path) as z:
            members = {i.filename: i for i in z.infolist()}
            total = sum(i.file_size for i in members.values())
            if total > MAX_VOICE_BYTES or members.get("voice.json", _EMPTY).file_size > MAX_META_BYTES:
                raise VoiceError(f"{path} is not a voice file this app reads: it unpacks to {total} bytes, more "
                                 f"than the {MAX_VOICE_BYTES} a voice needs")
            # zipfile stops at each member's recorded size, so these reads are bounded by the check above
            meta = _checked_meta(path, json.loads(z.read("voice.json")))
            arrays: dict = {}
            for n in members:
                if not n.endswith(".npy"):
                    continue
                if with_arrays:
                    arrays[n[:-4]] = load_npy_bytes(z.read(n))
                else:
                    with z.open(n) as f:
                        shape, _dtype, _needed, _offset = npy_bytes_needed(io.BytesIO(f.read(4096)))
                    arrays[n[:-4]] = shape[0] if shape else 1
    except VoiceError:
        raise
    except (OSError, KeyError, ValueError, EOFError, zipfile.BadZipFile, RuntimeError, NotImplementedError) as e:
        why = f"no {e.args[0]}" if isinstance(e, KeyError) else (str(e).splitlines() or [type(e).__name__])[0]
        raise VoiceError(f"{path} is not a readable voice file ({why})") from None
    return meta, arrays


def _checked_meta(path: Path, meta: object) -> dict:
    if not isinstance(meta, dict) or meta.get("format") != VOICE_FORMAT:
        raise VoiceError(f"{path} is not a Qwen3-TTS Studio voice file")
    if meta.get("version") != VOICE_VERSION:
        raise VoiceError(f"{path} has voice format version {meta.get('version')!r}; this app reads version "
                         f"{VOICE_VERSION}")
    out = {"ref_text": meta.get("ref_text")}
    if out["ref_text"] is not None and not isinstance(out["ref_text"], str):
        raise VoiceError(f"{path} is damaged: its ref_text is not text")
    others = meta.get("others", [])
    if (not isinstance(others, list) or len(others) > MAX_OTHERS
            or not all(isinstance(o, str) and o for o in others) or len(set(others)) != len(others)):
        raise VoiceError(f"{path} is damaged: its list of other models is not a short list of names")
    out["others"] = others
    for key, default in (("model_id", ""), ("language", "auto"), ("name", ""), ("created", "")):
        value = meta.get(key, default)
        if not isinstance(value, str):
            raise VoiceError(f"{path} is damaged: its {key} is not text")
        out[key] = value
    return out


@dataclass(frozen=True)
class Speaker:
    """A preset speaker of a CustomVoice model."""

    name: str  # lower case, as the model looks it up
    codec_id: int  # its row in the talker's codec embedding
    dialect: str | None = None  # e.g. "sichuan_dialect"

    @property
    def dialect_name(self) -> str:
        """"Sichuan dialect" for "sichuan_dialect"; "" for a speaker without one."""
        if not self.dialect:
            return ""
        return f"{self.dialect.replace('_dialect', '').replace('_', ' ').title()} dialect"

    @property
    def label(self) -> str:
        """"eric (Sichuan dialect)" for lists and menus."""
        return f"{self.name} ({self.dialect_name})" if self.dialect else self.name


# what a synthesis speaks with: a cloned voice (Base), a preset speaker or its name (CustomVoice), None (VoiceDesign)
VoiceChoice = Voice | Speaker | str | None


def speaker_name(voice: VoiceChoice) -> str | None:
    """The preset speaker a voice choice names (a Speaker or its name), None for a cloned voice or none."""
    if isinstance(voice, Speaker):
        return voice.name
    return voice if isinstance(voice, str) else None
