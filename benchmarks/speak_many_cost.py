"""The batch door against its primitive: short lines through Synthesizer.speak_many (what the app's batch panel,
`qwen3tts batch` and the server's side-by-side path use) and through synthesize_many directly (what they used
before), at one batch size, each going first in every other round. Figures only; checks that every line's codes are the
same both ways.

    python benchmarks/speak_many_cost.py --model BUNDLE [--lines 8] [--frames 30] [--batch-size 4] [--rounds 2]
                                         [--threads 2]

Each line is sampled with a seed of its own and capped at --frames, codes only (no decoding: the figures are the
generation and the door's own cost). At most 37 frames: the runaway guard judges a loop or silence over 4 s
(50 frames) and a line running past its text far later, so below that it never steps in and both ways do the
same work. Prints the load average: compare within a round on a shared machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine import (  # noqa: E402
    GenerationSettings,
    SynthesisRequest,
    SynthesisResult,
    Synthesizer,
    Voice,
    cpu_model,
    run_speeches,
)
from engine.types import SynthesisJob  # noqa: E402

TEXTS = [
    "Hello there.",
    "The weather is fine today.",
    "Please leave the parcel at the door, thank you.",
    "A short line.",
    "Trains to the airport leave every twenty minutes.",
    "Yes.",
    "She sells sea shells by the sea shore.",
    "Good night, and see you tomorrow morning.",
]
MOST_FRAMES = 37  # below the runaway guard's shortest window (engine/longform/runaway.py): it never steps in


def through_the_door(synth: Synthesizer, voice: Voice, texts: list[str], frames: int,
                     batch_size: int) -> tuple[float, list[np.ndarray]]:
    requests = [SynthesisRequest(t, voice, "english", GenerationSettings(seed=100 + i, max_frames=frames,
                                                                        codes_only=True))
                for i, t in enumerate(texts)]
    codes: dict[int, np.ndarray] = {}
    t0 = time.perf_counter()
    outcomes = run_speeches(synth.speak_many(requests, batch_size=batch_size, longest_first=True),
                            on_audio=lambda i, ev: codes.__setitem__(i, ev.result.codes))
    wall = time.perf_counter() - t0
    failed = {i: o for i, o in outcomes.items() if isinstance(o, Exception)}
    if failed:
        raise SystemExit(f"speak_many: lines failed: {failed}")
    return wall, [codes[i] for i in range(len(texts))]


def through_the_primitive(synth: Synthesizer, voice: Voice, texts: list[str], frames: int,
                          batch_size: int) -> tuple[float, list[np.ndarray]]:
    jobs = [SynthesisJob(t, voice, "english", max_frames=frames, seed=100 + i) for i, t in enumerate(texts)]
    codes: dict[int, np.ndarray] = {}
    t0 = time.perf_counter()
    for ev in synth.synthesize_many(jobs, GenerationSettings(codes_only=True), batch_size=batch_size,
                                    longest_first=True):
        if ev.error is not None:
            raise SystemExit(f"synthesize_many: job {ev.job} failed: {ev.error}")
        if isinstance(ev.event, SynthesisResult):
            codes[ev.job] = ev.event.codes
    return time.perf_counter() - t0, [codes[i] for i in range(len(texts))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument("--lines", type=int, default=len(TEXTS))
    ap.add_argument("--frames", type=int, default=30, help=f"frame cap per line (at most {MOST_FRAMES})")
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    if not 1 <= args.frames <= MOST_FRAMES:
        raise SystemExit(f"--frames must be from 1 to {MOST_FRAMES}, not {args.frames}")
    texts = TEXTS[:max(1, args.lines)]
    synth = Synthesizer(args.model, threads=args.threads)
    voice = Voice(xvector=np.random.default_rng(0).standard_normal(synth.hidden_size).astype(np.float32) * 0.05,
                  model_id=synth.model_id)
    through_the_primitive(synth, voice, texts[:2], 2, 2)  # warm-up (first calls allocate)
    print(f"{args.model.name} ({synth.precision}), {cpu_model()}, {args.threads} threads, {len(texts)} lines of at "
          f"most {args.frames} frames, batch size {args.batch_size}, load average {os.getloadavg()[0]:.1f}")
    ratios = []
    for r in range(1, args.rounds + 1):
        ways = [through_the_door, through_the_primitive]
        if r % 2 == 0:  # each goes first in every other round: neither always runs after the other
            ways.reverse()
        timed = {way: way(synth, voice, texts, args.frames, args.batch_size) for way in ways}
        (door, door_codes), (primitive, primitive_codes) = timed[through_the_door], timed[through_the_primitive]
        same = all(np.array_equal(a, b) for a, b in zip(door_codes, primitive_codes, strict=True))
        ratios.append(door / primitive)
        first = "speak_many" if ways[0] is through_the_door else "synthesize_many"
        print(f"round {r} speak_many {door:.2f} s, synthesize_many {primitive:.2f} s, ratio {door / primitive:.3f}, "
              f"codes {'identical' if same else 'DIFFER'} ({first} first)", flush=True)
    print(f"speak_many / synthesize_many: median {statistics.median(ratios):.3f}x over {len(ratios)} round(s); "
          f"load average after {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
