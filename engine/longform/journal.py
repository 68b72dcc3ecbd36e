"""A long text's finished chunks kept on disk as they are made: closing the app, a crash or a kill in the middle
of a chapter loses at most the chunks being generated, and the next run continues from the rest.

    folder/journal.json       what is spoken (ChunkPlan): model, text, its chunks, voice, language, settings with
                              the base seed, instruction, joining; written once, before the first chunk
    folder/voice.qvoice       the cloned voice, when there is one (a later run may no longer have it)
    folder/NNNN.audio.npy     chunk NNNN's own audio (float32) and codes: written as the chunk finishes, each
    folder/NNNN.codes.npy     file synced and renamed into place; NNNN.json (seed, how it ended) is written last
    folder/NNNN.json          and says the chunk is complete

Chunk i's first attempt uses seed base + i whatever came before it (runner.py), so a run that continues makes
the same chunks an unbroken run would have made. Everything read back is checked (regular files only, sizes
and types): a damaged chunk is made again; a damaged journal.json is not a journal.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeGuard

import numpy as np

from ..codec_format import SAMPLE_RATE
from ..errors import EngineError, TextError, VoiceError
from ..io.fileio import read_own_file, sweep_stale_temps, write_own_file
from ..io.safefile import load_npy_bytes
from ..types import GenerationSettings, SynthesisResult, settings_from_table
from ..voice import Voice, VoiceChoice, speaker_name
from .joining import JoinSettings

try:
    import fcntl
except ImportError:  # Windows: no advisory locks; two runs there are not told apart
    fcntl = None  # type: ignore[assignment]

JOURNAL_FILE = "journal.json"
VOICE_FILE = "voice.qvoice"
FORMAT = "qwen3tts-chunk-journal"
VERSION = 1
MAX_JOURNAL_BYTES = 64 * 2**20  # the text of a book (16 M characters) and its chunks, as JSON
MAX_CHUNK_SECONDS = 3600  # far past any chunk the runaway guard lets through
GROUPS = 16
_MAX_WHOLE = 2**63 - 1


class JournalError(EngineError):
    """The folder holds no usable journal, or one of another text; the message says which, in one line."""


class JournalInUse(JournalError):
    """Another run holds the journal's folder now (ChunkJournal.claim)."""


@dataclass(frozen=True)
class ChunkPlan:
    """What decides every chunk's audio, and what a later run needs to continue: the text's chunks as spoken,
    the model, the voice (a preset speaker's name, or None: a designed voice or a cloned one kept beside the
    plan), language, settings (their seed is the base seed), instruction, and how the chunks are joined."""

    model_id: str
    text: str
    chunks: tuple[str, ...]
    language: str
    settings: GenerationSettings
    speaker: str | None = None
    instruct: str | None = None
    join: JoinSettings = JoinSettings()
    max_chars: int = 0
    voice_name: str = ""  # what the voice is called where it is shown
    model_path: str = ""  # where the model was opened from (to name it when another one is open)

    @classmethod
    def of(cls, model_id: str, text: str, chunks: list[str], language: str, voice: VoiceChoice,
           settings: GenerationSettings, instruct: str | None = None, join: JoinSettings | None = None,
           max_chars: int = 0, voice_name: str = "", model_path: str = "") -> ChunkPlan:
        """The plan of a text about to be spoken in `voice` (a cloned Voice, a preset speaker or its name, None)."""
        speaker = speaker_name(voice)
        return cls(model_id=model_id, text=text, chunks=tuple(chunks), language=language, settings=settings,
                   speaker=speaker, instruct=instruct or None, join=join or JoinSettings(), max_chars=max_chars,
                   voice_name=voice_name, model_path=model_path)

    def to_json(self) -> dict[str, Any]:
        return dict(format=FORMAT, version=VERSION, model_id=self.model_id, text=self.text,
                    chunks=list(self.chunks), language=self.language, settings=asdict(self.settings),
                    speaker=self.speaker, instruct=self.instruct, join=asdict(self.join), max_chars=self.max_chars,
                    voice_name=self.voice_name, model_path=self.model_path)

    @classmethod
    def from_json(cls, data: object) -> ChunkPlan:
        """A plan from its JSON table, every value checked (JournalError names the first wrong one)."""
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise JournalError("it is not a chunk journal")
        if data.get("version") != VERSION:
            raise JournalError(f"it is a chunk journal of another version ({str(data.get('version'))[:20]!r})")
        for key, optional in (("model_id", False), ("text", False), ("language", False), ("speaker", True),
                              ("instruct", True), ("voice_name", False), ("model_path", True)):
            value = data.get(key)
            if not (isinstance(value, str) or (optional and value is None)):
                raise JournalError(f"its {key} is not text")
        chunks = data.get("chunks")
        if not isinstance(chunks, list) or not chunks or not all(isinstance(c, str) for c in chunks):
            raise JournalError("its chunks are not a list of texts")
        max_chars = data.get("max_chars")
        if not _whole(max_chars) or max_chars < 0:
            raise JournalError("its max_chars is not a whole number")
        return cls(model_id=data["model_id"], text=data["text"], chunks=tuple(chunks), language=data["language"],
                   settings=_settings(data.get("settings")), speaker=data["speaker"], instruct=data["instruct"],
                   join=_join(data.get("join")), max_chars=max_chars, voice_name=data["voice_name"],
                   model_path=data.get("model_path") or "")

    def differs_from(self, other: ChunkPlan) -> str | None:
        """Why chunks made under `other` are not this plan's chunks (in a few words), or None when they are. How
        chunks are joined and named does not change them."""
        for what, mine, theirs in (("another model", self.model_id, other.model_id),
                                   ("another text", self.chunks, other.chunks),
                                   ("another language", self.language, other.language),
                                   ("another speaker", self.speaker, other.speaker),
                                   ("another instruction", self.instruct, other.instruct)):
            if mine != theirs:
                return what
        a, b = asdict(self.settings), asdict(other.settings)
        if a["seed"] != b["seed"]:
            return f"seed {b['seed']}"
        for name in ("stream_audio",):  # how audio reaches the caller, not which audio it is
            a.pop(name), b.pop(name)
        if a != b:
            changed = sorted(k for k in a if a[k] != b[k])
            return f"other settings ({', '.join(changed)})"
        return None


def same_voice(a: Voice, b: Voice) -> bool:
    """Whether two cloned voices speak alike: the same model, reference codes and transcript, and x-vectors
    equal to float32 rounding (the speaker encoder run again on the same reference gives the same vector)."""
    codes_a, codes_b = a.ref_codes, b.ref_codes
    same_codes = (codes_a is None and codes_b is None) or (
        codes_a is not None and codes_b is not None and np.array_equal(codes_a, codes_b))
    return (a.model_id == b.model_id and (a.ref_text or None) == (b.ref_text or None) and same_codes
            and a.xvector.shape == b.xvector.shape and bool(np.allclose(a.xvector, b.xvector, rtol=1e-5, atol=1e-6)))


@dataclass
class MadeChunk:
    """A chunk found complete in the journal; its audio and codes are read when it is used (load)."""

    chunk: int
    seed: int
    ended_by: str
    attempts: int
    journal: ChunkJournal

    def load(self) -> SynthesisResult:
        return self.journal.load(self)


class ChunkJournal:
    def __init__(self, folder: Path, plan: ChunkPlan):
        self.folder = Path(folder)
        self.plan = plan

    # --- make, open ------------------------------------------------------------------------------------------
    @classmethod
    def create(cls, folder: str | os.PathLike, plan: ChunkPlan, voice: object = None) -> ChunkJournal:
        """A new journal in `folder` (made if missing; one that holds a journal already is refused): the voice
        (a cloned Voice is kept; a preset speaker is named in the plan), then the plan, before the first chunk
        is made. The plan's settings must carry the base seed."""
        if plan.settings.seed is None:
            raise JournalError("a chunk journal needs the base seed fixed before the first chunk")
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        if os.path.lexists(folder / JOURNAL_FILE):
            raise JournalError(f"{folder} holds a chunk journal already")
        if isinstance(voice, Voice):
            voice_bytes = Voice(xvector=voice.xvector, model_id=voice.model_id, ref_codes=voice.ref_codes,
                                ref_text=voice.ref_text, language=voice.language, name=voice.name,
                                created=voice.created).to_bytes()  # its reference audio is for playback only
            write_own_file(folder / VOICE_FILE, voice_bytes)
        write_own_file(folder / JOURNAL_FILE, json.dumps(plan.to_json(), ensure_ascii=False).encode("utf-8"))
        return cls(folder, plan)

    @classmethod
    def open(cls, folder: str | os.PathLike) -> ChunkJournal:
        """The journal in `folder`. JournalError when there is none or it cannot be used."""
        folder = Path(folder)
        try:
            data = read_own_file(folder / JOURNAL_FILE, MAX_JOURNAL_BYTES)
        except FileNotFoundError:
            raise JournalError(f"{folder} holds no chunk journal") from None
        except (OSError, ValueError) as e:
            raise JournalError(f"the chunk journal in {folder} cannot be read: {_reason(e)}") from None
        try:
            parsed = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise JournalError(f"the chunk journal in {folder} is damaged: it is not JSON") from None
        try:
            return cls(folder, ChunkPlan.from_json(parsed))
        except JournalError as e:
            raise JournalError(f"the chunk journal in {folder} cannot be used: {e}") from None

    @staticmethod
    @contextmanager
    def claim(folder: str | os.PathLike) -> Iterator[Path]:
        """Hold `folder` (made if missing) while the block runs: an advisory lock on the folder itself, so two runs
        of the same long text never keep chunks in one journal at once (each would take the other's chunks for
        its own, or start it afresh). The lock goes with the block or the process: a killed run holds nothing.
        JournalInUse when another run holds it; OSError when the folder cannot be made or opened."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        if fcntl is None:
            yield folder
            return
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise JournalInUse(f"{folder} is in use by another run") from None
            yield folder
        finally:
            os.close(fd)

    @staticmethod
    def exists(folder: str | os.PathLike) -> bool:
        return os.path.lexists(Path(folder) / JOURNAL_FILE)

    def voice(self) -> Voice | str | None:
        """The voice the chunks are spoken in: the kept cloned voice, the preset speaker's name, or None.
        VoiceError when the kept voice cannot be read."""
        if self.plan.speaker is not None:
            return self.plan.speaker
        path = self.folder / VOICE_FILE
        if not os.path.lexists(path):
            return None
        if os.path.islink(path):
            raise VoiceError(f"{path} is a symbolic link; the journal's own voice file never is")
        return Voice.load(path, model_id=self.plan.model_id)

    # --- chunks ----------------------------------------------------------------------------------------------
    def keep(self, chunk: int, result: SynthesisResult, attempts: int = 1) -> None:
        """Keep chunk `chunk` (0-based) as it finishes: its arrays, then the note that says it is complete."""
        if not 0 <= chunk < len(self.plan.chunks):
            raise JournalError(f"chunk {chunk + 1} is not one of the plan's {len(self.plan.chunks)}")
        stem = self.folder / f"{chunk + 1:04d}"
        write_own_file(stem.with_suffix(".audio.npy"), _npy(np.asarray(result.audio, np.float32)))
        write_own_file(stem.with_suffix(".codes.npy"), _npy(np.asarray(result.codes, np.int64)))
        note = dict(seed=int(result.seed) if result.seed is not None else None, ended_by=result.ended_by,
                    attempts=int(attempts))
        write_own_file(stem.with_suffix(".json"), json.dumps(note).encode("ascii"))

    def made(self) -> dict[int, MadeChunk]:
        """The chunks kept complete, by index (0-based). A damaged note is not a chunk: it is made again."""
        out: dict[int, MadeChunk] = {}
        for i in range(len(self.plan.chunks)):
            path = self.folder / f"{i + 1:04d}.json"
            if not os.path.lexists(path):
                continue
            try:
                note = json.loads(read_own_file(path, 4096).decode("ascii"))
            except (OSError, ValueError):
                continue
            if not isinstance(note, dict):
                continue
            seed, ended_by, attempts = note.get("seed"), note.get("ended_by"), note.get("attempts")
            if not (_whole(seed) and isinstance(ended_by, str) and _whole(attempts)):
                continue
            out[i] = MadeChunk(i, seed, ended_by, attempts, self)
        return out

    def load(self, made: MadeChunk) -> SynthesisResult:
        """A made chunk's result. JournalError when its files are damaged (the chunk is then made again)."""
        stem = self.folder / f"{made.chunk + 1:04d}"
        limit = MAX_CHUNK_SECONDS * SAMPLE_RATE * 4 + 4096
        try:
            audio = load_npy_bytes(read_own_file(stem.with_suffix(".audio.npy"), limit))
            codes = load_npy_bytes(read_own_file(stem.with_suffix(".codes.npy"), limit))
        except (OSError, ValueError) as e:
            raise JournalError(f"chunk {made.chunk + 1} in {self.folder} cannot be read: {_reason(e)}") from None
        if audio.ndim != 1 or audio.dtype != np.float32 or not np.isfinite(audio).all():
            raise JournalError(f"chunk {made.chunk + 1} in {self.folder} is damaged: its audio is not samples")
        if codes.ndim != 2 or codes.shape[1] != GROUPS or codes.dtype.kind not in "iu":
            raise JournalError(f"chunk {made.chunk + 1} in {self.folder} is damaged: its codes are not frames")
        return SynthesisResult(audio=audio, codes=codes.astype(np.int64, copy=False), ended_by=made.ended_by,
                               seed=made.seed)

    def discard(self) -> None:
        """Remove the journal's own files (nothing else in the folder) and what a killed run left half written
        (a temporary file of a process that is gone), then the folder if that empties it."""
        sweep_stale_temps(self.folder, force=True, older_than=0)
        names = {JOURNAL_FILE, VOICE_FILE}
        for i in range(len(self.plan.chunks)):
            names.update(f"{i + 1:04d}{suffix}" for suffix in (".json", ".audio.npy", ".codes.npy"))
        for name in names:
            try:
                os.unlink(self.folder / name)
            except FileNotFoundError:
                pass
        try:
            self.folder.rmdir()
        except OSError:
            pass  # it holds something else (a user's file, the command line's chunk files): left alone


def _npy(array: np.ndarray) -> bytes:
    import io

    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=False)
    return buf.getvalue()


def _reason(e: Exception) -> str:
    if isinstance(e, OSError):
        return e.strerror or str(e)
    return str(e)


def _whole(v: object) -> TypeGuard[int]:
    return isinstance(v, int) and not isinstance(v, bool) and abs(v) <= _MAX_WHOLE


def _settings(value: object) -> GenerationSettings:
    try:
        settings = GenerationSettings.from_table(value)
    except TextError as e:
        raise JournalError(str(e)) from None
    if settings.seed is None:
        raise JournalError("it has no base seed")
    return settings


def _join(value: object) -> JoinSettings:
    try:
        return settings_from_table(JoinSettings, value, "join setting")
    except TextError as e:
        raise JournalError(str(e)) from None
