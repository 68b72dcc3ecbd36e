"""How close q8 bundles come to fp32: the figures behind the default precision (docs/performance.md, "Precision").

    python benchmarks/q8_accuracy.py [--checkpoint DIR ...] [--work DIR] [--frames 50] [--threads 2]
                                     [--precisions q8,q8block,fp16,bf16] [--q8-block 32|64|128]

q8 is today's format (int8 Gemm, a scale per output channel); q8block the 8-bit block format of older q8 bundles
(engine/convert/q8.py), with --q8-block values per scale (default: the converter's 128).

For every fixture model (tests/fixtures/models/*) and every --checkpoint (e.g. a full-size random one from
benchmarks/make_checkpoint.py), the talker part is converted once per precision into --work, then:
- teacher-forced (both fed the fp32 greedy codes, so an early difference cannot cascade): the talker's code-0
  logits and the code predictor's logits, max error relative to the logit scale, top-1 agreement, and the mean KL
  divergence KL(fp32 || variant) of the sampling distribution at temperature 0.9, top-k 50 (both restricted to
  fp32's top 50 tokens and renormalised) per position;
- free-running greedy: the fraction of the --frames frames whose 16 codes equal fp32's, and the first frame that
  differs.
Prompt rows are the deterministic stand-in of benchmarks/talker_speed.py. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_env import WORK_DIR  # noqa: E402
from talker_speed import run, talker_bundle  # noqa: E402

import engine.convert.talker as talker_convert  # noqa: E402
from engine.bundle import Bundle  # noqa: E402

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "models"
TEMPERATURE, TOP_K = 0.9, 50


def rel_err(a: np.ndarray, ref: np.ndarray) -> float:
    return float(np.max(np.abs(a - ref)) / max(1.0, float(np.max(np.abs(ref)))))


def mean_kl(ref: np.ndarray, got: np.ndarray) -> float:
    """Mean over positions of KL(p_ref || p_got), p = softmax(logits / T) over ref's top-k tokens."""
    ref = ref.reshape(-1, ref.shape[-1]).astype(np.float64)
    got = got.reshape(-1, got.shape[-1]).astype(np.float64)
    k = min(TOP_K, ref.shape[-1])
    idx = np.argpartition(-ref, k - 1, axis=-1)[:, :k]
    a = np.take_along_axis(ref, idx, -1) / TEMPERATURE
    b = np.take_along_axis(got, idx, -1) / TEMPERATURE
    la = a - a.max(-1, keepdims=True)
    la -= np.log(np.exp(la).sum(-1, keepdims=True))
    lb = b - b.max(-1, keepdims=True)
    lb -= np.log(np.exp(lb).sum(-1, keepdims=True))
    return float(np.mean(np.sum(np.exp(la) * (la - lb), axis=-1)))


def variant_bundle(ckpt: Path, work: Path, name: str, label: str) -> Path:
    """The talker part of `ckpt` converted as `label` (a precision, or q8block: the legacy q8 format)."""
    if label == "q8":  # its own folder name: a q8 folder from before the int8 format holds the block format
        return talker_bundle(ckpt, work / f"talker-{name}-q8int8", label)
    if label != "q8block":
        return talker_bundle(ckpt, work / f"talker-{name}-{label}", label)
    old = talker_convert.Q8_FORMAT
    talker_convert.Q8_FORMAT = "block"
    try:
        return talker_bundle(ckpt, work / f"talker-{name}-q8block{talker_convert.Q8_BLOCK}", "q8")
    finally:
        talker_convert.Q8_FORMAT = old


def compare(name: str, ckpt: Path, work: Path, precisions: list[str], frames: int, threads: int) -> None:
    ref_bundle = Bundle.open(talker_bundle(ckpt, work / f"talker-{name}-fp32", "fp32"))
    greedy32 = run(ref_bundle, threads, frames, None)
    forced = greedy32["codes"]
    for prec in precisions:
        bundle = Bundle.open(variant_bundle(ckpt, work, name, prec))
        tf = run(bundle, threads, frames, forced)
        free = run(bundle, threads, frames, None)
        same = np.all(free["codes"] == forced, axis=1)
        first = int(np.argmin(same)) if not same.all() else None
        t_top1 = float(np.mean(tf["t_logits"].argmax(-1) == greedy32["t_logits"].argmax(-1)))
        c_top1 = float(np.mean(tf["c_logits"].argmax(-1) == greedy32["c_logits"].argmax(-1)))
        print(f"{name:10s} {prec:5s} talker: err {rel_err(tf['t_logits'], greedy32['t_logits']):.2e}, "
              f"top-1 {t_top1:.3f}, KL {mean_kl(greedy32['t_logits'], tf['t_logits']):.2e} | "
              f"code predictor: err {rel_err(tf['c_logits'], greedy32['c_logits']):.2e}, top-1 {c_top1:.3f}, "
              f"KL {mean_kl(greedy32['c_logits'], tf['c_logits']):.2e} | greedy frames equal "
              f"{int(same.sum())}/{frames}, first difference at frame {first}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", type=Path, action="append", default=[])
    ap.add_argument("--work", type=Path, default=WORK_DIR / "q8")
    ap.add_argument("--frames", type=int, default=50)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--precisions", default="q8")
    ap.add_argument("--q8-block", type=int, choices=[32, 64, 128], help="values per scale of q8block")
    args = ap.parse_args()
    if args.q8_block:
        talker_convert.Q8_BLOCK = args.q8_block
    models = [(p.name, p) for p in sorted(FIXTURES.iterdir()) if (p / "config.json").is_file()]
    models += [(p.name, p) for p in args.checkpoint]
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {args.frames} frames, "
          f"T={TEMPERATURE}, top-k {TOP_K}")
    for name, path in models:
        compare(name, path, args.work, args.precisions.split(","), args.frames, args.threads)


if __name__ == "__main__":
    main()
