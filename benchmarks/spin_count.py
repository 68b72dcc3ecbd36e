"""Generation speed per OpenMP spin count (GOMP_SPINCOUNT), quiet and with busy processes, alternating.

    python benchmarks/spin_count.py --model BUNDLE [--spins 0,300,1000,3000,30000] [--frames 20] [--rounds 2]
                                    [--threads 2] [--busy 0,1]

libgomp reads its spin count once, when it loads, so each figure comes from a process of its own: this script
runs itself once per (round, busy count, spin count), each run opening the bundle with --threads on every
network, the thread governor off and no tuning, and timing one generation (EOS ignored, greedy, frames after the
first three). "0" is OMP_WAIT_POLICY=PASSIVE (threads sleep at once); a one-thread run is added for comparison.
--busy N starts N CPU-bound processes for that run. The engine's default is engine/runtime/cpu.py SPIN_COUNT.
Nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TEXT = "The quick brown fox jumps over the lazy dog, and then it runs far away."


def one_run(model: Path, threads: int, frames: int, busy: int) -> None:
    """In the child: time one generation and print 'min median max' in ms per frame."""
    from engine import GenerationSettings, Synthesizer, Voice, busy_processes, run_synthesis

    synth = Synthesizer(model, threads, adaptive_threads=False, tuning=False)
    voice = Voice(xvector=np.random.default_rng(0).standard_normal(synth.hidden_size).astype(np.float32),
                  model_id=synth.model_id)
    times: list[float] = []
    settings = GenerationSettings(greedy=True, max_frames=frames + 3, ignore_eos=True, codes_only=True)
    with busy_processes(busy):
        run_synthesis(synth.synthesize(TEXT, voice, "english", settings),
                      on_frame=lambda ev: times.append(ev.frame_seconds * 1000))
    ms = np.array(times[3:] or times)
    print(f"{ms.min():.1f} {np.median(ms):.1f} {ms.max():.1f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument("--spins", default="0,300,1000,3000,30000")
    ap.add_argument("--frames", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--busy", default="0,1", help="busy processes per run, a list")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--child-busy", type=int, default=0, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        one_run(a.model, a.threads, a.frames, a.child_busy)
        return 0
    from engine import cpu_model, load_average, physical_cores

    print(f"{cpu_model()}, {physical_cores()} cores; {a.model}; {a.frames} frames; load average {load_average()}")
    print("| round | busy | setting | min | median | max ms/frame |\n|---|---|---|---|---|---|")
    clean = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    runs = [(f"spin {s}", a.threads, {"OMP_WAIT_POLICY": "PASSIVE"} if s == "0" else {"GOMP_SPINCOUNT": s})
            for s in a.spins.split(",")] + [("one thread", 1, {})]
    for r in range(a.rounds):
        for busy in (int(b) for b in a.busy.split(",")):
            for name, threads, env in runs:
                cmd = [sys.executable, __file__, "--child", "--model", str(a.model), "--threads", str(threads),
                       "--frames", str(a.frames), "--child-busy", str(busy)]
                out = subprocess.run(cmd, env={**clean, **env}, capture_output=True, text=True)
                if out.returncode != 0:
                    print(out.stderr.strip().splitlines()[-1] if out.stderr.strip() else "failed", file=sys.stderr)
                    return 1
                lo, mid, hi = out.stdout.split()[-3:]
                print(f"| {r + 1} | {busy} | {name} | {lo} | {mid} | {hi} |", flush=True)
    print(f"load average {load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
