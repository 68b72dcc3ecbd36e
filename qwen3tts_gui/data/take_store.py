"""The take history on disk: every take (audio, codes, text, voice, seed, settings) survives a restart.

One folder per take in <data>/takes/NNNNNN/: take.npz (audio, codes, the rest as JSON) and, for a cloned voice,
voice.qvoice (the engine's voice file, so Regenerate works after a restart even when the voice was deleted from
the library).
A take is written into a hidden folder, synced and renamed into place, so a crash or a power cut never leaves
half a take. Its number is claimed by making that hidden folder (mkdir is atomic and exclusive): two copies of
the app on one folder (a stale lock, a second data folder pointing here) never give two takes the same number. A take that cannot be read is skipped, named once and left for the user; folders this app did not
name are not takes. The oldest takes go when the history grows past the user's size limit.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import shutil
import time
from dataclasses import asdict, replace
from pathlib import Path

from ..engine_adapter import Voice, VoiceError, is_designed, os_reason, speaker_name
from .take_file import FORMAT, TAKE_FILE, StoredResult, TakeFileError, read_header, write_take_file
from .takes import Take

log = logging.getLogger("qwen3tts_gui")  # the app's log (diagnostics.py writes it to a file)

VOICE_FILE = "voice.qvoice"
MAX_TAKE_NUMBER = 999_999_999  # nine digits: a stray folder with a longer number is not a take
_TAKE_DIR = re.compile(r"[0-9]{6,9}")
_PARTIAL = re.compile(r"\.[0-9]{6,9}\.partial")
STALE_SECONDS = 60
STRAY_GAP = 1_000_000  # takes are numbered one after another: a folder this far above the rest is not one of them
CLAIM_TRIES = 10_000  # numbers tried past the last one before a take is left to fail in save(), with its reason


class TakeStore:
    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self._problems: list[str] = []
        self._known: set[int] = set()  # takes read or written here: only these count for the size limit
        self._claimed: set[int] = set()  # numbers whose hidden folder this store made and has not used yet

    def _dir(self, number: int) -> Path:
        return self.folder / f"{number:06d}"

    def _partial(self, number: int) -> Path:
        return self.folder / f".{number:06d}.partial"

    # --- number ----------------------------------------------------------------------------------------------
    def claim_number(self, after: int) -> int:
        """The first number above `after` that no take has and no other writer holds, claimed by making its
        hidden folder (exclusively: of two copies of the app asking at once, one gets it and the other moves
        on). When the folder cannot be written at all, after + 1: save() then says why."""
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError:
            return after + 1
        for number in range(after + 1, after + 1 + CLAIM_TRIES):
            if os.path.lexists(self._dir(number)):
                continue
            try:
                os.mkdir(self._partial(number))
            except FileExistsError:  # another writer's take (or a killed one's, swept at a later start)
                continue
            except OSError:
                return number
            if os.path.lexists(self._dir(number)):  # put in place by another copy between the two looks
                os.rmdir(self._partial(number))
                continue
            self._claimed.add(number)
            return number
        return after + 1

    # --- write -----------------------------------------------------------------------------------------------
    def save(self, take: Take) -> bool:
        """Keep a take; False (and a queued problem) when the disk refuses: the take stays in the session."""
        final = self._dir(take.number)
        tmp = self._partial(take.number)
        meta = dict(format=FORMAT, number=take.number, text=take.text, voice_name=take.voice_name,
                    language=take.language, settings=asdict(take.settings), seed=take.result.seed,
                    ended_by=take.result.ended_by, timings=asdict(take.result.timings), created=take.created,
                    instruct=take.instruct, speaker=speaker_name(take.voice),
                    device=take.device)
        ours = take.number in self._claimed  # the hidden folder is this store's (empty: nothing written yet)
        self._claimed.discard(take.number)
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            try:
                os.mkdir(tmp)
                ours = True
            except FileExistsError:
                if not ours:  # another copy of the app is writing a take of this number: never touched
                    raise FileExistsError(errno.EEXIST, "another copy of the app is writing a take of that "
                                          "number", str(tmp)) from None
            # each file is synced before it is renamed, the folder before it gets its name: after a power cut
            # a take is complete or absent
            write_take_file(tmp, take.result.audio, take.result.codes, meta)
            if isinstance(take.voice, Voice):
                # a cloned voice's reference audio is for playback in the voice panel only; a designed voice is
                # nothing but its audio
                voice = take.voice if is_designed(take.voice) else replace(take.voice, ref_audio=None)
                voice.save(tmp / VOICE_FILE, own_file=True)
            _sync_folder(tmp)
            if os.path.lexists(final):  # never replaced: it is someone's (a stray folder, another copy's take)
                raise FileExistsError(errno.EEXIST, "a folder of that name is already there", str(final))
            tmp.rename(final)
            _sync_folder(self.folder)
        except (OSError, VoiceError) as e:
            if ours:
                shutil.rmtree(tmp, ignore_errors=True)
            why = os_reason(e) if isinstance(e, OSError) else str(e).rstrip(".")
            self._problems.append(f"Take #{take.number} could not be kept for the next session: {why}.")
            log.warning("cannot keep take %s: %s", take.number, e)
            return False
        self._known.add(take.number)
        return True

    def remove(self, number: int) -> None:
        self._known.discard(number)
        shutil.rmtree(self._dir(number), ignore_errors=True)

    def clear(self) -> None:
        for d in self._take_dirs():
            shutil.rmtree(d, ignore_errors=True)
        self._known.clear()

    def enforce_limit(self, limit_bytes: int, keep: int | None = None) -> list[int]:
        """Remove the oldest takes until the history fits in limit_bytes (take `keep`, the newest, always
        stays; a take that could not be read is left for the user). Returns the numbers removed."""
        sizes = [(number, _size(self._dir(number))) for number in sorted(self._known)]
        total = sum(s for _, s in sizes)
        removed = []
        for number, size in sizes:
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
        """Every readable take, oldest first; a damaged one is skipped, left where it is and reported once. Half
        written takes a killed app left behind are swept first."""
        self._sweep_partials()
        takes = []
        for d in self._take_dirs():
            try:
                takes.append(self._load(d))
            except TakeFileError as e:
                self._problems.append(f"Take {d.name} in {self.folder} could not be read and was skipped: "
                                      f"{str(e).rstrip('.')}.")
                log.warning("skipping take %s: %s", d, e)
            else:
                self._known.add(takes[-1].number)
        return takes

    def _sweep_partials(self) -> None:
        """Remove '.NNNNNN.partial' folders (a take being written) untouched for STALE_SECONDS: what a kill -9 or
        a power cut left; a write in progress, by this app or another copy of it, touches its files sooner."""
        try:
            entries = [e for e in os.scandir(self.folder) if _PARTIAL.fullmatch(e.name)]
        except OSError:
            return
        for entry in entries:
            try:
                if not entry.is_dir(follow_symlinks=False):
                    continue
                newest = max([entry.stat(follow_symlinks=False).st_mtime,
                              *(f.stat(follow_symlinks=False).st_mtime for f in os.scandir(entry.path))])
            except OSError:
                continue
            if time.time() - newest > STALE_SECONDS:
                shutil.rmtree(entry.path, ignore_errors=True)
                log.info("removed %s, a take left half written", entry.path)

    def last_number(self) -> int:
        """The highest take number on disk, readable or not (new takes never reuse a damaged one's folder), not
        counting a stray folder far above the others (numbering on from 999999999 would give names no longer
        read as takes: every later take would be lost at the next start)."""
        last = 0
        for number in sorted(int(d.name) for d in self._take_dirs()):
            if number - last > STRAY_GAP:
                break
            last = number
        return last

    def size_bytes(self) -> int:
        return sum(_size(d) for d in self._take_dirs())

    def take_problems(self) -> list[str]:
        problems, self._problems = self._problems, []
        return problems

    def _load(self, d: Path) -> Take:
        """A take's metadata (its audio is read when it is used: StoredResult)."""
        header = read_header(d / TAKE_FILE)
        meta = header.meta
        # a Base take has its voice file (read when the take is regenerated: reading every take's voice made
        # the start take 4 ms a take), a CustomVoice take a speaker name, a VoiceDesign take neither
        voice_file = d / VOICE_FILE if os.path.lexists(d / VOICE_FILE) else None
        # the folder's number is the take's: removing take N removes folder N, whatever the file says
        return Take(int(d.name), meta["text"], meta["voice_name"], None if voice_file else meta["speaker"],
                    meta["language"], meta["settings"], StoredResult(d / TAKE_FILE, header),
                    created=meta["created"], instruct=meta["instruct"], voice_file=voice_file,
                    device=meta["device"] or "")

    def _take_dirs(self) -> list[Path]:
        """Folders named as this app names takes (six to nine ASCII digits, no extra leading zero)."""
        try:
            names = [e.name for e in os.scandir(self.folder) if _is_take_name(e.name) and e.is_dir()]
        except OSError:
            return []
        return [self.folder / n for n in sorted(names, key=int)]


def _is_take_name(name: str) -> bool:
    return bool(_TAKE_DIR.fullmatch(name)) and f"{int(name):06d}" == name


def _sync_folder(folder: Path) -> None:
    """Make a rename inside folder durable (POSIX; elsewhere the rename itself is)."""
    if os.name != "posix":
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _size(d: Path) -> int:
    try:
        return sum(f.stat().st_size for f in d.iterdir() if f.is_file())
    except OSError:
        return 0
