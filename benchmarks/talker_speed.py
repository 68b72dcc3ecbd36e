"""Talker + code predictor speed per precision on a full-size random checkpoint (numpy + ncnn only).

    flock /tmp/fullsize.lock .venv/bin/python benchmarks/talker_speed.py [--checkpoint DIR] [--work DIR]
        [--frames 40] [--threads 2] [--precisions fp32,fp16,bf16] [--preset 0.6b]

Without --checkpoint a random checkpoint of the preset is written once into --work (tools/random_checkpoint/; bf16 weights like
the real checkpoints). Each precision is converted once (talker part only) into --work and reused. Prints ms per
talker step, per code-predictor frame (15 codes), per feedback sum and per whole frame, and for every other variant
the logit error against fp32 on the same teacher-forced sequence (codes from the fp32 greedy run).
Variant "fp32-wide" is the fp32 bundle with its (lossless) fp16-stored weights widened to fp32 at load.
Note: on a loaded machine ncnn's OpenMP threads spin at barriers and 2 threads can be far slower than 1; the load
average is printed with the results. With --threads 1 the CPU time per frame is printed too (compute time without
the waits for other processes; memory-bandwidth contention still counts).
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_env import WORK_DIR  # noqa: E402

from engine import convert_checkpoint  # noqa: E402
from engine.nets.code_predictor import CodePredictor  # noqa: E402
from engine.nets.talker import Talker  # noqa: E402
from engine.runtime.bundle import Bundle  # noqa: E402

OFFICIAL_MS_PER_FRAME = 457.0  # official qwen-tts, 0.6B, 2 threads, AMD EPYC 2 cores, quiet


def talker_bundle(ckpt_dir: Path, dest: Path, precision: str) -> Path:
    if (dest / "manifest.json").is_file():
        return dest
    t0 = time.perf_counter()
    convert_checkpoint(ckpt_dir, dest, precision, overwrite=True, parts=["talker"])
    print(f"converted {precision} in {time.perf_counter() - t0:.1f} s -> {dest}", flush=True)
    return dest


def run(bundle: Bundle, threads: int, frames: int, forced: np.ndarray | None, compact: bool = True):
    """Greedy loop (or teacher-forced on `forced` codes). Returns timings, codes and all logits."""
    t0 = time.perf_counter()
    talker = Talker(bundle, threads, compact_weights=compact)
    cp = CodePredictor(bundle, threads, compact_weights=compact)
    load_s = time.perf_counter() - t0
    cb = cp.codebook_size
    text = talker.codec_rows(np.arange(12) + cb) * 0.5  # deterministic stand-in prompt rows
    pad = talker.codec_rows([cb + 100])[0] * 0.5
    seq, hidden, logits = talker.start(text)
    codes = np.zeros((frames, cp.groups), np.int64)
    t_logits, c_logits = [], []
    t_step, t_cp, t_fb, cpu = [], [], [], []
    for f in range(frames):
        c_start = time.thread_time()
        t_logits.append(logits[:cb].copy())
        c0 = int(forced[f, 0]) if forced is not None else int(np.argmax(logits[:cb]))
        frame_logits = []

        def choose(lg: np.ndarray, g: int, _f=f, _fl=frame_logits) -> int:
            _fl.append(lg.copy())
            return int(forced[_f, g]) if forced is not None else int(np.argmax(lg))

        t = time.perf_counter()
        rest = cp.predict(hidden, c0, choose)
        t_cp.append(time.perf_counter() - t)
        c_logits.append(np.stack(frame_logits))
        codes[f, 0], codes[f, 1:] = c0, rest
        t = time.perf_counter()
        row = cp.feedback(codes[f]) + pad
        t_fb.append(time.perf_counter() - t)
        t = time.perf_counter()
        hidden, logits = talker.step(seq, row)
        t_step.append(time.perf_counter() - t)
        cpu.append(time.thread_time() - c_start)
    return dict(load_s=load_s, step=np.array(t_step), cp=np.array(t_cp), fb=np.array(t_fb), cpu=np.array(cpu),
                codes=codes,
                t_logits=np.stack(t_logits), c_logits=np.stack(c_logits))


def rel_err(a: np.ndarray, ref: np.ndarray) -> float:
    return float(np.max(np.abs(a - ref)) / np.max(np.abs(ref)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", type=Path)
    ap.add_argument("--work", type=Path, default=WORK_DIR)
    ap.add_argument("--preset", default="0.6b")
    ap.add_argument("--frames", type=int, default=40)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--precisions", default="fp32,fp32-wide,fp16,bf16")
    args = ap.parse_args()

    ckpt_dir = args.checkpoint
    if ckpt_dir is None:
        ckpt_dir = args.work / f"ckpt-{args.preset}"
        if not (ckpt_dir / "config.json").is_file():
            from tools.random_checkpoint import write_random_checkpoint

            t0 = time.perf_counter()
            write_random_checkpoint(ckpt_dir, args.preset, seed=0, overwrite=True)
            print(f"wrote random {args.preset} checkpoint in {time.perf_counter() - t0:.1f} s", flush=True)

    precisions = args.precisions.split(",")
    if "fp32" in precisions:  # the reference for the error figures runs first
        precisions.remove("fp32")
        precisions.insert(0, "fp32")
    ref = None
    rows = []
    for prec in precisions:
        base = prec.split("-")[0]
        bdir = talker_bundle(ckpt_dir, args.work / f"talker-{args.preset}-{base}", base)
        bundle = Bundle.open(bdir)
        r = run(bundle, args.threads, args.frames, ref["codes"] if ref is not None else None, prec != "fp32-wide")
        skip = min(3, args.frames - 1)  # warm-up frames
        step, cp, fb = (r[k][skip:].mean() * 1000 for k in ("step", "cp", "fb"))
        frame = step + cp + fb
        best = float(np.min((r["step"] + r["cp"] + r["fb"])[skip:]) * 1000)  # least disturbed frame
        line = (f"{prec:9s}: talker step {step:6.1f} ms | code predictor {cp:6.1f} ms/frame | feedback {fb:5.2f} ms | "
                f"frame mean {frame:6.1f} ms, best {best:6.1f} ms ({OFFICIAL_MS_PER_FRAME / frame:.2f}x / "
                f"{OFFICIAL_MS_PER_FRAME / best:.2f}x official {OFFICIAL_MS_PER_FRAME:.0f}) | load {r['load_s']:.1f} s")
        if args.threads == 1:  # CPU time of the calling thread = compute time without waits for other processes
            line += f"\n      CPU time per frame {r['cpu'][skip:].mean() * 1000:6.1f} ms (1 thread)"
        if ref is None and prec == "fp32":
            ref = r
        elif ref is not None:
            te, ce = rel_err(r["t_logits"], ref["t_logits"]), rel_err(r["c_logits"], ref["c_logits"])
            agree_t = float(np.mean(r["t_logits"].argmax(-1) == ref["t_logits"].argmax(-1)))
            agree_c = float(np.mean(r["c_logits"].argmax(-1) == ref["c_logits"].argmax(-1)))
            line += (f"\n      logits vs fp32 (teacher-forced): talker max err {te:.2e} of scale, argmax agree "
                     f"{agree_t:.3f}; code predictor {ce:.2e}, argmax agree {agree_c:.3f}")
        print(line, flush=True)
        rows.append(line)
        del r, bundle
        gc.collect()
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB; "
          f"{args.frames} frames, {args.threads} threads, preset {args.preset}; load average {load}")


if __name__ == "__main__":
    main()
