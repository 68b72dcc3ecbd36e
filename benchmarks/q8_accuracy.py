"""How close 8-bit bundles come to fp32, on plain random checkpoints and on outlier stress checkpoints (the figures
in docs/performance.md, "8-bit accuracy").

    python benchmarks/q8_accuracy.py [--checkpoint DIR ...] [--work DIR] [--frames 30] [--threads 2]
        [--formats q8,q8unchecked,q8raw,q8block,fp16,bf16] [--stress plain,preserve8,preserve32,...] [--no-fixtures]
        [--q8-block 32|64|128]

Formats: q8 is what the converter makes today (int8 Gemm with a scale per output channel, outlier smoothing folded
into the weights: engine/convert/smooth.py, then the 8-bit check: engine/convert/q8_check.py, which keeps the Linears
that move the output most in fp32 or falls back to fp32; the line of each q8 row says what it did); q8unchecked the
same without the check (q8 bundles converted before it); q8search the same with the smoothing strength searched per layer
input on the calibration rows (smooth.SEARCH; an option, not the default); q8raw the same int8 format without smoothing (q8 bundles converted
before it); q8block the 8-bit block format of older q8 bundles (--q8-block values per scale, default the
converter's 128); fp16 and bf16 the float bundles.

Checkpoints: every fixture model (tests/fixtures/models/*, unless --no-fixtures) and every --checkpoint (e.g. a
full-size random one from benchmarks/make_checkpoint.py), each plain and as the stress variants of
tools/outlier_checkpoint.py named in --stress: preserveF (the same function with F-times outlier channels, F a
power of two), channelsF (a few channels per layer F times larger, not compensated), massiveF (the talker's first
prompt positions with one channel F times the row's mean magnitude). Each variant's reference is its own fp32
bundle.

Per checkpoint and format, teacher-forced (both fed the fp32 greedy codes, so an early difference cannot cascade):
the talker's code-0 logits and the code predictor's logits, top-1 agreement with fp32 and the mean KL divergence
KL(fp32 || format) of the sampling distribution at temperature 0.9, top-k 50 (both restricted to fp32's top 50
tokens and renormalised) per position; free-running greedy: how many of the --frames frames equal fp32's 16 codes.
Prompt rows are the deterministic stand-in of benchmarks/talker_speed.py, not the check's own multilingual prompts,
so for q8 these figures are a hold-out measurement of what the check promised. KL is the engine's sampling_kl (the
check's measure). A markdown table closes the output. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_env import WORK_DIR  # noqa: E402
from talker_speed import run  # noqa: E402

import engine.convert.talker as talker_convert  # noqa: E402
from engine import convert_checkpoint, read_check_record, sampling_kl  # noqa: E402
from engine.convert import smooth  # noqa: E402
from engine.runtime.bundle import Bundle  # noqa: E402
from tools.outlier_checkpoint import MODES, Stress, write_stress_checkpoint  # noqa: E402

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "models"
STRESS = "plain,preserve8,preserve32,preserve128,channels10,channels30,channels100,massive100"


def parse_stress(label: str) -> Stress | None:
    if label == "plain":
        return None
    for mode in MODES:
        if label.startswith(mode):
            return Stress(mode, float(label[len(mode):]))
    raise SystemExit(f"q8_accuracy: unknown stress variant {label!r} (plain, or one of {', '.join(MODES)} + factor)")


def stress_checkpoint(src: Path, work: Path, name: str, label: str) -> Path:
    stress = parse_stress(label)
    if stress is None:
        return src
    dest = work / "stress" / f"{name}-{label}"
    if not (dest / "config.json").is_file():
        t0 = time.perf_counter()
        write_stress_checkpoint(src, dest, stress)
        print(f"wrote {dest} in {time.perf_counter() - t0:.1f} s", flush=True)
    return dest


def convert(ckpt_dir: Path, dest: Path, precision: str, smooth: bool | None, check: bool = False) -> Path:
    if (dest / "manifest.json").is_file():
        return dest
    t0 = time.perf_counter()
    convert_checkpoint(ckpt_dir, dest, precision, overwrite=True, parts=["talker"], smooth=smooth, check=check)
    print(f"converted {precision} in {time.perf_counter() - t0:.1f} s -> {dest}", flush=True)
    return dest


def variant_bundle(ckpt: Path, work: Path, name: str, fmt: str) -> Path:
    """The talker part of `ckpt` converted as format `fmt` (see the module docstring)."""
    if fmt == "q8":
        return convert(ckpt, work / f"talker-{name}-q8checked", "q8", True, check=True)
    if fmt == "q8unchecked":
        return convert(ckpt, work / f"talker-{name}-q8smooth", "q8", True)
    if fmt == "q8search":  # per-site search of the smoothing strength (engine/convert/smooth.py SEARCH)
        old = smooth.ALPHA
        smooth.ALPHA = None
        try:
            return convert(ckpt, work / f"talker-{name}-q8search", "q8", True)
        finally:
            smooth.ALPHA = old
    if fmt == "q8raw":
        return convert(ckpt, work / f"talker-{name}-q8int8", "q8", False)
    if fmt != "q8block":
        return convert(ckpt, work / f"talker-{name}-{fmt}", fmt, False)
    old = talker_convert.Q8_FORMAT
    talker_convert.Q8_FORMAT = "block"
    try:
        return convert(ckpt, work / f"talker-{name}-q8block{talker_convert.Q8_BLOCK}", "q8", False)
    finally:
        talker_convert.Q8_FORMAT = old


def compare(name: str, ckpt: Path, work: Path, formats: list[str], frames: int, threads: int) -> list[tuple]:
    ref_bundle = Bundle.open(convert(ckpt, work / f"talker-{name}-fp32", "fp32", False))
    greedy32 = run(ref_bundle, threads, frames, None)
    forced = greedy32["codes"]
    rows = []
    for fmt in formats:
        bundle = Bundle.open(variant_bundle(ckpt, work, name, fmt))
        tf = run(bundle, threads, frames, forced)
        free = run(bundle, threads, frames, None)
        same = int(np.all(free["codes"] == forced, axis=1).sum())
        t_top1 = float(np.mean(tf["t_logits"].argmax(-1) == greedy32["t_logits"].argmax(-1)))
        c_top1 = float(np.mean(tf["c_logits"].argmax(-1) == greedy32["c_logits"].argmax(-1)))
        t_kl = sampling_kl(greedy32["t_logits"], tf["t_logits"])
        c_kl = sampling_kl(greedy32["c_logits"], tf["c_logits"])
        rows.append((name, fmt, t_top1, t_kl, c_top1, c_kl, same, frames))
        record = read_check_record(bundle.manifest)
        checked = "" if record is None else (f" | check: {record.summary()} in {record.seconds:.0f} s"
                                             + (f" ({', '.join(p.name for p in record.promoted)})"
                                                if record.promoted else ""))
        print(f"{name:24s} {fmt:7s} talker top-1 {t_top1:.3f} KL {t_kl:.2e} | code predictor top-1 {c_top1:.3f} "
              f"KL {c_kl:.2e} | greedy frames equal {same}/{frames}{checked}", flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", type=Path, action="append", default=[])
    ap.add_argument("--work", type=Path, default=WORK_DIR / "q8")
    ap.add_argument("--frames", type=int, default=30)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--formats", "--precisions", default="q8,q8unchecked,q8raw,fp16,bf16")
    ap.add_argument("--stress", default=STRESS, help=f"checkpoint variants (default {STRESS})")
    ap.add_argument("--no-fixtures", action="store_true", help="only the --checkpoint folders")
    ap.add_argument("--q8-block", type=int, choices=[32, 64, 128], help="values per scale of q8block")
    args = ap.parse_args()
    if args.q8_block:
        talker_convert.Q8_BLOCK = args.q8_block
    models = [] if args.no_fixtures else [(p.name, p) for p in sorted(FIXTURES.iterdir())
                                          if (p / "config.json").is_file()]
    models += [(p.name, p) for p in args.checkpoint]
    labels = args.stress.split(",")
    for label in labels:
        parse_stress(label)
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}; {args.frames} frames, T 0.9, top-k 50")
    table = []
    for name, path in models:
        for label in labels:
            ckpt = stress_checkpoint(path, args.work, name, label)
            table += compare(f"{name}-{label}", ckpt, args.work, args.formats.split(","), args.frames, args.threads)
    print("\n| checkpoint | format | talker top-1 | talker KL | code predictor top-1 | code predictor KL "
          "| greedy frames equal |\n|---|---|---|---|---|---|---|")
    for name, fmt, t_top1, t_kl, c_top1, c_kl, same, frames in table:
        print(f"| {' '.join(name.rsplit('-', 1))} | {fmt} | {t_top1:.3f} | {t_kl:.2e} | {c_top1:.3f} | {c_kl:.2e} | {same}/{frames} |")


if __name__ == "__main__":
    main()
