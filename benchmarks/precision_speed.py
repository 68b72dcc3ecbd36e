"""Talker step and code-predictor frame time of several bundles, alternating call by call in one process.

    python benchmarks/precision_speed.py BUNDLE [BUNDLE ...] [--threads 1] [--calls 16]

Each bundle (a full bundle or a talker-only one from benchmarks/talker_speed.py) gets its own talker and code
predictor with the thread governor off; the calls alternate between bundles so that a busy machine disturbs all
of them alike. Prints the least-disturbed (min), 25th percentile and median time per call, and the load average
before and after. Used for the q8 / fp32 comparison in docs/performance.md. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine import Bundle, load_average  # noqa: E402
from engine.nets.code_predictor import CodePredictor  # noqa: E402
from engine.nets.talker import Talker  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bundles", type=Path, nargs="+")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--calls", type=int, default=16)
    a = ap.parse_args()
    if a.calls < 3:
        ap.error("--calls must be 3 or more (the first two page the weights in and are not counted)")
    nets = {}
    for path in a.bundles:
        b = Bundle.open(path)
        nets[f"{path.name} ({b.precision})"] = (Talker(b, a.threads, adaptive_threads=False),
                                                 CodePredictor(b, a.threads, adaptive_threads=False))
    rng = np.random.default_rng(0)
    hidden = next(iter(nets.values()))[0].hidden_size
    rows = rng.standard_normal((8, hidden)).astype(np.float32) * 0.1
    seqs = {name: talker.start(rows)[0] for name, (talker, _) in nets.items()}
    times: dict[tuple[str, str], list[float]] = {(n, k): [] for n in nets for k in ("talker step", "code predictor")}
    print(f"load average {load_average()} (before); {a.threads} threads")
    for i in range(a.calls):
        for name, (talker, cp) in nets.items():
            t = time.perf_counter()
            h, _ = talker.step(seqs[name], rows[i % len(rows)])
            times[(name, "talker step")].append(time.perf_counter() - t)
            t = time.perf_counter()
            cp.predict(h, 5, lambda logits, g: int(np.argmax(logits)))
            times[(name, "code predictor")].append(time.perf_counter() - t)
    for (name, part), v in times.items():
        ms = np.array(v[2:]) * 1000  # the first calls page the weights in
        print(f"{name:40s} {part:15s} min {ms.min():7.1f}  p25 {np.percentile(ms, 25):7.1f}  "
              f"median {np.median(ms):7.1f} ms")
    print(f"load average {load_average()} (after)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
