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
