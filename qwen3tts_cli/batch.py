"""`qwen3tts batch`: many lines from a JSONL jobs file (batch_jobs.py reads it), one SynthesisRequest each, all
through Synthesizer.speak_many (lines of one chunk several at a time through each model step, longer ones chunked
as `synth` speaks them), one status line per job."""

from __future__ import annotations

import argparse
import os
from dataclasses import replace
from pathlib import Path

import numpy as np

from engine import (
    DECODER_PRECISIONS,
    DEFAULT_BATCH_SIZE,
    DEFAULT_DECODER_PRECISION,
    MAX_BATCH_SIZE,
    EngineError,
    VoiceChoice,
    as_sentence,
    regular_file_problem,
)

from .common import (
    DECODER_PRECISION_HELP,
    THREADS_HELP,
    UsageError,
    add_device_options,
    add_generation_options,
    generation_values,
    save_npy_atomic,
    say_device,
    tune_if_needed,
)
from .transcribe import add_whisper_option, voice_input


def cmd_batch(args: argparse.Namespace) -> int:
    """Many jobs from a JSONL file, several at a time through each model step; one status line per job."""
    from engine import (
        GenerationSettings,
        LongResult,
        SynthesisRequest,
        SynthesisResult,
        Synthesizer,
        check_batch_size,
        run_speeches,
    )

    from .batch_jobs import read_jobs

    if args.batch_size is not None:
        check_batch_size(args.batch_size)
    problem = regular_file_problem(args.jobs, "jobs file")  # a FIFO, a folder: said as it is
    if problem:
        raise UsageError(problem)
    out = args.out_dir
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out-dir {out} is a file, not a folder.")
    if not (out.parent if str(out.parent) else Path(".")).is_dir():
        raise UsageError(f"Cannot make --out-dir {out}: its parent folder does not exist.")
    lines = read_jobs(args.jobs)
    if not lines:
        raise UsageError(f"The jobs file {args.jobs} has no jobs.")
    synth = Synthesizer(args.model, threads=args.threads, decoder_precision=args.decoder_precision,
                        device=args.device, gpu_precision=args.gpu_precision)
    say_device(synth.device)
    settings = GenerationSettings(**generation_values(args))  # every job's, but what its line gives itself
    synth.check_settings(settings)
    tune_if_needed(synth, args.threads)
    out.mkdir(exist_ok=True)
    failed = 0

    def fail(line, message: str) -> None:
        nonlocal failed
        failed += 1
        print(f"failed  {line.name}: {message}", flush=True)

    voices: dict[tuple, VoiceChoice] = {}
    requests, owners = [], []
    for line in lines:
        if line.error is not None:
            fail(line, line.error)
            continue
        try:
            targets = [out / f"{line.name}.wav"] + ([out / f"{line.name}.codes.npy"] if args.codes else [])
            taken = [t for t in targets if os.path.lexists(t)]
            if taken and not args.overwrite:
                raise UsageError(f"{taken[0]} already exists; add --overwrite to replace it.")
            key = (line.ref, line.ref_text, line.voice, line.x_vector_only, line.speaker,
                   bool((line.instruct or "").strip()))
            if key not in voices:
                voices[key] = _job_voice(synth, line, args)
            synth.kind.check_instruct(line.instruct)
            own = replace(settings, **line.settings)
            requests.append(SynthesisRequest(line.text, voices[key], line.language, own, line.instruct))
            owners.append(line)
        except EngineError as e:
            fail(line, f"Line {line.line}: {as_sentence(str(e))}")
    samples: dict[int, list[np.ndarray]] = {}
    codes: dict[int, list[np.ndarray]] = {}
    skipped: dict[int, list[str]] = {}

    def done(i: int, result: LongResult) -> None:
        line = owners[i]
        made = SynthesisResult(audio=np.concatenate(samples.pop(i)), codes=np.concatenate(codes.pop(i)),
                               ended_by=result.ended_by, seed=result.seed, timings=result.timings)
        try:
            wav = _write_result(out, line.name, made, args.codes, args.overwrite)
        except (EngineError, OSError) as e:
            fail(line, f"Line {line.line}: {as_sentence(str(e))}")
            return
        moved = "" if wav.stem == line.name else f" ({line.name}.wav appeared during the run and was left alone)"
        if skipped.get(i):  # what was made is kept, but a line with holes is not a finished line
            fail(line, f"Line {line.line}: wrote {wav}{moved} without some parts. {' '.join(skipped[i])}")
            return
        chunks = f", {result.chunks} chunks" if result.chunks > 1 else ""
        print(f"ok      {line.name}: wrote {wav}{moved} ({result.seconds:.2f} s, {result.frames} frames{chunks}, "
              f"ended by {result.ended_by}, seed {result.seed})", flush=True)

    def failed_line(i: int, error: EngineError) -> None:
        samples.pop(i, None)
        codes.pop(i, None)
        fail(owners[i], f"Line {owners[i].line}: {as_sentence(str(error))}")

    # longest first: the whole file is done sooner (short jobs fill the slots at the end)
    run_speeches(synth.speak_many(requests, batch_size=args.batch_size, longest_first=True),
                 on_samples=lambda i, chunk: samples.setdefault(i, []).append(chunk.samples),
                 on_audio=lambda i, ev: codes.setdefault(i, []).append(ev.result.codes),
                 on_skipped=lambda i, ev: skipped.setdefault(i, []).append(ev.message),
                 on_done=done, on_failed=failed_line)
    return 1 if failed else 0


def _write_result(out: Path, name: str, result, codes: bool, overwrite: bool = False) -> Path:
    """NAME.wav (and NAME.codes.npy), each name claimed at the moment of writing: a file that appeared in the
    folder during the run is never replaced; the result then goes to 'NAME (2).wav'... With overwrite, NAME.wav
    is replaced atomically (the old file stays whole until the new one is complete). Returns the wav path."""
    from engine import save_audio

    if overwrite:
        wav = out / f"{name}.wav"
        if codes:
            save_npy_atomic(out / f"{name}.codes.npy", result.codes)
        return save_audio(wav, result.audio)
    for n in range(1, 10_000):
        stem = name if n == 1 else f"{name} ({n})"
        wav, npy = out / f"{stem}.wav", out / f"{stem}.codes.npy"
        if os.path.lexists(wav) or (codes and os.path.lexists(npy)):
            continue
        try:
            if codes:
                save_npy_atomic(npy, result.codes, exclusive=True)
        except FileExistsError:
            continue
        try:
            return save_audio(wav, result.audio, exclusive=True)  # 16-bit PCM, as `synth` and the app write
        except FileExistsError:
            if codes:
                npy.unlink(missing_ok=True)  # ours, written a moment ago
    raise UsageError(f"no free name for {name}.wav in {out}")


def _job_voice(synth, line, args):
    """The voice of one jobs-file line (see batch_jobs.py): the model's kind decides (voice_for); "ref_text":
    "auto" transcribes the reference (once per reference: voices are kept by their line's reference and text)."""
    from engine import MissingVoiceInput, VoiceNeed, voice_for

    given = voice_input(line.ref, line.ref_text, line.voice, line.x_vector_only, line.speaker, line.instruct,
                        args.whisper_model, args.threads)
    try:
        return voice_for(synth, given)
    except MissingVoiceInput as e:
        if e.needs == VoiceNeed.DESCRIPTION:
            raise UsageError('this VoiceDesign model makes its voice from a description: give the line an '
                             '"instruct" describing the voice.') from None
        raise


def add_parser(sub) -> None:
    bt = sub.add_parser("batch", help="speak many lines from a JSONL jobs file, several at a time")
    bt.add_argument("--model", type=Path, required=True, help="bundle folder")
    bt.add_argument("--jobs", type=Path, required=True,
                    help='one JSON object per line: {"name", "text", "language", "ref", "ref_text"} '
                         '("x_vector_only": true instead of ref_text, "voice" instead of ref; optional '
                         'any generation setting by its name, e.g. "max_frames", "seed", "temperature"); relative paths are relative to the jobs file; "ref_text": "auto" '
                         'transcribes the reference with a Whisper model')
    add_whisper_option(bt)
    bt.add_argument("--out-dir", type=Path, required=True, help="folder for NAME.wav (made if missing)")
    bt.add_argument("--batch-size", type=int, default=None,
                    help=f"sequences sharing each model step (1-{MAX_BATCH_SIZE}; default {DEFAULT_BATCH_SIZE} on q8 "
                         "models, 1 on fp32/fp16 models, where sequences take turns); results do not depend on it")
    add_generation_options(bt)  # every job's settings; a line's own win
    bt.add_argument("--codes", action="store_true", help="also write NAME.codes.npy (frames x 16 int64)")
    bt.add_argument("--overwrite", action="store_true",
                    help="replace NAME.wav (and NAME.codes.npy) where they exist (default: such a job fails and the "
                         "file is kept)")
    bt.add_argument("--threads", type=int, default=None, help=THREADS_HELP)
    add_device_options(bt)
    bt.add_argument("--decoder-precision", choices=DECODER_PRECISIONS, default=DEFAULT_DECODER_PRECISION,
                    help=DECODER_PRECISION_HELP)
    bt.set_defaults(func=cmd_batch)
