"""The `qwen3tts` command (also `python -m engine`).

User errors print one line to stderr and exit 2; no traceback. Each subcommand lives in its own cmd_* function.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from .errors import EngineError

EXIT_USAGE = 2


class ProgressBar:
    """A one-line progress bar on stderr (silent when stderr is not a terminal, except the final line)."""

    def __init__(self, label: str, stream=None):
        self.label = label
        self.stream = stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self._last = 0.0

    def update(self, fraction: float, message: str = "") -> None:
        now = time.monotonic()
        if not self.tty or (now - self._last < 0.1 and fraction < 1.0):
            return
        self._last = now
        width = 30
        filled = int(width * min(max(fraction, 0.0), 1.0))
        text = f"\r{self.label} [{'#' * filled}{'.' * (width - filled)}] {fraction * 100:5.1f}% {message}"
        self.stream.write(text[:160].ljust(100))
        self.stream.flush()

    def done(self, message: str = "") -> None:
        if self.tty:
            self.stream.write("\r" + " " * 110 + "\r")
        if message:
            self.stream.write(message + "\n")
        self.stream.flush()


def not_implemented(name: str) -> int:
    print(f"qwen3tts: '{name}' is not implemented yet", file=sys.stderr)
    return EXIT_USAGE


def cmd_convert(args: argparse.Namespace) -> int:
    from .convert import convert_checkpoint

    bar = ProgressBar("convert")
    t0 = time.monotonic()
    out = convert_checkpoint(args.src, args.dest, precision=args.precision, progress=bar.update,
                             overwrite=args.force)
    bar.done(f"wrote {out} ({args.precision}) in {time.monotonic() - t0:.1f} s")
    return 0


def cmd_synth(args: argparse.Namespace) -> int:
    return not_implemented("synth")


def cmd_decode(args: argparse.Namespace) -> int:
    return not_implemented("decode")


def cmd_demo_model(args: argparse.Namespace) -> int:
    return not_implemented("demo-model")


def cmd_bench(args: argparse.Namespace) -> int:
    return not_implemented("bench")


def cmd_voice_create(args: argparse.Namespace) -> int:
    return not_implemented("voice create")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="qwen3tts", description="Qwen3-TTS voice cloning on the CPU (ncnn + numpy).")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    c = sub.add_parser("convert", help="convert a Hugging Face checkpoint folder into a model bundle")
    c.add_argument("src", type=Path, help="checkpoint folder (config.json, model.safetensors, speech_tokenizer/)")
    c.add_argument("dest", type=Path, help="bundle folder to create")
    c.add_argument("--precision", choices=["fp32", "fp16", "bf16"], default="fp32")
    c.add_argument("--force", action="store_true", help="replace an existing bundle at DEST")
    c.set_defaults(func=cmd_convert)

    s = sub.add_parser("synth", help="speak text in a cloned voice")
    s.add_argument("--model", type=Path, required=True, help="bundle folder")
    s.add_argument("--text", required=True)
    s.add_argument("-o", "--output", type=Path, required=True, help="output audio file (.wav, .flac, .ogg)")
    s.add_argument("--ref", type=Path, help="reference audio of the voice to clone")
    s.add_argument("--ref-text", help="transcript of the reference (enables in-context cloning)")
    s.add_argument("--x-vector-only", action="store_true", help="ignore --ref-text; clone from the x-vector only")
    s.add_argument("--voice", type=Path, help="a saved voice file instead of --ref")
    s.add_argument("--language", default="auto")
    s.add_argument("--greedy", action="store_true", help="argmax decoding (reproducible, parity mode)")
    s.add_argument("--seed", type=int)
    s.add_argument("--temperature", type=float)
    s.add_argument("--top-k", type=int)
    s.add_argument("--top-p", type=float)
    s.add_argument("--repetition-penalty", type=float)
    s.add_argument("--max-frames", type=int, help="at most this many 80 ms frames")
    s.add_argument("--non-streaming-text", action="store_true", help="put the whole text in the prompt")
    s.add_argument("--codes-out", type=Path, help="also write the generated codes (frames x 16) as .npy")
    s.add_argument("--threads", type=int, default=2)
    s.set_defaults(func=cmd_synth)

    d = sub.add_parser("decode", help="decode codec ids (frames x 16 .npy) to 24 kHz audio")
    d.add_argument("--model", type=Path, required=True)
    d.add_argument("--codes", type=Path, required=True)
    d.add_argument("-o", "--output", type=Path, required=True)
    d.add_argument("--pcm16", action="store_true", help="write 16-bit PCM instead of float")
    d.add_argument("--threads", type=int, default=2)
    d.set_defaults(func=cmd_decode)

    m = sub.add_parser("demo-model", help="write a tiny random-weight bundle (speaks noise; for trying the app)")
    m.add_argument("dest", type=Path)
    m.set_defaults(func=cmd_demo_model)

    b = sub.add_parser("bench", help="measure speed: ms per frame, real-time factor, time to first audio")
    b.add_argument("--model", type=Path, required=True)
    b.add_argument("--frames", type=int, default=50)
    b.add_argument("--threads", type=int, default=2)
    b.set_defaults(func=cmd_bench)

    v = sub.add_parser("voice", help="manage voice files")
    vsub = v.add_subparsers(dest="voice_command", required=True, metavar="ACTION")
    vc = vsub.add_parser("create", help="make a reusable voice file from reference audio")
    vc.add_argument("ref", type=Path)
    vc.add_argument("--model", type=Path, required=True)
    vc.add_argument("--ref-text")
    vc.add_argument("--name", default="")
    vc.add_argument("--language", default="auto")
    vc.add_argument("-o", "--output", type=Path, required=True)
    vc.set_defaults(func=cmd_voice_create)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except EngineError as e:
        print(f"qwen3tts: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("qwen3tts: interrupted", file=sys.stderr)
        return 130
