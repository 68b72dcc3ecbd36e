"""Generation speed with the thread governor on and off, alternating in one process, optionally with busy processes.

    python benchmarks/threads_under_load.py --model BUNDLE [--frames 30] [--rounds 3] [--threads 2] [--busy N]

Two Synthesizers share the bundle: one lets the talker and code predictor drop to one thread while other programs
hold the cores (the default), one always uses --threads. Each round times one generation with each (EOS ignored,
median ms per frame after two frames). --busy N starts N CPU-bound processes for the whole run (on a
machine others already share, the load average printed says how busy it was). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine import GenerationSettings, Synthesizer, Voice, busy_processes, load_average, run_synthesis  # noqa: E402

TEXT = "The quick brown fox jumps over the lazy dog, and then it runs far away."


def frame_ms(synth: Synthesizer, voice: Voice, frames: int) -> float:
    times: list[float] = []
    settings = GenerationSettings(seed=0, max_frames=frames, ignore_eos=True, codes_only=True)
    run_synthesis(synth.synthesize(TEXT, voice, "english", settings), on_frame=lambda ev: times.append(ev.frame_seconds))
    return float(np.median(times[2:] or times)) * 1000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument("--frames", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--busy", type=int, default=0)
    a = ap.parse_args()
    synths = {"governor": Synthesizer(a.model, a.threads), "fixed": Synthesizer(a.model, a.threads, False)}
    rng = np.random.default_rng(0)
    voice = Voice(xvector=rng.standard_normal(synths["fixed"].hidden_size).astype(np.float32),
                  model_id=synths["fixed"].model_id)
    for s in synths.values():
        frame_ms(s, voice, 3)  # warm-up
    print(f"{a.model}: {a.threads} threads, {a.frames} frames, {a.busy} busy processes; load average {load_average()}")
    with busy_processes(a.busy):
        time.sleep(1 if a.busy else 0)
        for r in range(a.rounds):
            for name, s in synths.items():
                ms = frame_ms(s, voice, a.frames)
                print(f"round {r + 1} {name:8s} {ms:8.1f} ms/frame median (threads now talker "
                      f"{s.thread_counts[0]}, code predictor {s.thread_counts[1]}); "
                      f"load average {load_average()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
