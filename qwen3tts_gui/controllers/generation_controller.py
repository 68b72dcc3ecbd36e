"""Generating one take from the Studio tab: what the voice column holds for the model kind (a cloned voice, a
preset speaker and its instruction, or a description to design a voice from), a short or a long text's worker,
its frames and audio into the progress and output panels, and the finished take into the history."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtWidgets import QPlainTextEdit, QWidget

from ..context import AppContext
from ..data.saved_text import too_long
from ..data.takes import PendingTake, Take
from ..engine_adapter import (
    ChunkJournal,
    ChunkPlan,
    EngineError,
    FrameEvent,
    GenerationSettings,
    MissingVoiceInput,
    SynthesisRequest,
    SynthesisResult,
    SynthesizerContract,
    Voice,
    VoiceChoice,
    VoiceError,
    VoiceInput,
    VoiceNeed,
    as_sentence,
    kind_of,
    runs_on,
    voice_for,
)
from ..widgets.design_panel import DesignPanel
from ..widgets.language_combo import LanguageCombo
from ..widgets.output_panel import OutputPanel
from ..widgets.progress_panel import ProgressPanel
from ..widgets.settings_box import GenerationSettingsBox
from ..widgets.speaker_panel import SpeakerPanel
from ..widgets.voice_panel import VoicePanel
from ..workers import SynthesisWorker, text_options
from .take_history import TakeHistory
from .unfinished import Unfinished

# what the window says when the voice column lacks what the model's kind needs (MissingVoiceInput.needs)
MISSING = {VoiceNeed.SPEAKER: ("No speaker", "Choose one of the model's speakers first."),
           VoiceNeed.DESCRIPTION: ("No description", "Describe the voice to design first.")}
UNFINISHED = "unfinished"  # beside the take history: long texts being made, chunk by chunk (unfinished.py)


class GenerationController(QObject):
    """`window` is the parent of its dialogs; `status` carries a status-line message and how long it shows (ms;
    0: until the next one, "": clear)."""

    status = Signal(str, int)

    def __init__(self, ctx: AppContext, window: QWidget, history: TakeHistory, *, text_edit: QPlainTextEdit,
                 lang_combo: LanguageCombo, settings_box: GenerationSettingsBox, voice_panel: VoicePanel,
                 speaker_panel: SpeakerPanel, design_panel: DesignPanel, progress: ProgressPanel,
                 output: OutputPanel):
        super().__init__(window)
        self.ctx = ctx
        self.window = window
        self.history = history
        self.text_edit = text_edit
        self.lang_combo = lang_combo
        self.settings_box = settings_box
        self.voice_panel = voice_panel
        self.speaker_panel = speaker_panel
        self.design_panel = design_panel
        self.progress = progress
        self.output = output
        self.pending: PendingTake | None = None  # the take being generated
        self.journal: ChunkJournal | None = None  # where its chunks are kept as they are made (a long text)
        output.regenerate.connect(self.regenerate)
        design_panel.preview_requested.connect(self.preview_design)
        self.unfinished = Unfinished(ctx, window, history.store.folder.parent / UNFINISHED)
        self.unfinished.resume = self.resume
        self.unfinished.keep_take = self._keep_made
        self.unfinished.status.connect(self.status)
        # asked once a model is open and nothing runs (opening it is a job of its own)
        for signal in (ctx.model_changed, ctx.busy_changed):
            signal.connect(lambda *_: QTimer.singleShot(0, self.unfinished.offer))

    @property
    def worker(self) -> SynthesisWorker | None:
        """The generation running now (the engine job, when it is one)."""
        job = self.ctx.job
        return job if isinstance(job, SynthesisWorker) else None

    def generate(self, text: str | None = None, voice: VoiceChoice = None, voice_name: str | None = None,
                 language: str | None = None, settings: GenerationSettings | None = None,
                 instruct: str | None = None, design: bool = False, resume: ChunkJournal | None = None) -> bool:
        """voice and instruct None: what the voice column holds (a voice, a speaker and its instruction, or the
        description of a voice to design). resume: an unfinished text's journal, continued where it stopped."""
        if not self.ctx.can_start(self.window):
            return False
        text = (text if text is not None else self.text_edit.toPlainText()).strip()
        if not text:
            self.ctx.dialogs.error(self.window, "No text", "Type the text to speak first.")
            self.text_edit.setFocus()
            return False
        problem = too_long(text)  # refused before anything reads it (a 5 MB text used 2.77 GB before the engine said no)
        if problem:
            self.ctx.dialogs.error(self.window, "Text too long", problem)
            return False
        synth = self.ctx.synth
        assert synth is not None  # can_start refuses without a model
        if voice is None and instruct is None:
            # a voice made again for this model first: the generation then goes on by itself (no second press)
            again = (text, None, voice_name, language, settings, None, design)
            chosen = self._voice_column(synth, lambda: self.generate(*again))
            if chosen is None:
                return False
            voice, voice_name, instruct = chosen
        language = language or self.lang_combo.language()
        settings = settings or self.settings_box.generation_settings()
        voice_name = str(voice_name or getattr(voice, "name", str(voice)))
        request = SynthesisRequest(text, voice, language, settings, instruct or None, text_options(self.ctx.settings))
        journal = None
        if resume is not None:  # split and joined as when it began
            journal = resume
            request = replace(request, options=replace(request.options, max_chars=resume.plan.max_chars,
                                                       join=resume.plan.join))
        elif not design and _several_chunks(request):  # kept on disk chunk by chunk as it is made
            journal, settings = self.unfinished.begin(synth, text, voice, voice_name, language, settings,
                                                      instruct, request.options)
            request = replace(request, settings=settings)
        worker = SynthesisWorker(synth, request, self, journal=journal)
        worker.part.connect(self._on_part)
        worker.length.connect(self.output.expect_samples)  # the whole text's, from its first event
        worker.notice.connect(lambda message: self.status.emit(message, 8000))
        worker.waiting.connect(lambda: self.status.emit("Waiting: another app's speech is being generated…", 0))
        worker.left_out.connect(self._on_left_out)
        worker.frame.connect(self._on_frame)
        worker.chunk.connect(self.output.add_chunk)
        worker.done.connect(self._on_result)
        worker.failed.connect(self._on_failed)
        worker.cancelled.connect(self._on_cancelled)
        self.journal = journal
        self.pending = PendingTake(text, voice, voice_name, language, settings, instruct=instruct, design=design,
                                   device=runs_on(synth.device))
        self.progress.begin()
        self.output.begin_stream(0)
        self.status.emit("Generating…", 0)
        if self.ctx.start_job(worker, self.window, finished=self._synth_finished):
            return True
        if resume is None:
            self.unfinished.stopped(journal)  # nothing made: it goes
        self.journal = None
        return False

    def _kept_voice(self, voice: VoiceChoice) -> VoiceChoice:
        """A kept take's or an unfinished text's voice, made ready for the open model by the engine's voice_for, as
        the voice column's is: a cloned voice fitted to it, a speaker's name checked against its speakers. Raises
        VoiceError in the kind's words; None (a designed take's) stays None."""
        synth = self.ctx.synth
        if voice is None or synth is None:  # without a model nothing starts (can_start says so)
            return voice
        return voice_for(synth, VoiceInput(voice=voice) if isinstance(voice, Voice) else VoiceInput(speaker=voice))

    def _voice_column(self, synth: SynthesizerContract, again: Callable[[], object]
                      ) -> tuple[VoiceChoice, str, str | None] | None:
        """What the voice column holds for the model's kind, made into its voice by the engine's voice_for: (the
        voice, its name for the take, the instruction sent with it); None once a dialog has said what is missing."""
        needs = synth.kind.needs
        if needs == VoiceNeed.SPEAKER:
            given = VoiceInput(speaker=self.speaker_panel.selected_speaker())
            name, instruct = self.speaker_panel.selected_name(), self.speaker_panel.instruct()
        elif needs == VoiceNeed.DESCRIPTION:
            instruct = self.design_panel.describe()
            given, name = VoiceInput(description=instruct), self.design_panel.selected_name()
        else:
            saved = self.voice_panel.load_selected(then=again)  # None: it said why, or is making it again
            if saved is None:
                return None
            given, name, instruct = VoiceInput(voice=saved), self.voice_panel.selected_name(), None
        try:
            return voice_for(synth, given), name, instruct
        except MissingVoiceInput as e:
            title, message = MISSING.get(e.needs, ("No voice", as_sentence(str(e))))
            self.ctx.dialogs.error(self.window, title, message)
            if e.needs == VoiceNeed.DESCRIPTION:
                self.design_panel.description.setFocus()
        except VoiceError as e:
            self.ctx.dialogs.error(self.window, "Cannot use this voice", as_sentence(str(e)))
        return None

    def resume(self, journal: ChunkJournal) -> None:
        """Continue an unfinished text where it stopped: its voice, settings and seed, its chunks made before."""
        plan = journal.plan
        try:
            voice = self._kept_voice(journal.voice())
        except VoiceError as e:
            self.unfinished.stopped(journal)
            self.ctx.dialogs.error(self.window, "Cannot continue", as_sentence(str(e)))
            return
        if not self.generate(plan.text, voice, plan.voice_name, plan.language, plan.settings,
                             instruct=plan.instruct, resume=journal):
            self.unfinished.stopped(journal)

    def _keep_made(self, result: SynthesisResult, plan: ChunkPlan, voice: VoiceChoice,
                   after: Callable[[], None]) -> None:
        """An unfinished text's chunks made before it stopped, joined: a take of its own."""
        take = Take(self.history.next_number(), plan.text, plan.voice_name, voice, plan.language, plan.settings,
                    result, instruct=plan.instruct)
        self.output.add_take(take)
        self.history.keep(take, after)
        self.status.emit(f"Kept {result.seconds:.1f} s of speech made before the stop as take #{take.number}", 8000)

    def regenerate(self, take: Take) -> None:
        try:
            voice = self._kept_voice(take.ready_voice())
        except VoiceError as e:  # a kept take's voice file, damaged since, or a voice the open model cannot use
            self.ctx.dialogs.error(self.window, "Cannot regenerate", as_sentence(str(e)))
            return
        self.generate(take.text, voice, take.voice_name, take.language, take.with_new_seed(),
                      instruct=take.instruct, design=voice is None and kind_of(self.ctx.synth).needs == VoiceNeed.DESCRIPTION)

    def preview_design(self, regenerate: bool) -> None:
        """VoiceDesign: speak the preview sentence in a voice made from the description (regenerate: new seed)."""
        settings = self.settings_box.generation_settings()
        if regenerate:  # another voice from the same description: sample with a fresh seed
            settings.seed, settings.greedy = None, False
        description = self.design_panel.describe()
        if not description:
            self.ctx.dialogs.error(self.window, "No description", "Describe the voice to design first.")
            return
        self.generate(self.design_panel.preview_sentence(), None, self.design_panel.selected_name(),
                      settings=settings, instruct=description, design=True)

    def _on_part(self, chunk: int, chunks: int) -> None:
        if chunks > 1:  # a text of one chunk shows its frames alone
            self.progress.set_part(chunk, chunks)

    def _on_frame(self, ev: FrameEvent) -> None:
        self.progress.on_frame(ev)

    def _on_result(self, result: SynthesisResult) -> None:
        pending = self.pending
        if pending is None:
            return
        take = pending.take(self.history.next_number(), result)
        if pending.design:
            self.design_panel.designed(take, pending.instruct or "")
        self.progress.finish(result, time.monotonic() - pending.started)
        self.output.end_stream(take)
        # the journal goes once the take is on disk (on the writer's thread, even as the app closes)
        self.history.keep(take, self.unfinished.taken(self.journal))
        self.journal = None
        self.status.emit(f"Generated {result.seconds:.1f} s of speech", 5000)

    def _on_left_out(self, messages: list[str]) -> None:
        self.ctx.dialogs.info(self.window, "Parts left out",
                              "The take is complete except for these parts, which ran away on every try:\n\n"
                              + "\n".join(messages))

    def _on_failed(self, message: str) -> None:
        self.progress.stop("Failed")
        self.output.end_stream(None)
        kept = self.unfinished.stopped(self.journal)
        self.journal = None
        self.status.emit(kept or "", 0)
        self.ctx.dialogs.error(self.window, "Cannot generate", message + (f"\n\n{kept}" if kept else ""))

    def _on_cancelled(self) -> None:
        self.progress.stop(f"Cancelled after {self.progress.frames} frames")
        self.output.end_stream(None)
        kept = self.unfinished.stopped(self.journal)
        self.journal = None
        self.status.emit(f"Cancelled. {kept}" if kept else "Cancelled", 8000 if kept else 3000)

    def _synth_finished(self) -> None:
        self.pending = None



def _several_chunks(request: SynthesisRequest) -> bool:
    """Whether the request's text is spoken in several chunks (then worth a journal); bad input is left for the
    engine to report in its own words."""
    try:
        return len(request.chunks()) > 1
    except EngineError:
        return False
