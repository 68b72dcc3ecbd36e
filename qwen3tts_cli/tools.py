"""The smaller commands: convert a checkpoint, list a model's speakers, decode codes to audio, make a voice
file, make the demo model, and show how a text is split into chunks."""

from __future__ import annotations

import argparse
import io
import sys
import time
from pathlib import Path

from engine import (
    DECODER_PRECISIONS,
    DEFAULT_DECODER_PRECISION,
    DEFAULT_MAX_CHARS,
    OFFERED_PRECISIONS,
    SAVE_SUFFIXES,
    physical_cores,
)
from engine.store import DEFAULT_PRECISION

from .common import (
    DECODER_PRECISION_HELP,
    THREADS_HELP,
    ProgressBar,
    add_device_options,
    add_overwrite_option,
    add_sample_format,
    check_output,
    sample_format,
    say_device,
    text_of,
)
from .transcribe import AUTO, add_whisper_option, auto_ref_text


def cmd_convert(args: argparse.Namespace) -> int:
    from engine import convert_checkpoint, is_whisper_checkpoint

    if args.precision is None:
        args.precision = "fp32" if is_whisper_checkpoint(args.src) else DEFAULT_PRECISION
    bar = ProgressBar("convert")
    t0 = time.monotonic()
    out = convert_checkpoint(args.src, args.dest, precision=args.precision, progress=bar.update,
                             overwrite=args.force)
    bar.done(f"wrote {out} ({args.precision}) in {time.monotonic() - t0:.1f} s")
    say_q8_check(out)
    return 0


def say_q8_check(bundle_dir) -> None:
    """The 8-bit check's outcome of a bundle just made: its figures, its time, each Linear kept float and what it
    costs, or the one line saying why the bundle is float."""
    from engine import Bundle, CheckRecordError, read_check_record

    try:
        record = read_check_record(Bundle.open(bundle_dir).manifest)
    except CheckRecordError:
        return
    if record is None:
        return
    if record.outcome == "float":
        print(f"qwen3tts: 8-bit did not get within KL {record.bound:.0e} on these weights ({record.reason}); "
              "the bundle is fp32", file=sys.stderr)
        return
    print(f"8-bit check ({record.seconds:.0f} s): {record.summary()}", file=sys.stderr)
    for layer in record.promoted:
        print(f"  kept float: {layer.name} (8-bit alone: KL {layer.kl_alone:.1e}; "
              f"+{layer.extra_bytes_per_frame / 1e6:.1f} MB read per frame)", file=sys.stderr)


def cmd_speakers(args: argparse.Namespace) -> int:
    """One line per speaker: name, dialect; then the languages. Reads the bundle's tables only."""
    from engine import ModelKind, VoiceNeed

    kind = ModelKind.of_bundle(args.model)
    if kind.needs != VoiceNeed.SPEAKER:
        kind.speaker("")  # raises the kind's own explanation
    width = max(len(s.name) for s in kind.speakers) + 2
    for s in kind.speakers:
        print(f"{s.name:<{width}}{s.dialect_name} (for chinese and auto)" if s.dialect else s.name)
    instruct = "follows --instruct" if kind.honours_instruct else "ignores --instruct (0.6B)"
    print(f"CustomVoice model, {instruct}; languages: {', '.join(kind.languages)}", file=sys.stderr)
    return 0


def cmd_decode(args: argparse.Namespace) -> int:
    from engine import SAMPLE_RATE, decode_codes, save_audio

    check_output(args.output, SAVE_SUFFIXES, "output", (args.codes,), args.overwrite)
    sample_format(args)
    codes = _read_codes(args.codes)
    t0 = time.monotonic()
    wav = decode_codes(args.model, codes, threads=args.threads, precision=args.decoder_precision,
                       device=args.device, gpu_precision=args.gpu_precision)
    elapsed = time.monotonic() - t0
    save_audio(args.output, wav, SAMPLE_RATE, subtype=sample_format(args))
    seconds = len(wav) / SAMPLE_RATE
    print(f"wrote {args.output} ({len(codes)} frames, {seconds:.2f} s of audio) in {elapsed:.1f} s", file=sys.stderr)
    return 0


MAX_CODES_BYTES = 256 * 1024 * 1024  # hours of frames; a header claiming more is refused before allocating


def _read_codes(path: Path):
    """A (frames, 16) codes array from .npy, or from an .npz holding 'codes', sizes checked before loading."""
    import zipfile

    from engine import CodesError, load_npy_bytes, load_npy_file, regular_file_problem

    problem = regular_file_problem(path, "codes file")
    if problem:
        raise CodesError(problem)
    try:
        if not zipfile.is_zipfile(path):
            return load_npy_file(path, MAX_CODES_BYTES)
        with zipfile.ZipFile(path) as z:  # an .npz holding a 'codes' array is fine too
            names = [n[:-4] for n in z.namelist() if n.endswith(".npy")]
            if "codes" not in names:
                raise CodesError(f"{path} has no 'codes' array (it has: {', '.join(names)})")
            if z.getinfo("codes.npy").file_size > MAX_CODES_BYTES:
                raise ValueError(f"its codes unpack to more than the {MAX_CODES_BYTES} bytes this app reads")
            return load_npy_bytes(z.read("codes.npy"))
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        first = (str(e).splitlines() or [type(e).__name__])[0]
        raise CodesError(f"cannot read codes from {path}: {first}") from None


def cmd_demo_model(args: argparse.Namespace) -> int:
    from engine import make_demo_bundle

    bar = ProgressBar("demo-model")
    t0 = time.monotonic()
    out = make_demo_bundle(args.dest, progress=bar.update, kind=args.kind)
    kind = "" if args.kind == "base" else f" {args.kind}"
    bar.done(f"wrote {out} in {time.monotonic() - t0:.1f} s: a tiny random-weight{kind} model (it speaks noise)")
    return 0


def cmd_split(args: argparse.Namespace) -> int:
    """The chunks a long synthesis would speak, one per line on stdout (nothing else there)."""
    from engine import clean_text, split_text

    text = clean_text(text_of(args))
    chunks = split_text(text, max_chars=args.max_chars, language=args.language)
    try:  # UTF-8 whatever the console or pipe would pick (an ASCII or cp1252 stdout cannot hold most scripts)
        if isinstance(sys.stdout, io.TextIOWrapper):
            sys.stdout.reconfigure(encoding="utf-8")
    except (ValueError, OSError):
        pass
    for chunk in chunks:
        sys.stdout.write(chunk.text + "\n")
    sys.stdout.flush()
    return 0


def cmd_voice_create(args: argparse.Namespace) -> int:
    from engine import VOICE_SUFFIX, Synthesizer

    out = args.output
    check_output(out, (VOICE_SUFFIX,), "output", (args.ref,), args.overwrite)
    ref_text, language = args.ref_text, args.language
    if ref_text == AUTO:
        ref_text, heard = auto_ref_text(args.ref, args.whisper_model, args.threads)
    synth = Synthesizer(args.model, threads=args.threads, device=args.device, gpu_precision=args.gpu_precision)
    say_device(synth.device)
    if args.ref_text == AUTO and language == "auto" and heard in synth.languages:
        language = heard  # the language the recogniser heard, where the model speaks it
    voice = synth.create_voice(str(args.ref), ref_text=ref_text, name=args.name, language=language)
    voice.save(out)
    codes = voice.ref_codes if voice.icl else None
    mode = f"in-context, {codes.shape[0]} reference frames" if codes is not None else "x-vector only"
    print(f"wrote {out} ({mode})", file=sys.stderr)
    return 0


def add_convert_parser(sub) -> None:
    c = sub.add_parser("convert", help="convert a Hugging Face checkpoint folder into a model bundle")
    c.add_argument("src", type=Path, help="checkpoint folder (config.json, model.safetensors, speech_tokenizer/)")
    c.add_argument("dest", type=Path, help="bundle folder to create")
    c.add_argument("--precision", choices=OFFERED_PRECISIONS, default=None,
                   help="q8 (default): 8-bit talker weights with outlier smoothing, smallest and fastest, output "
                        "very close to the exact one; fp16: the exact output from bf16 checkpoints in less disk; "
                        "fp32: exact (docs/performance.md: 8-bit accuracy). A Whisper checkpoint (recognised by its "
                        "config) converts to fp32 (default, weights kept fp16 where that is exact) or fp16")
    c.add_argument("--force", action="store_true", help="replace an existing bundle at DEST")
    c.set_defaults(func=cmd_convert)


def add_tool_parsers(sub) -> None:
    d = sub.add_parser("decode", help="decode codec ids (frames x 16 .npy) to 24 kHz audio")
    d.add_argument("--model", type=Path, required=True)
    d.add_argument("--codes", type=Path, required=True)
    d.add_argument("-o", "--output", type=Path, required=True)
    add_overwrite_option(d)
    add_sample_format(d)
    d.add_argument("--threads", type=int, default=physical_cores(), help=THREADS_HELP)
    add_device_options(d)
    d.add_argument("--decoder-precision", choices=DECODER_PRECISIONS, default=DEFAULT_DECODER_PRECISION,
                   help=DECODER_PRECISION_HELP)
    d.set_defaults(func=cmd_decode)

    sp = sub.add_parser("speakers", help="list the preset speakers of a CustomVoice model")
    sp.add_argument("--model", type=Path, required=True, help="bundle folder")
    sp.set_defaults(func=cmd_speakers)

    m = sub.add_parser("demo-model", help="write a tiny random-weight bundle (speaks noise; for trying the app)")
    m.add_argument("dest", type=Path)
    m.add_argument("--kind", choices=["base", "custom_voice", "voice_design"], default="base",
                   help="the model kind to imitate (preset speakers, or a voice designed from a description)")
    m.set_defaults(func=cmd_demo_model)


def add_text_and_voice_parsers(sub) -> None:
    sp = sub.add_parser("split", help="show how a long text is cut into chunks (one per line)")
    sp.add_argument("--text")
    sp.add_argument("--text-file", type=Path, help="a UTF-8 text file instead of --text")
    sp.add_argument("--max-chars", type=int, default=DEFAULT_MAX_CHARS,
                    help=f"longest chunk in characters (default {DEFAULT_MAX_CHARS})")
    sp.add_argument("--language", default="auto", help="auto or a language the model speaks (sentence rules)")
    sp.set_defaults(func=cmd_split)

    v = sub.add_parser("voice", help="manage voice files")
    vsub = v.add_subparsers(dest="voice_command", required=True, metavar="ACTION")
    vc = vsub.add_parser("create", help="make a reusable voice file from reference audio")
    vc.add_argument("ref", type=Path)
    vc.add_argument("--model", type=Path, required=True)
    vc.add_argument("--ref-text", help="transcript of the reference (in-context cloning); 'auto': transcribe the "
                    "reference with a Whisper model (its language becomes the voice's when --language is auto)")
    add_whisper_option(vc)
    vc.add_argument("--name", default="")
    vc.add_argument("--language", default="auto")
    vc.add_argument("-o", "--output", type=Path, required=True)
    add_overwrite_option(vc)
    vc.add_argument("--threads", type=int, default=None, help=THREADS_HELP)
    add_device_options(vc)
    vc.set_defaults(func=cmd_voice_create)
