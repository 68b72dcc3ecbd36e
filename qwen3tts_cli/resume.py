"""`qwen3tts synth --chunks-dir DIR`: each chunk of a long text is kept in DIR as it is made (engine.ChunkJournal),
so a run stopped by Ctrl+C, a crash or kill -9 loses at most the chunk being generated. The same command run
again with the same DIR continues where it stopped: the chunks already made are read back, not generated again,
and the output is the file an unbroken run would have written."""

from __future__ import annotations

import secrets
import sys
from dataclasses import replace
from pathlib import Path

from .common import UsageError


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
                 seed_given: bool):
    """(journal, settings with the base seed, voice, the chunks made before). A folder a stopped run left is
    continued when it holds this text, voice and settings; anything else is refused in one line."""
    from engine import ChunkJournal, ChunkPlan, JournalError, SynthesisRequest, Voice, same_voice

    chunks = [c.text for c in SynthesisRequest(text, language=language, options=options).chunks()]
    if ChunkJournal.exists(folder):
        try:
            journal = ChunkJournal.open(folder)
            kept = journal.voice()
        except (JournalError, OSError) as e:
            raise UsageError(f"Cannot continue from --chunks-dir {folder}: {str(e).rstrip('.')}.") from None
        if not seed_given:  # the stopped run's seed: every chunk comes out as it would have
            settings = replace(settings, seed=journal.plan.settings.seed)
        plan = ChunkPlan.of(synth.model_id, text, chunks, language, voice, settings, instruct, options.join,
                            options.max_chars)
        why = plan.differs_from(journal.plan)
        if why is None and isinstance(voice, Voice) and not (isinstance(kept, Voice) and same_voice(voice, kept)):
            why = "another voice"
        if why is not None:
            raise UsageError(f"--chunks-dir {folder} holds chunks of {why}; give the same text, voice and settings "
                             "to continue there, or a new folder.")
        made = journal.made()
        print(f"qwen3tts: continuing in {folder}: {len(made)} of {len(chunks)} chunks were made before.",
              file=sys.stderr)
        return journal, settings, kept if isinstance(voice, Voice) else voice, made
    if settings.seed is None:  # fixed now, so that a later run can continue with the same seeds
        settings = replace(settings, seed=secrets.randbits(32))
    plan = ChunkPlan.of(synth.model_id, text, chunks, language, voice, settings, instruct, options.join,
                        options.max_chars)
    try:
        journal = ChunkJournal.create(folder, plan, voice)
    except (JournalError, OSError) as e:
        raise UsageError(f"Cannot keep chunks in --chunks-dir {folder}: {getattr(e, 'strerror', None) or e}.") from None
    return journal, settings, voice, {}


def keep_chunk(journal, ev) -> None:
    """Keep a finished chunk (a ChunkAudio) in the journal; a disk that refuses stops the run in one line."""
    from engine import os_reason

    try:
        journal.keep(ev.chunk, ev.result, ev.attempts)
    except OSError as e:
        raise UsageError(f"Cannot keep chunk {ev.chunk + 1} in --chunks-dir {journal.folder}: {os_reason(e)}.") \
            from None
