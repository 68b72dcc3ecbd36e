"""Long texts the app did not finish. A text of several chunks is generated with a chunk journal in
<data>/unfinished/NNNNNN/ (engine.ChunkJournal): every chunk is on disk as soon as it is made, so closing the app,
a crash or a kill in the middle of a chapter loses at most the chunk being generated. The journal goes once the
take is kept. At the next start, once a model is open, the app offers to continue each one where it stopped, to
keep what was made as a take (the missing chunks left out), or to discard it; answered "Cancel", it asks again
at the next start.
"""

from __future__ import annotations

import logging
import os
import secrets
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QWidget

from ..context import AppContext
from ..engine_adapter import (
    SAMPLE_RATE,
    ChunkAudio,
    ChunkJournal,
    ChunkPlan,
    GenerationSettings,
    JournalError,
    LongTextOptions,
    SynthesisRequest,
    SynthesisResult,
    SynthesizerContract,
    VoiceChoice,
    VoiceError,
    os_reason,
    recording_of_made,
    run_speech,
)
from ..workers import CallWorker

log = logging.getLogger("qwen3tts_gui")

CHOICES = ["Continue", "Keep as a take", "Discard"]


class Unfinished(QObject):
    """`window` is the parent of its dialogs. `resume(journal)` continues a journal's text; `keep_take(result,
    plan, voice, after)` makes a take of the chunks made, joined, and runs after() once it is on disk (both are
    the generation controller's). `status` carries a status-line message and how long it shows (ms)."""

    status = Signal(str, int)

    def __init__(self, ctx: AppContext, window: QWidget, folder: Path):
        super().__init__(window)
        self.ctx, self.window, self.folder = ctx, window, folder
        self.resume: Callable[[ChunkJournal], object] | None = None
        self.keep_take: Callable[[SynthesisResult, ChunkPlan, VoiceChoice, Callable[[], None]], object] | None = None
        self._offered = False
        self.in_use: set[Path] = set()  # journals of generations running or taken in this session
        self.asked: set[Path] = set()  # offered once this session

    # --- while generating ------------------------------------------------------------------------------------
    def begin(self, synth: SynthesizerContract, text: str, voice: VoiceChoice, voice_name: str, language: str,
              settings: GenerationSettings, instruct: str | None,
              options: LongTextOptions) -> tuple[ChunkJournal | None, GenerationSettings]:
        """A journal for a text about to be generated in several chunks, and its settings with the base seed
        fixed (a later run continues with the same seeds). None when the disk refuses: the text is generated
        all the same, said in the status line."""
        if settings.seed is None:
            settings = replace(settings, seed=secrets.randbits(32))
        chunks = [c.text for c in SynthesisRequest(text, language=language, options=options).chunks()]
        plan = ChunkPlan.of(synth.model_id, text, chunks, synth.check_language(language), voice, settings, instruct,
                            options.join, options.max_chars, voice_name, str(self.ctx.model_path or ""))
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            folder = _new_folder(self.folder)
            journal = ChunkJournal.create(folder, plan, voice)
        except (OSError, JournalError, VoiceError) as e:
            why = os_reason(e) if isinstance(e, OSError) else str(e).rstrip(".")
            log.warning("long text not kept as it is made: %s", e)
            self.status.emit(f"The chunks of this text are not kept as they are made ({why}).", 10000)
            return None, settings
        self.in_use.add(journal.folder)
        return journal, settings

    def taken(self, journal: ChunkJournal | None) -> Callable[[], None]:
        """What to do once the journal's take is on disk: remove the journal."""
        def done() -> None:
            if journal is not None:
                journal.discard()
                self.in_use.discard(journal.folder)
        return done

    def stopped(self, journal: ChunkJournal | None) -> str | None:
        """The generation stopped (cancelled, failed): the journal stays when it holds chunks. A note saying so."""
        if journal is None:
            return None
        made = len(journal.made())
        self.in_use.discard(journal.folder)
        if not made:
            journal.discard()
            return None
        self.asked.add(journal.folder)  # offered at the next start, not now
        return (f"The {made} chunk{'s' if made != 1 else ''} made so far are kept; the next start offers to "
                "continue.")

    # --- at the start ----------------------------------------------------------------------------------------
    def journals(self) -> list[ChunkJournal]:
        """The unfinished texts on disk (oldest first); a folder that is not a usable journal is left alone."""
        try:
            names = sorted(e.name for e in os.scandir(self.folder) if e.is_dir(follow_symlinks=False))
        except OSError:
            return []
        found = []
        for name in names:
            folder = self.folder / name
            if folder in self.in_use or not ChunkJournal.exists(folder):
                continue
            try:
                found.append(ChunkJournal.open(folder))
            except JournalError as e:
                log.warning("unfinished text skipped: %s", e)
        return found

    def offer(self, again: bool = False) -> None:
        """Ask about the unfinished texts, once a session: when a model is open and nothing runs. again: the
        user asked (Take > Unfinished texts): every one is asked about, a text cancelled a moment ago too."""
        if again:
            if not self.ctx.can_start(self.window):
                return
            if not self.journals():
                self.ctx.dialogs.info(self.window, "Unfinished texts", "There is no unfinished text.")
                return
            self._offered = False
            self.asked.clear()
        if self._offered or self.ctx.synth is None or self.ctx.job is not None:
            return
        self._offered = True
        for journal in self.journals():
            if journal.folder in self.asked:
                continue
            self.asked.add(journal.folder)
            plan, made = journal.plan, journal.made()
            text = " ".join(plan.text.split())
            short = text if len(text) <= 80 else text[:79] + "…"
            answer = self.ctx.dialogs.choose(
                self.window, "A long text was not finished",
                f"“{short}” in the voice {plan.voice_name or 'chosen then'} stopped after {len(made)} of "
                f"{len(plan.chunks)} chunks.\n\nContinue where it stopped, keep what was made as a take (the rest "
                "left out), or discard it? (Cancel: ask again at the next start.)", CHOICES)
            if answer == 0:
                self._continue(journal)
                return  # one generation at a time: the others are asked about at the next start
            if answer == 1:
                self._keep(journal)
                return
            if answer == 2:
                journal.discard()

    def _continue(self, journal: ChunkJournal) -> None:
        synth = self.ctx.synth
        if synth is None or synth.model_id != journal.plan.model_id:
            where = f" ({journal.plan.model_path})" if journal.plan.model_path else ""
            self.ctx.dialogs.error(self.window, "Cannot continue", f"This text was begun with another model{where}; "
                                   "open that model to continue it (it is asked about again at the next start).")
            self.asked.discard(journal.folder)
            return
        if self.resume is not None:
            self.in_use.add(journal.folder)
            self.resume(journal)

    def _keep(self, journal: ChunkJournal) -> None:
        plan = journal.plan
        made = {i: m.load for i, m in journal.made().items()}

        def join() -> tuple[SynthesisResult, VoiceChoice]:
            request = SynthesisRequest(plan.text, language=plan.language,
                                       options=LongTextOptions(max_chars=plan.max_chars, join=plan.join))
            speech = recording_of_made(request, made, plan.settings.seed or 0)
            if [c.text for c in speech.chunks] != list(plan.chunks):
                raise JournalError("its text no longer splits into the chunks it was made in")
            pieces: list[np.ndarray] = []
            codes: list[np.ndarray] = []

            def audio(ev: ChunkAudio) -> None:
                pieces.append(ev.samples)
                codes.append(ev.result.codes)

            final = run_speech(speech, on_audio=audio)
            result = SynthesisResult(audio=np.concatenate(pieces), codes=np.concatenate(codes), ended_by="eos",
                                     seed=final.seed, timings=replace(final.timings,
                                                                      audio_seconds=final.samples / SAMPLE_RATE))
            try:
                voice = journal.voice()
            except VoiceError:  # the take is kept all the same; it cannot be regenerated in that voice
                voice = None
            return result, voice

        worker = CallWorker(join, "joining the chunks made", self)
        self.in_use.add(journal.folder)
        worker.done.connect(lambda made: self.keep_take and self.keep_take(made[0], plan, made[1],
                                                                           self.taken(journal)))
        worker.failed.connect(lambda message: self._not_joined(journal, message))
        self.ctx.start_job(worker, self.window, needs_model=False)

    def _not_joined(self, journal: ChunkJournal, message: str) -> None:
        self.in_use.discard(journal.folder)
        self.ctx.dialogs.error(self.window, "Cannot keep the chunks made", message)


def _new_folder(parent: Path) -> Path:
    """A new numbered folder, made exclusively (two windows never share one)."""
    numbers = [int(e.name) for e in os.scandir(parent) if e.name.isdigit()]
    n = max(numbers, default=0) + 1
    while True:
        folder = parent / f"{n:06d}"
        try:
            folder.mkdir()
            return folder
        except FileExistsError:
            n += 1
