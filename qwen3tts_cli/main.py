"""The `qwen3tts` command (also `python -m qwen3tts_cli`): the parser, built from each command group's module,
and the dispatch.

User errors print one line to stderr and exit 2; no traceback. Each subcommand lives in its own cmd_* function,
in the module of its group: synth.py, batch.py, models.py, tools.py, bench.py, transcribe.py."""

from __future__ import annotations

import argparse
import sys

from engine import EngineError, as_sentence, usable_cpus

from . import batch, bench, models, serve, synth, tools, transcribe
from .models import resolve_model_option

EXIT_USAGE = 2


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="qwen3tts", description="Qwen3-TTS voice cloning on the CPU (ncnn + numpy).")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    tools.add_convert_parser(sub)
    synth.add_parser(sub)
    batch.add_parser(sub)
    tools.add_tool_parsers(sub)
    bench.add_parser(sub)
    tools.add_text_and_voice_parsers(sub)
    models.add_parser(sub)
    serve.add_parser(sub)
    transcribe.add_parser(sub)
    return p


def usable_threads(requested: int) -> tuple[int, str | None]:
    """The thread count to use and a note when the request was clamped (more threads than cores only
    oversubscribes the machine: --threads 1000 drove the load to 255)."""
    cores = usable_cpus()
    if requested > cores:
        return cores, f"--threads {requested} is more than the {cores} cores available; using {cores}."
    return requested, None


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if isinstance(getattr(args, "threads", None), int):
        if args.threads < 1:
            print("qwen3tts: --threads must be at least 1.", file=sys.stderr)
            return EXIT_USAGE
        args.threads, note = usable_threads(args.threads)
        if note:
            print(f"qwen3tts: {note}", file=sys.stderr)
    try:
        resolve_model_option(args)
        return int(args.func(args) or 0)
    except EngineError as e:
        print(f"qwen3tts: {as_sentence(str(e))}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("qwen3tts: Interrupted.", file=sys.stderr)
        return 130
