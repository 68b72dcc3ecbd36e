"""Batched generation speed: 8 lines of different lengths through Synthesizer.synthesize_many at batch sizes
1, 2, 4 and 8 (public API only; codes only, no audio decoding, greedy, fixed frame counts).

    python benchmarks/batch_speed.py --model BUNDLE [--model BUNDLE2 ...] [--threads 2] [--sizes 1,2,4,8]

BUNDLE: a converted full-size bundle (e.g. from benchmarks/make_checkpoint.py + `qwen3tts convert`). Prints,
per bundle and batch size: wall time, aggregate generated frames per second, speed-up over batch size 1, and
the per-line slowdown (a line's mean seconds per frame in the batch over its seconds per frame alone). Checks
that every line's codes are identical at every batch size (batching must not change results).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine import GenerationSettings, SynthesisResult, Synthesizer, Voice  # noqa: E402
from engine.types import SynthesisJob  # noqa: E402

TEXTS = [
    "Hello there.",
    "The weather is fine today.",
    "Please leave the parcel at the door, thank you.",
    "A short line.",
    "Trains to the airport leave every twenty minutes from platform four.",
    "Yes.",
    "She sells sea shells by the sea shore, and the shells she sells are surely sea shells.",
    "Good night, and see you tomorrow morning.",
]
FRAMES = [14, 20, 30, 10, 38, 6, 46, 24]  # fixed per line (EOS ignored) so every batch size does the same work


def run(synth: Synthesizer, jobs: list[SynthesisJob], batch_size: int, longest_first: bool = False):
    settings = GenerationSettings(greedy=True, ignore_eos=True, codes_only=True)
    frame_seconds: dict[int, list[float]] = {}
    codes: dict[int, np.ndarray] = {}
    t0 = time.perf_counter()
    for ev in synth.synthesize_many(jobs, settings, batch_size=batch_size, longest_first=longest_first):
        if ev.error is not None:
            raise SystemExit(f"job {ev.job} failed: {ev.error}")
        if isinstance(ev.event, SynthesisResult):
            codes[ev.job] = ev.event.codes
        else:
            frame_seconds.setdefault(ev.job, []).append(ev.event.frame_seconds)
    return time.perf_counter() - t0, codes, {j: float(np.mean(s)) for j, s in frame_seconds.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, action="append", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--sizes", default="1,2,4,8")
    ap.add_argument("--lines", type=int, default=len(TEXTS), help="the first N lines (a smoke run uses 2)")
    ap.add_argument("--frames", type=int, help="at most this many frames per line (default: each line's own)")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    texts = TEXTS[:max(1, args.lines)]
    frames = [min(n, args.frames or n) for n in FRAMES[:len(texts)]]
    total = sum(frames)
    for bundle in args.model:
        synth = Synthesizer(bundle, threads=args.threads)
        precision = synth.precision
        voice = Voice(xvector=np.random.default_rng(0).standard_normal(synth.hidden_size).astype(np.float32) * 0.05,
                      model_id=synth.model_id)
        jobs = [SynthesisJob(t, voice, "english", max_frames=n) for t, n in zip(texts, frames, strict=True)]
        run(synth, jobs[:2], 2)  # warm-up (first calls allocate)
        base = None
        print(f"\n{bundle.name} ({precision}), {args.threads} threads, {len(jobs)} lines, {total} frames, "
              f"load average {os.getloadavg()[0]:.1f}")
        print("| batch size | order | wall s | frames/s | speed-up | per-line slowdown | codes = batch 1 |")
        print("|---|---|---|---|---|---|---|")
        for size in sizes:
            # given order, and longest first (what `qwen3tts batch` and the app's batch panel use)
            for longest_first in ((False,) if size == 1 else (False, True)):
                wall, codes, per_frame = run(synth, jobs, size, longest_first)
                if base is None:
                    base = (wall, codes, per_frame)
                same = all(np.array_equal(codes[j], base[1][j]) for j in codes)
                slowdown = float(np.mean([per_frame[j] / base[2][j] for j in per_frame]))
                order = "longest first" if longest_first else "given"
                print(f"| {size} | {order} | {wall:.1f} | {total / wall:.2f} | {base[0] / wall:.2f}x | {slowdown:.2f}x | "
                      f"{'yes' if same else 'NO'} |", flush=True)
        print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
