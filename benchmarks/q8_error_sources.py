"""Where a q8 bundle's error comes from: each network's own 8-bit products, or the 8-bit talker's hidden state the
code predictor is fed (the figures in docs/performance.md, "The 8-bit check").

    python benchmarks/q8_error_sources.py --checkpoint DIR [--stress channels100] [--work DIR] [--frames 16]
        [--threads 2]

The checkpoint (or its stress copy from tools/outlier_checkpoint.py, made in --work) is converted three ways, talker
part only and without the check: fp32, q8, and q8 with the outlier channels the 8-bit check would split off
(engine/convert/q8_split.py: every Linear's, from the smoothing's calibration pass). Then the check's own
measurement (engine/convert/q8_check.py: its six prompts, fp32 greedy, the rest teacher-forced on fp32's codes,
sampling KL at T 0.9, top-k 50), with the talker of one bundle and the code predictor of another. A markdown table
closes the output. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine import convert_checkpoint, cpu_model, load_average  # noqa: E402
from engine.convert import q8_check, q8_split, smooth  # noqa: E402
from engine.convert.checkpoint import Checkpoint  # noqa: E402
from engine.nets.code_predictor import CodePredictor  # noqa: E402
from engine.nets.talker import Talker  # noqa: E402
from engine.runtime.bundle import Bundle  # noqa: E402
from tools.outlier_checkpoint import Stress, write_stress_checkpoint  # noqa: E402


def runs(talker_dir: Path, cp_dir: Path, prompts, pad, frames: int, forced, threads: int):
    """q8_check.run_prompts with the talker of one bundle and the code predictor of another."""
    talker, cp = Talker(Bundle.open(talker_dir), threads), CodePredictor(Bundle.open(cp_dir), threads)
    cb = cp.codebook_size
    out = []
    for p, rows in enumerate(prompts):
        seq, hidden, logits = talker.start(rows)
        codes = np.zeros((frames, cp.groups), np.int64)
        t_logits, c_logits = [], []
        for f in range(frames):
            t_logits.append(np.array(logits[:cb], np.float32))
            c0 = int(forced[p].codes[f, 0]) if forced else int(np.argmax(logits[:cb]))
            frame: list[np.ndarray] = []

            def choose(lg, g, f=f, p=p, frame=frame) -> int:
                frame.append(np.array(lg, np.float32))
                return int(forced[p].codes[f, g]) if forced else int(np.argmax(lg))

            codes[f, 0], codes[f, 1:] = c0, cp.predict(hidden, c0, choose)
            c_logits.append(np.stack(frame))
            if f < frames - 1:
                hidden, logits = talker.step(seq, cp.feedback(codes[f]) + pad)
        out.append(q8_check.PromptRun(codes, np.stack(t_logits), np.stack(c_logits), rows, np.zeros(1)))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", type=Path, required=True)
    ap.add_argument("--stress", default="", help="e.g. channels100 (tools/outlier_checkpoint.py MODE + factor)")
    ap.add_argument("--work", type=Path, default=None)
    ap.add_argument("--frames", type=int, default=q8_check.FRAMES)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    work = a.work or Path(tempfile.mkdtemp(prefix="q8-error-sources-"))
    src = a.checkpoint
    if a.stress:
        mode = a.stress.rstrip("0123456789.")
        src = work / f"ckpt-{a.stress}"
        if not src.exists():
            write_stress_checkpoint(a.checkpoint, src, Stress(mode, float(a.stress[len(mode):])))
    print(f"{cpu_model()}, load {load_average()}; {src}")
    ckpt = Checkpoint.open(src)
    try:
        _, prompts, pad = q8_check.calibration_prompts(ckpt)
        split = q8_split.outlier_channels(smooth.calibrate(ckpt), int(ckpt.talker_config.get("num_code_groups", 16)))
    finally:
        ckpt.close()
    t0 = time.perf_counter()
    dirs = {}
    for name, precision, parts in (("fp32", "fp32", None), ("q8", "q8", None), ("q8 split", "q8", split)):
        dirs[name] = work / name.replace(" ", "-")
        if not (dirs[name] / "manifest.json").is_file():
            convert_checkpoint(src, dirs[name], precision, parts=["talker"], check=False, split=parts, overwrite=True)
    print(f"converted in {time.perf_counter() - t0:.1f} s; {len(split)} Linears split, "
          f"{min(map(len, split.values()), default=0)}-{max(map(len, split.values()), default=0)} channels each")
    ref = runs(dirs["fp32"], dirs["fp32"], prompts, pad, a.frames, None, a.threads)
    rows = []
    for talker, cp in (("q8 split", "q8 split"), ("fp32", "q8 split"), ("q8 split", "fp32"), ("q8", "q8"), ("fp32", "q8")):
        fig = q8_check.compare(ref, runs(dirs[talker], dirs[cp], prompts, pad, a.frames, ref, a.threads))
        rows.append(f"| {talker} / {cp} | {fig['talker'][0]:.2e} ({fig['talker'][1]:.3f}) | "
                    f"{fig['code_predictor'][0]:.2e} ({fig['code_predictor'][1]:.3f}) |")
    print(f"\nload {load_average()}\n")
    print("| talker / code predictor | talker KL (top-1) | code predictor KL (top-1) |")
    print("|---|---|---|")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
