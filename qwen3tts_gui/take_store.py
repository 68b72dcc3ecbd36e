"""The take history on disk: every take (audio, codes, text, voice, seed, settings) survives a restart.

One folder per take in <data>/takes/NNNNNN/: take.npz (audio, codes, the rest as JSON) and, for a cloned voice,
voice.qvoice (the engine's voice file, so Regenerate works after a restart even when the voice was deleted from
the library).
A take is written into a hidden folder and renamed into place, so a crash never leaves half a take. The oldest
takes go when the history grows past the user's size limit.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict, fields, replace
from pathlib import Path

import numpy as np

from .diagnostics import log
from .engine_adapter import GenerationSettings, SynthesisResult, Timings, Voice, VoiceError, is_designed
from .takes import Take

TAKE_FILE = "take.npz"
VOICE_FILE = "voice.qvoice"
FORMAT = 1
_SETTING_NAMES = {f.name for f in fields(GenerationSettings)}
_TIMING_NAMES = {f.name for f in fields(Timings)}


class TakeStore:
    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self._problems: list[str] = []

    def _dir(self, number: int) -> Path:
        return self.folder / f"{number:06d}"

    # --- write -----------------------------------------------------------------------------------------------
    def save(self, take: Take) -> bool:
        """Keep a take; False (and a queued problem) when the disk refuses: the take stays in the session."""
        final = self._dir(take.number)
        tmp = self.folder / f".{take.number:06d}.partial"
        meta = dict(format=FORMAT, number=take.number, text=take.text, voice_name=take.voice_name,
                    language=take.language, settings=asdict(take.settings), seed=take.result.seed,
                    ended_by=take.result.ended_by, timings=asdict(take.result.timings), created=take.created,
                    instruct=take.instruct, speaker=take.voice if isinstance(take.voice, str) else None)
        try:
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
            np.savez(tmp / TAKE_FILE, audio=np.asarray(take.audio, np.float32),
                     codes=np.asarray(take.result.codes, np.int64), meta=np.array(json.dumps(meta)))
            if isinstance(take.voice, Voice):
                # a cloned voice's reference audio is for playback in the voice panel only; a designed voice is
                # nothing but its audio
                voice = take.voice if is_designed(take.voice) else replace(take.voice, ref_audio=None)
                voice.save(tmp / VOICE_FILE)
            if final.exists():
                shutil.rmtree(final)
            tmp.rename(final)
        except (OSError, VoiceError) as e:
            shutil.rmtree(tmp, ignore_errors=True)
            self._problems.append(f"Take #{take.number} could not be kept for the next session: {e}.")
            log.warning("cannot keep take %s: %s", take.number, e)
            return False
        return True

    def remove(self, number: int) -> None:
        shutil.rmtree(self._dir(number), ignore_errors=True)

    def clear(self) -> None:
        for d in self._take_dirs():
            shutil.rmtree(d, ignore_errors=True)

    def enforce_limit(self, limit_bytes: int, keep: int | None = None) -> list[int]:
        """Remove the oldest takes until the history fits in limit_bytes (take `keep`, the newest, always
        stays). Returns the numbers removed."""
        sizes = [(self._number(d), _size(d)) for d in self._take_dirs()]
        total = sum(s for _, s in sizes)
        removed = []
        for number, size in sorted(sizes):
            if total <= limit_bytes:
                break
            if number == keep:
                continue
            self.remove(number)
            total -= size
            removed.append(number)
        return removed

    # --- read ------------------------------------------------------------------------------------------------
    def load_all(self) -> list[Take]:
        """Every readable take, oldest first; a damaged one is skipped and reported once."""
        takes = []
        for d in self._take_dirs():
            try:
                takes.append(self._load(d))
            except (OSError, ValueError, KeyError, TypeError, VoiceError) as e:
                self._problems.append(f"Take {d.name} in {self.folder} could not be read and was skipped: {e}.")
                log.warning("skipping take %s: %s", d, e)
        return takes

    def last_number(self) -> int:
        """The highest take number on disk, readable or not (new takes never reuse a damaged one's folder)."""
        return max((self._number(d) for d in self._take_dirs()), default=0)

    def size_bytes(self) -> int:
        return sum(_size(d) for d in self._take_dirs())

    def take_problems(self) -> list[str]:
        problems, self._problems = self._problems, []
        return problems

    def _load(self, d: Path) -> Take:
        with np.load(d / TAKE_FILE, allow_pickle=False) as z:
            meta = json.loads(str(z["meta"]))
            audio = np.asarray(z["audio"], np.float32)
            codes = np.asarray(z["codes"], np.int64)
        if meta.get("format") != FORMAT:
            raise ValueError(f"unknown take format {meta.get('format')!r}")
        if audio.ndim != 1 or codes.ndim != 2:
            raise ValueError("its audio or codes have the wrong shape")
        settings = GenerationSettings(**{k: v for k, v in meta["settings"].items() if k in _SETTING_NAMES})
        # a Base take has its voice file, a CustomVoice take a speaker name, a VoiceDesign take neither
        voice = Voice.load(d / VOICE_FILE) if (d / VOICE_FILE).exists() else meta.get("speaker")
        timings = Timings(**{k: v for k, v in (meta.get("timings") or {}).items() if k in _TIMING_NAMES})
        result = SynthesisResult(audio=audio, codes=codes, ended_by=meta["ended_by"], seed=meta["seed"],
                                 timings=timings)
        return Take(int(meta["number"]), meta["text"], meta["voice_name"], voice, meta["language"], settings,
                    result, created=meta["created"], instruct=meta.get("instruct"))

    def _take_dirs(self) -> list[Path]:
        try:
            return sorted((d for d in self.folder.iterdir() if d.is_dir() and d.name.isdigit()), key=self._number)
        except OSError:
            return []

    @staticmethod
    def _number(d: Path) -> int:
        return int(d.name)


def _size(d: Path) -> int:
    try:
        return sum(f.stat().st_size for f in d.iterdir() if f.is_file())
    except OSError:
        return 0
