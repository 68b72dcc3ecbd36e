"""Time per generated frame spent outside ncnn's forward passes (the target: under 3 ms per frame).

    python benchmarks/frame_overhead.py --model BUNDLE [--model BUNDLE2 ...] [--frames 40] [--threads 2]
        [--rounds 3] [--profile]

Public API only, plus a timer around ncnn's own `Extractor.extract` (where ncnn runs a graph's layers; it also
hands over the KV-cache blobs, a few microseconds each). For each bundle, sampled and greedy, codes only (no
audio), EOS ignored, one x-vector voice: per frame (the first frame, which follows the prompt, is left out) the
compute time of the frame loop, the time inside extract, and the rest: Python, extractor creation, input Mats,
output copies, sampling, embedding rows and the frame feedback. Medians over frames, then the median of the
rounds. --profile adds a cProfile listing of the largest costs outside extract (cProfile itself slows Python
down, so those figures are inflated; use them to rank, not to add up).
"""

from __future__ import annotations

import argparse
import cProfile
import importlib
import os
import pstats
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine import FrameEvent, GenerationSettings, Synthesizer, Voice  # noqa: E402

ncnn = importlib.import_module("ncnn")  # after engine, which sets OpenMP's wait policy before ncnn loads

_inside = [0.0]
_extract = ncnn.Extractor.extract


def _timed_extract(self, *args):
    t = time.perf_counter()
    try:
        return _extract(self, *args)
    finally:
        _inside[0] += time.perf_counter() - t


ncnn.Extractor.extract = _timed_extract

TEXT = "The quick brown fox jumps over the lazy dog, and the dog does not mind at all."


def frame_costs(synth: Synthesizer, voice: Voice, frames: int, greedy: bool) -> tuple[float, float, float]:
    """Median ms per frame: (frame-loop compute, inside extract, outside extract)."""
    settings = GenerationSettings(greedy=greedy, seed=0, max_frames=frames, ignore_eos=True, codes_only=True)
    totals, insides = [], []
    mark = _inside[0]
    for ev in synth.synthesize(TEXT, voice, "english", settings):
        if isinstance(ev, FrameEvent):
            if ev.index > 0:
                totals.append(ev.frame_seconds)
                insides.append(_inside[0] - mark)
            mark = _inside[0]
    outsides = np.subtract(totals, insides)
    return tuple(1000 * float(np.median(a)) for a in (totals, insides, outsides))


def profile_outside(synth: Synthesizer, voice: Voice, frames: int) -> None:
    settings = GenerationSettings(seed=0, max_frames=frames, ignore_eos=True, codes_only=True)
    prof = cProfile.Profile()
    prof.enable()
    for _ in synth.synthesize(TEXT, voice, "english", settings):
        pass
    prof.disable()
    stats = pstats.Stats(prof).stats  # (file, line, name) -> (calls, primitive calls, tottime, cumtime, callers)
    rows = sorted(((v[2], v[0], k) for k, v in stats.items() if k[2] != "_timed_extract"
                   and "extract' of 'ncnn" not in k[2]), reverse=True)[:15]
    print("  largest own times outside extract (cProfile, sampled; ms per frame, calls per frame):")
    for tottime, calls, (file, line, name) in rows:
        where = f"{Path(file).name}:{line}" if line else ""
        print(f"    {1000 * tottime / frames:7.3f}  {calls / frames:7.1f}  {name} {where}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, action="append", required=True)
    ap.add_argument("--frames", type=int, default=40)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    for bundle in args.model:
        synth = Synthesizer(bundle, threads=args.threads)
        voice = Voice(xvector=np.random.default_rng(0).standard_normal(synth.hidden_size).astype(np.float32) * 0.05,
                      model_id=synth.model_id)
        frame_costs(synth, voice, 4, greedy=False)  # warm-up: the first calls load weights and pick kernels
        print(f"\n{bundle.name} ({synth.precision}), {args.threads} threads, {args.frames} frames, "
              f"load average {os.getloadavg()[0]:.1f}")
        print("| decoding | frame ms | inside extract ms | outside ms |")
        print("|---|---|---|---|")
        for greedy in (False, True):
            runs = [frame_costs(synth, voice, args.frames, greedy) for _ in range(args.rounds)]
            total, inside, outside = (float(np.median([r[i] for r in runs])) for i in range(3))
            print(f"| {'greedy' if greedy else 'sampled'} | {total:.2f} | {inside:.2f} | {outside:.2f} |", flush=True)
        if args.profile:
            profile_outside(synth, voice, args.frames)
        print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
