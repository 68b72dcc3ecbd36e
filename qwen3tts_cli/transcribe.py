"""`qwen3tts transcribe`: what a Whisper model hears in recordings of up to 30 s (a cloning reference's
transcript). Plain output is the text, one line per file; --json writes one JSON object per file and line."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from engine import EngineError, as_sentence, physical_cores

from .common import ProgressBar


def add_parser(sub) -> None:
    t = sub.add_parser("transcribe", help="write down what is said in recordings (Whisper, up to 30 s each)")
    t.add_argument("--model", required=True, help="a Whisper bundle folder or the name of an installed Whisper model")
    t.add_argument("files", nargs="+", type=Path, metavar="FILE", help="audio files (WAV, FLAC, OGG, MP3)")
    t.add_argument("--language", help="the language spoken, as a code (en, de, zh...) or name; default: detect it")
    t.add_argument("--json", action="store_true",
                   help="one JSON object per file: text, language, token ids, length, timings")
    t.add_argument("--threads", type=int, default=physical_cores(), help="CPU threads (default: the physical cores)")
    t.set_defaults(func=cmd_transcribe)


def cmd_transcribe(args: argparse.Namespace) -> int:
    from engine import Transcriber

    transcriber = Transcriber(args.model, threads=args.threads)
    language = transcriber.check_language(args.language)  # a bad code is one line before any file is read
    failed = 0
    for path in args.files:
        bar = ProgressBar(f"transcribe {path.name}")
        try:
            result = transcriber.transcribe(path, language, progress=bar.update)
        except EngineError as e:
            bar.done()
            failed += 1
            print(f"qwen3tts: {path}: {as_sentence(str(e))}", file=sys.stderr)
            continue
        how = "detected" if result.language_detected else "given"
        bar.done(f"{path.name}: {result.seconds:.1f} s of {result.language_name} ({how}) in "
                 f"{result.timings.features + result.timings.encoder + result.timings.decoding:.2f} s"
                 + ("" if result.complete else "; stopped at the token limit"))
        if args.json:
            print(json.dumps({
                "file": str(path), "text": result.text, "language": result.language,
                "language_name": result.language_name, "language_detected": result.language_detected,
                "token_ids": list(result.token_ids), "complete": result.complete, "seconds": round(result.seconds, 3),
                "timings": {"features": round(result.timings.features, 4), "encoder": round(result.timings.encoder, 4),
                            "decoding": round(result.timings.decoding, 4)},
            }, ensure_ascii=False))
        else:
            print(result.text if len(args.files) == 1 else f"{path}: {result.text}")
        sys.stdout.flush()
    return 2 if failed else 0


AUTO = "auto"


def add_whisper_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--whisper-model", metavar="NAME_OR_BUNDLE",
                   help="the Whisper model that --ref-text auto transcribes with (default: an installed one, "
                        "whisper-base first)")


def whisper_model(chosen: str | None) -> Path:
    """The Whisper bundle --ref-text auto uses: --whisper-model, else the store's default (ModelStore.speech_recogniser)."""
    from engine.store import ModelStore

    from .common import UsageError

    store = ModelStore()
    if chosen is not None:
        return store.resolve(chosen)
    model = store.speech_recogniser()
    if model is not None:
        return model.path
    raise UsageError("--ref-text auto needs a Whisper model to transcribe the reference: run "
                     "'qwen3tts models download whisper-base' (or give --whisper-model BUNDLE).")


def auto_ref_text(ref: Path, chosen: str | None, threads: int | None = None) -> tuple[str, str]:
    """The reference's words as the recogniser heard them, and their language's name; said on stderr. No words
    at all is a one-line error (an in-context clone needs its transcript)."""
    from engine import Transcriber

    from .common import UsageError

    model = whisper_model(chosen)
    result = Transcriber(model, threads=threads).transcribe(ref)
    if not result.text.strip():
        raise UsageError(f"Whisper heard no words in {ref}; give --ref-text TEXT, or --x-vector-only for the voice's "
                         "timbre only.")
    print(f'qwen3tts: heard in {ref.name} ({result.language_name}, {model.name}): "{result.text}"', file=sys.stderr)
    return result.text, result.language_name


def voice_input(ref: Path | None, ref_text: str | None, voice: Path | None, x_vector_only: bool,
                speaker: str | None, instruct: str | None, whisper: str | None, threads: int | None):
    """What a command's voice options (or a jobs-file line) give, as the engine's VoiceInput (the model's kind
    then decides, engine.voice_for); a reference's transcript "auto" is heard here first."""
    from engine import VoiceInput

    if ref_text == AUTO and ref is not None and not x_vector_only:
        ref_text, _language = auto_ref_text(ref, whisper, threads)
    return VoiceInput(voice=voice, reference=str(ref) if ref is not None else None, ref_text=ref_text,
                      timbre_only=x_vector_only, speaker=speaker, description=instruct)
