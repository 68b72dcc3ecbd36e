"""`qwen3tts synth`: one text (or a long text, chunk by chunk into one file) in a cloned voice, a preset speaker
or a designed voice."""

from __future__ import annotations

import argparse
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from engine import (
    DECODER_PRECISIONS,
    DEFAULT_BATCH_SIZE,
    DEFAULT_DECODER_PRECISION,
    DEFAULT_MAX_CHARS,
    FRAME_RATE,
    MAX_BATCH_SIZE,
    SAVE_SUFFIXES,
    ChunkAudio,
    ChunkFrame,
    GuardSettings,
    JoinSettings,
)

from .common import (
    DECODER_PRECISION_HELP,
    THREADS_HELP,
    ProgressBar,
    UsageError,
    add_device_options,
    add_generation_options,
    add_overwrite_option,
    add_sample_format,
    check_output,
    generation_values,
    sample_format,
    save_npy_atomic,
    save_or_rescue,
    say_device,
    text_of,
    tune_if_needed,
)
from .resume import check_chunks_dir, keep_chunk, keep_run_chunk, open_journal, open_run_journal, run_folder
from .transcribe import add_whisper_option, voice_input

if TYPE_CHECKING:
    from engine import AudioFileWriter

TIMBRE_ONLY_NOTE = ("qwen3tts: no --ref-text: cloning the voice's timbre only; the reference's transcript (--ref-text) "
                    "lets the model copy its delivery too.")


def _voice_for(synth, args: argparse.Namespace):
    """The voice of a synth command: --voice FILE or --ref AUDIO [--ref-text TEXT] [--x-vector-only] (Base),
    --speaker NAME (CustomVoice), nothing but --instruct (VoiceDesign); the model's kind decides (voice_for)."""
    from engine import MissingVoiceInput, VoiceNeed, voice_for

    if args.voice is not None and args.ref is not None:
        raise UsageError("give either --voice or --ref, not both")
    if args.voice is not None and args.ref_text is not None:
        raise UsageError("--ref-text goes with --ref; a voice file already holds its transcript")
    given = voice_input(args.ref, args.ref_text, args.voice, args.x_vector_only, args.speaker, args.instruct,
                        args.whisper_model, args.threads)
    if synth.kind.needs == VoiceNeed.REFERENCE and args.ref is not None and args.ref_text is None \
            and not args.x_vector_only:
        print(TIMBRE_ONLY_NOTE, file=sys.stderr)  # as the app does with a voice that has no transcript
    try:
        return voice_for(synth, given)
    except MissingVoiceInput as e:  # the engine says what the kind needs; here, which flag gives it
        raise UsageError(_missing(synth, e.needs)) from None


def _missing(synth, needs) -> str:
    from engine import VoiceNeed

    if needs == VoiceNeed.DESCRIPTION:  # the app refuses it too: without one the voice is anybody's
        return ('This VoiceDesign model makes its voice from a description: add --instruct "A warm, low female '
                'voice, calm and a little husky." (or your own words).')
    if needs == VoiceNeed.SPEAKER:
        return (f"This CustomVoice model needs --speaker NAME; its speakers are: "
                f"{', '.join(s.name for s in synth.kind.speakers)}.")
    return "give the voice to clone: --ref REFERENCE_AUDIO or --voice VOICE_FILE"


def cmd_synth(args: argparse.Namespace) -> int:
    """One request from the arguments, spoken through Synthesizer.speak: a short text is a text of one chunk."""
    with ExitStack() as held:  # a long text's chunk folder stays claimed until the command ends
        return _synth(args, held)


def _synth(args: argparse.Namespace, held: ExitStack) -> int:
    from engine import (
        EngineError,
        GenerationSettings,
        SynthesisRequest,
        Synthesizer,
        clean_text,
        run_speech,
        save_audio,
        write_own_file,
    )

    inputs = (args.ref, args.voice)
    check_output(args.output, SAVE_SUFFIXES, "output", inputs, args.overwrite)
    sample_format(args)  # --float on a non-WAV name is refused before any work
    if args.codes_out is not None:
        check_output(args.codes_out, (".npy",), "--codes-out", (*inputs, args.output), args.overwrite)
    text = clean_text(text_of(args))
    options = _text_options(args)  # checked before the model loads
    synth = Synthesizer(args.model, threads=args.threads, decoder_precision=args.decoder_precision,
                        device=args.device, gpu_precision=args.gpu_precision)
    say_device(synth.device)
    settings = GenerationSettings(
        non_streaming_text=args.non_streaming_text,
        **generation_values(args),
    )
    # cheap checks before the reference is processed
    synth.check_language(args.language)
    synth.check_settings(settings)
    note = synth.kind.instruct_note(args.instruct)
    if note:
        import warnings

        from engine import InstructIgnoredWarning

        print(f"qwen3tts: {note}", file=sys.stderr)
        warnings.simplefilter("ignore", InstructIgnoredWarning)  # said once, here
    synth.kind.check_instruct(args.instruct)
    voice = _voice_for(synth, args)
    journal, made = None, {}
    language = synth.check_language(args.language)
    if args.chunks_dir is not None:  # each chunk kept as it is made; a stopped run's chunks are not made again
        journal, settings, voice, made = open_journal(args.chunks_dir, synth, voice, settings, text, language,
                                                      args.instruct, options, seed_given=args.seed is not None,
                                                      held=held)
    else:  # a long text's chunks kept all the same, in the cache, until the output is written
        folder = run_folder(args, synth.model_id, text, language, settings, options)
        journal, settings, voice, made = open_run_journal(folder, synth, voice, settings, text, language,
                                                          args.instruct, options, seed_given=args.seed is not None,
                                                          held=held)
    kept_in = journal  # removed once the output is written, even when the cache stopped taking chunks
    speech = synth.speak(SynthesisRequest(text, voice, args.language, settings, args.instruct, options),
                         made={i: m.load for i, m in made.items()})
    tune_if_needed(synth, args.threads)  # after speak() has checked the text: bad input fails at once
    bar = ProgressBar("synth")
    subtype = sample_format(args)
    several = len(speech.chunks) > 1

    def frame(ev: ChunkFrame, done: int) -> None:  # the first chunk not yet written (chunks may run side by side)
        f = ev.frame
        within = min((f.index + 1) / max(f.estimated_frames, f.index + 1), 0.99)
        where = f"chunk {ev.chunk + 1} of {ev.chunks}, frame {f.index + 1}" if several else \
            f"frame {f.index + 1} ({(f.index + 1) / FRAME_RATE:.1f} s)"
        bar.update((done + within) / ev.chunks, where)

    codes: list = []  # a long text's chunks one after the other

    def chunk_file(ev: ChunkAudio) -> None:
        nonlocal journal
        if args.codes_out is not None:
            codes.append(ev.result.codes)
        if journal is not None and ev.attempts:  # made in this run (0: read back from the journal)
            if args.chunks_dir is not None:
                keep_chunk(journal, ev)
            elif not keep_run_chunk(journal, ev):  # the cache refused: the run goes on without keeping chunks
                journal = None
        if args.chunks_dir is not None:
            save_audio(args.chunks_dir / f"{ev.chunk + 1:04d}.wav", ev.result.audio, subtype=subtype)

    with RecordingFile(args.output, subtype) as recording:
        try:
            result = run_speech(
                speech, on_frame=frame, on_samples=recording.write, on_audio=chunk_file,
                on_skipped=lambda ev: bar.done(ev.message) if several else None,  # one chunk: its error says it
                on_retry=lambda ev: bar.done(f"Chunk {ev.chunk + 1} of {ev.chunks}: {ev.reason}; trying again "
                                             f"with seed {ev.seed}."))
        except (KeyboardInterrupt, EngineError):
            if journal is not None:
                print(f"qwen3tts: the chunks made so far are kept in {journal.folder}; the same command "
                      "continues there.", file=sys.stderr)
            raise
        # the codes first: if the audio then fails, remove them again so nothing is left behind
        if args.codes_out is not None:
            save_npy_atomic(args.codes_out, np.concatenate(codes))
        try:
            recording.commit()
        except BaseException:
            if args.codes_out is not None:
                args.codes_out.unlink(missing_ok=True)
            raise
    if args.chunks_dir is not None:
        listing = "".join(f"{i + 1:04d}\t{c.text}\n" for i, c in enumerate(speech.chunks))
        write_own_file(args.chunks_dir / "chunks.tsv", listing.encode())  # the app's listing, never through a link
    # complete: the journal goes (in --chunks-dir a left-out chunk's is kept: it is tried again next run there)
    if kept_in is not None and (args.chunks_dir is None or not result.skipped):
        kept_in.discard()
    t = result.timings
    counted = f", {result.chunks - len(result.skipped)} of {result.chunks} chunks" if several else ""
    bar.done(f"wrote {args.output} ({result.seconds:.2f} s, {result.frames} frames{counted}, ended by "
             f"{result.ended_by}, seed {result.seed}, {t.total:.1f} s, RTF {t.rtf:.2f})")
    return 1 if result.skipped else 0


class RecordingFile:
    """Where the recording goes as its samples arrive: held while it is one piece (a late failure to save it
    keeps it elsewhere, save_or_rescue), streamed into the file from its second piece on (memory stays at a
    chunk however long the text)."""

    def __init__(self, path: Path, subtype: str | None):
        self.path, self.subtype = path, subtype
        self.pieces: list = []
        self.writer: AudioFileWriter | None = None

    def write(self, piece) -> None:
        from engine import AudioFileWriter

        if self.writer is None and not self.pieces:
            self.pieces.append(piece.samples)
            return
        if self.writer is None:
            self.writer = AudioFileWriter(self.path, subtype=self.subtype)
            for held in self.pieces:
                self.writer.write(held)
            self.pieces = []
        self.writer.write(piece.samples)

    def commit(self) -> None:
        from engine import save_audio

        if self.writer is not None:
            self.writer.commit()
        else:
            audio = self.pieces[0] if self.pieces else None
            save_or_rescue(self.path, lambda p: save_audio(p, audio, subtype=self.subtype))

    def __enter__(self) -> RecordingFile:
        return self

    def __exit__(self, *exc) -> None:
        if self.writer is not None:
            self.writer.abort()  # after commit() there is nothing left to remove


def _text_options(args: argparse.Namespace):
    """How the text is split, joined and guarded (and --chunks-dir), checked before any work."""
    from engine import GuardSettings, JoinSettings, LongTextOptions, check_batch_size

    options = LongTextOptions(
        max_chars=args.max_chars,
        join=JoinSettings(sentence_pause=args.sentence_pause, paragraph_pause=args.paragraph_pause),
        guard=GuardSettings(retries=args.retries),
        batch_size=args.batch_size,
    )
    options.join.check()
    options.guard.check()
    if args.batch_size is not None:
        check_batch_size(args.batch_size)
    if args.chunks_dir is not None:
        check_chunks_dir(args.chunks_dir)
    return options


def add_parser(sub) -> None:
    s = sub.add_parser("synth", help="speak text in a cloned voice")
    s.add_argument("--model", type=Path, required=True, help="bundle folder")
    s.add_argument("--text")
    s.add_argument("--text-file", type=Path, help="a UTF-8 text file (any length) instead of --text")
    s.add_argument("-o", "--output", type=Path, required=True, help=f"output audio file ({', '.join(SAVE_SUFFIXES)})")
    add_overwrite_option(s)
    s.add_argument("--ref", type=Path, help="reference audio of the voice to clone")
    s.add_argument("--ref-text", help="transcript of the reference: in-context cloning, a closer copy (without it: the voice's "
                        "timbre only, as in the app); 'auto': transcribe the reference with a Whisper model")
    add_whisper_option(s)
    s.add_argument("--x-vector-only", action="store_true", help="ignore --ref-text; clone the timbre only (x-vector)")
    s.add_argument("--voice", type=Path, help="a saved voice file instead of --ref")
    s.add_argument("--language", default="auto")
    add_generation_options(s)
    mode = s.add_mutually_exclusive_group()
    mode.add_argument("--non-streaming-text", dest="non_streaming_text", action="store_true", default=None,
                      help="put the whole text in the prompt (default for CustomVoice and VoiceDesign models)")
    mode.add_argument("--streaming-text", dest="non_streaming_text", action="store_false",
                      help="feed the text one token per frame (default for Base models)")
    s.add_argument("--speaker", help="a preset speaker of a CustomVoice model (see 'qwen3tts speakers')")
    s.add_argument("--instruct", help="a style instruction (CustomVoice 1.7B) or the voice description "
                                      "(VoiceDesign)")
    s.add_argument("--codes-out", type=Path, help="also write the generated codes (frames x 16) as .npy (a long "
                                                  "text's chunks one after the other)")
    add_sample_format(s)
    s.add_argument("--threads", type=int, default=None, help=THREADS_HELP)
    add_device_options(s)
    s.add_argument("--decoder-precision", choices=DECODER_PRECISIONS, default=DEFAULT_DECODER_PRECISION,
                   help=DECODER_PRECISION_HELP)
    lt = s.add_argument_group("long text (split into chunks of whole sentences, joined into one file)")
    lt.add_argument("--max-chars", type=int, default=DEFAULT_MAX_CHARS,
                    help=f"longest chunk in characters (default {DEFAULT_MAX_CHARS})")
    lt.add_argument("--sentence-pause", type=float, default=JoinSettings.sentence_pause,
                    help=f"seconds between chunks of a paragraph (default {JoinSettings.sentence_pause})")
    lt.add_argument("--paragraph-pause", type=float, default=JoinSettings.paragraph_pause,
                    help=f"seconds after a paragraph (default {JoinSettings.paragraph_pause})")
    lt.add_argument("--retries", type=int, default=GuardSettings.retries,
                    help="new seeds for a chunk that runs away, loops or goes silent "
                         f"(default {GuardSettings.retries})")
    lt.add_argument("--chunks-dir", type=Path,
                    help="keep each chunk here as it is made, with a WAV file of each (a new or empty folder); if "
                         "the run stops (Ctrl+C, a crash, a kill), the same command with the same folder continues "
                         "where it stopped. Without it a long text's chunks are kept in the cache folder until the "
                         "output is written: the same command continues there too")
    lt.add_argument("--batch-size", type=int, default=None,
                    help=f"chunks generated side by side, each exactly as alone (1 to {MAX_BATCH_SIZE}; default: "
                         f"{DEFAULT_BATCH_SIZE} on q8 models, whose steps serve several chunks at once, 1 on fp32/fp16 "
                         "models, where chunks take turns; 1 gives the first chunk soonest)")
    s.set_defaults(func=cmd_synth)
