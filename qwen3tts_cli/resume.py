"""A long text's chunks kept as they are made (engine.ChunkJournal), so a run of `qwen3tts synth` stopped by Ctrl+C,
a crash or kill -9 loses at most the chunk being generated, and the same command run again continues where it
stopped: the chunks already made are read back, not generated again, and the output is the file an unbroken run
would have written.

`--chunks-dir DIR` keeps them in DIR (with each chunk as a WAV file). Without it, a text of several chunks keeps
them in the app's cache folder, in a folder named by the command's request (run_folder): the same command finds
it again, and it goes once the output is written. A run without --seed draws its seed and keeps it in the journal;
run again without --seed, the command continues with that seed (as with --chunks-dir), which is what the same
command after a kill means. The line saying so names the folder, to be removed for a fresh start.

A folder is claimed while a run keeps chunks in it (engine ChunkJournal.claim: an advisory lock that goes with the
process, kill -9 included): the same command started again while the first still runs, or a second run given the
same --chunks-dir, is refused in one line instead of reading the first run's chunks as its own or starting the
folder afresh under it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import secrets
import shutil
import sys
from contextlib import ExitStack
from dataclasses import asdict, replace
from pathlib import Path

from .common import UsageError

RUNS_FOLDER = "unfinished synth runs"  # in the app's cache folder: one folder per stopped long text


class Mismatch(Exception):
    """The journal in the folder is of another request (the message says how, in a few words)."""


def check_chunks_dir(folder: Path) -> None:
    """Before any work: a new or empty folder, or one holding a stopped run's chunks (to continue it)."""
    from engine import ChunkJournal

    if folder.exists() and folder.is_dir() and ChunkJournal.exists(folder):
        return
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise UsageError(f"--chunks-dir {folder} must be a new or empty folder (or one a stopped run left, to "
                         "continue it); nothing in it is overwritten.")
    if not (folder.parent if str(folder.parent) else Path(".")).is_dir():
        raise UsageError(f"Cannot make --chunks-dir {folder}: its parent folder does not exist.")


def open_journal(folder: Path, synth, voice, settings, text: str, language: str, instruct: str | None, options,
                 seed_given: bool, held: ExitStack):
    """--chunks-dir: (journal, settings with the base seed, voice, the chunks made before). A folder a stopped run
    left is continued when it holds this text, voice and settings; anything else is refused in one line, and so is
    a folder another run is keeping chunks in now. `held` keeps the folder claimed until the command ends."""
    from engine import ChunkJournal, JournalError

    chunks = _chunks(text, language, options)
    refused = _claim(held, folder, f"--chunks-dir {folder} is in use by another qwen3tts run now; wait for it to "
                                   "end, or give another folder.")
    if refused is not None:
        raise UsageError(f"Cannot keep chunks in --chunks-dir {folder}: {refused.strerror or refused}.")
    if ChunkJournal.exists(folder):
        try:
            journal, settings, voice, made = _continue(folder, synth, voice, settings, text, chunks, language,
                                                       instruct, options, seed_given)
        except (JournalError, OSError) as e:
            raise UsageError(f"Cannot continue from --chunks-dir {folder}: {str(e).rstrip('.')}.") from None
        except Mismatch as e:
            raise UsageError(f"--chunks-dir {folder} holds chunks of {e}; give the same text, voice and settings "
                             "to continue there, or a new folder.") from None
        print(f"qwen3tts: continuing in {folder}: {len(made)} of {len(chunks)} chunks were made before.",
              file=sys.stderr)
        return journal, settings, voice, made
    try:
        journal, settings = _create(folder, synth, voice, settings, text, chunks, language, instruct, options)
    except (JournalError, OSError) as e:
        raise UsageError(f"Cannot keep chunks in --chunks-dir {folder}: {getattr(e, 'strerror', None) or e}.") from None
    return journal, settings, voice, {}


def open_run_journal(folder: Path, synth, voice, settings, text: str, language: str, instruct: str | None, options,
                     seed_given: bool, held: ExitStack):
    """Without --chunks-dir: as open_journal, in run_folder's folder, for a text of several chunks (else no
    journal: (None, settings, voice, {})). Chunks there that this command cannot use (damaged, of a model now
    replaced at the same path) are replaced; a cache that cannot be written leaves the run without a journal, said
    in one line: neither stops the run. The same command running now (the folder claimed) is refused in one line:
    two runs would write one recording."""
    from engine import ChunkJournal, JournalError

    chunks = _chunks(text, language, options)
    if len(chunks) < 2:
        return None, settings, voice, {}
    refused = _claim(held, folder, f"The same command is running now (its chunks are kept in {folder}); wait for "
                                   "it to end, or write to another output file.")
    if refused is not None:
        return _no_journal(settings, voice, refused)
    if ChunkJournal.exists(folder):
        try:
            journal, kept_settings, kept_voice, made = _continue(folder, synth, voice, settings, text, chunks,
                                                                 language, instruct, options, seed_given)
            print(f"qwen3tts: continuing this command's stopped run: {len(made)} of {len(chunks)} chunks were made "
                  f"before (kept in {folder}; remove it to start afresh).", file=sys.stderr)
            return journal, kept_settings, kept_voice, made
        except (JournalError, OSError, Mismatch) as e:
            print(f"qwen3tts: the chunks a stopped run of this command left in {folder} cannot be used "
                  f"({str(e).rstrip('.')}); starting afresh.", file=sys.stderr)
            _empty(folder)  # the app's own cache folder, named by this request (emptied: it stays claimed)
    try:
        journal, settings = _create(folder, synth, voice, settings, text, chunks, language, instruct, options)
    except (JournalError, OSError) as e:
        return _no_journal(settings, voice, e)
    return journal, settings, voice, {}


def _claim(held: ExitStack, folder: Path, in_use: str) -> OSError | None:
    """Claim `folder` for the rest of the command (ChunkJournal.claim, released when `held` closes): UsageError
    `in_use` when another run holds it now; the OSError when the folder cannot be made or opened (each caller
    says that its own way), else None."""
    from engine import ChunkJournal, JournalInUse

    try:
        held.enter_context(ChunkJournal.claim(folder))
    except JournalInUse:
        raise UsageError(in_use) from None
    except OSError as e:
        return e
    return None


def _no_journal(settings, voice, e: Exception):
    """A run that keeps no chunks, said in one line."""
    print(f"qwen3tts: the chunks are not kept as they are made ({getattr(e, 'strerror', None) or e}); a stopped "
          "run starts again from the beginning.", file=sys.stderr)
    return None, journal_settings(settings), voice, {}


def _empty(folder: Path) -> None:
    """Remove what `folder` holds (links as links, never what they point to), keeping the folder itself."""
    for child in folder.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)


def run_folder(args: argparse.Namespace, model_id: str, text: str, language: str, settings, options) -> Path:
    """The folder, in the app's cache, of this command's long text when no --chunks-dir is given: named by what
    decides its recording as the command gives it (the model, the text, the language, the voice's inputs with the
    reference's or voice file's bytes, the settings with the seed as given, how the text is split and joined) and
    by the output file. The same command run again names the same folder; a changed one another."""
    from engine import cache_dir

    request = dict(model=os.path.abspath(args.model), model_id=model_id, text=text, language=language,
                   ref=_digest(args.ref), ref_text=args.ref_text, x_vector_only=bool(args.x_vector_only),
                   voice=_digest(args.voice), speaker=args.speaker, instruct=args.instruct, settings=asdict(settings),
                   max_chars=options.max_chars, join=asdict(options.join), output=os.path.abspath(args.output))
    name = hashlib.sha256(json.dumps(request, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()
    return cache_dir() / RUNS_FOLDER / name[:32]


def keep_chunk(journal, ev) -> None:
    """Keep a finished chunk (a ChunkAudio) in --chunks-dir; a disk that refuses stops the run in one line."""
    from engine import os_reason

    try:
        journal.keep(ev.chunk, ev.result, ev.attempts)
    except OSError as e:
        raise UsageError(f"Cannot keep chunk {ev.chunk + 1} in --chunks-dir {journal.folder}: {os_reason(e)}.") \
            from None


def keep_run_chunk(journal, ev) -> bool:
    """Keep a finished chunk in the cache folder's journal; False, said in one line, when the cache refuses (the
    run goes on: the chunks are a safeguard the user did not ask for)."""
    from engine import os_reason

    try:
        journal.keep(ev.chunk, ev.result, ev.attempts)
    except OSError as e:
        print(f"qwen3tts: the chunks made from here on are not kept ({os_reason(e)} in {journal.folder}); a "
              "stopped run would make them again.", file=sys.stderr)
        return False
    return True


def journal_settings(settings):
    """The settings with the base seed fixed, so that a later run can continue with the same seeds."""
    return settings if settings.seed is not None else replace(settings, seed=secrets.randbits(32))


def _chunks(text: str, language: str, options) -> list[str]:
    from engine import SynthesisRequest

    return [c.text for c in SynthesisRequest(text, language=language, options=options).chunks()]


def _continue(folder: Path, synth, voice, settings, text: str, chunks: list[str], language: str,
              instruct: str | None, options, seed_given: bool):
    """The journal in `folder` continued: (journal, settings with its base seed, voice, chunks made). Mismatch
    when it holds another request; JournalError or OSError when it cannot be read."""
    from engine import ChunkJournal, ChunkPlan, Voice, same_voice

    journal = ChunkJournal.open(folder)
    kept = journal.voice()
    if not seed_given:  # the stopped run's seed: every chunk comes out as it would have
        settings = replace(settings, seed=journal.plan.settings.seed)
    plan = ChunkPlan.of(synth.model_id, text, chunks, language, voice, settings, instruct, options.join,
                        options.max_chars)
    why = plan.differs_from(journal.plan)
    if why is None and isinstance(voice, Voice) and not (isinstance(kept, Voice) and same_voice(voice, kept)):
        why = "another voice"
    if why is not None:
        raise Mismatch(why)
    return journal, settings, kept if isinstance(voice, Voice) else voice, journal.made()


def _create(folder: Path, synth, voice, settings, text: str, chunks: list[str], language: str,
            instruct: str | None, options):
    from engine import ChunkJournal, ChunkPlan

    settings = journal_settings(settings)
    plan = ChunkPlan.of(synth.model_id, text, chunks, language, voice, settings, instruct, options.join,
                        options.max_chars)
    return ChunkJournal.create(folder, plan, voice), settings


def _digest(path: Path | None) -> str | None:
    """A file's bytes, as a digest (None: no file given, or one that cannot be read now)."""
    if path is None:
        return None
    try:
        with open(path, "rb") as f:
            return hashlib.file_digest(f, "sha256").hexdigest()
    except OSError:
        return None
