"""`qwen3tts serve`: a local speech server that speaks OpenAI's audio API with this model and the voice library's
voices (the qwen3tts_server package), until Ctrl+C."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .common import (
    DECODER_PRECISION_HELP,
    THREADS_HELP,
    UsageError,
    add_device_options,
    add_generation_options,
    generation_values,
    say_device,
    tune_if_needed,
)

KEY_ENV = "QWEN3TTS_API_KEY"


def cmd_serve(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from engine import GenerationSettings, Synthesizer
    from qwen3tts_server import Limits, ServerConfig, run_server

    key = args.api_key if args.api_key is not None else os.environ.get(KEY_ENV) or None
    config = ServerConfig(
        host=args.host, port=args.port, api_key=key, model_name=Path(args.model).name,
        voices_dir=args.voices,
        limits=Limits(max_input_chars=args.max_input_chars, max_waiting=args.max_waiting,
                      request_seconds=args.max_seconds),
    )
    given = {name: value for name, value in generation_values(args).items() if value is not None and value is not False}
    GenerationSettings(**given).check()  # a request's defaults, checked before the model loads too
    config.check()  # another address without a key, a bad port: before the model loads
    if args.voices is not None and not args.voices.is_dir():
        raise UsageError(f"--voices {args.voices} is not a folder.")
    synth = Synthesizer(args.model, threads=args.threads, decoder_precision=args.decoder_precision, device=args.device,
                        gpu_precision=args.gpu_precision)
    say_device(synth.device)
    if given:  # the model's own settings, with the ones given here over them
        config = replace(config, defaults=replace(synth.default_settings, **given))
    tune_if_needed(synth, args.threads)

    def ready(address: str) -> None:
        keyed = "; requests need its API key" if key else ""
        print(f"qwen3tts: serving {config.model_name} ({synth.kind.kind}) at {address}/v1{keyed}. "
              "Ctrl+C stops it.", file=sys.stderr, flush=True)
        print(f"qwen3tts: {_voices_line(synth, config)}", file=sys.stderr, flush=True)

    try:
        run_server(synth, config, ready)
    except KeyboardInterrupt:
        pass
    print("qwen3tts: server stopped.", file=sys.stderr)
    return 0


def _voices_line(synth, config) -> str:
    """The names a request's `voice` may take, or what to do when there are none."""
    from engine import VoiceNeed
    from engine.store import VoiceLibrary, default_voices_dir
    from qwen3tts_server.voices import VoiceBook

    if synth.kind.needs == VoiceNeed.DESCRIPTION:
        return "this VoiceDesign model makes its voice from each request's instructions (a description)."
    names = [v["id"] for v in VoiceBook(synth, VoiceLibrary(config.voices_dir or default_voices_dir())).listing()]
    if not names:
        return ("no voice in the library was made with this model yet: make one in the app or with "
                "'qwen3tts voice create', save it to the voice folder, and name it in requests.")
    shown = ", ".join(names[:12]) + (f" and {len(names) - 12} more" if len(names) > 12 else "")
    return f"voices: {shown}."


def add_parser(sub) -> None:
    from engine import DECODER_PRECISIONS, DEFAULT_DECODER_PRECISION
    from qwen3tts_server.config import DEFAULT_HOST, DEFAULT_PORT, Limits

    s = sub.add_parser("serve", help="let other programs speak with your voices: an OpenAI-compatible speech server")
    s.add_argument("--model", required=True, help="bundle folder or installed model name")
    s.add_argument("--host", default=DEFAULT_HOST,
                   help="address to listen on (default %(default)s: this computer only; another address needs "
                        "--api-key)")
    s.add_argument("--port", type=int, default=DEFAULT_PORT, help="port (default %(default)s; 0: any free port)")
    s.add_argument("--api-key", help=f"require 'Authorization: Bearer KEY' (default: ${KEY_ENV}, else none)")
    s.add_argument("--voices", type=Path, help="the voice library folder (default: the app's)")
    s.add_argument("--max-input-chars", type=int, default=Limits.max_input_chars,
                   help="longest input one request may send (default %(default)s)")
    s.add_argument("--max-waiting", type=int, default=Limits.max_waiting,
                   help="requests that may wait for the engine; more are told to retry (429) (default %(default)s)")
    s.add_argument("--max-seconds", type=float, default=Limits.request_seconds,
                   help="longest time one request may take (default %(default)s)")
    add_generation_options(s)  # every request's, where it sends none of its own
    s.add_argument("--threads", type=int, default=None, help=THREADS_HELP)
    add_device_options(s)
    s.add_argument("--decoder-precision", choices=DECODER_PRECISIONS, default=DEFAULT_DECODER_PRECISION,
                   help=DECODER_PRECISION_HELP)
    s.set_defaults(func=cmd_serve)
