"""End-to-end streaming synthesis with the decoder on its own thread (overlap) and inline, alternating.

    python benchmarks/overlap.py --model BUNDLE [--frames 40] [--rounds 3] [--threads N] [--decoder-threads 1,2]

Each round runs one streamed synthesis (EOS ignored) with Synthesizer.overlap_decode on for each decoder thread
count of --decoder-threads, and one with it off (decoder at --threads), and prints the real-time factor and the
time to the first audio chunk, with the load average. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine import GenerationSettings, Synthesizer, Voice, load_average, run_synthesis  # noqa: E402

TEXT = "The quick brown fox jumps over the lazy dog, and then it runs far away."


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument("--frames", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int)
    ap.add_argument("--decoder-threads", default="", help="comma-separated counts for the overlap runs "
                    "(default: the synthesizer's)")
    a = ap.parse_args()
    synth = Synthesizer(a.model, a.threads)
    voice = Voice(xvector=np.random.default_rng(0).standard_normal(synth.hidden_size).astype(np.float32),
                  model_id=synth.model_id)
    settings = GenerationSettings(seed=0, max_frames=a.frames, ignore_eos=True, stream_audio=True)
    run_synthesis(synth.synthesize(TEXT, voice, "english", GenerationSettings(seed=0, max_frames=3)))  # warm-up
    print(f"{a.model}: {synth.threads} threads, {a.frames} frames; load average {load_average()}")
    counts = [int(n) for n in a.decoder_threads.split(",") if n] or [synth.decoder_threads]
    runs = [(True, n) for n in counts] + [(False, synth.threads)]
    for r in range(a.rounds):
        for overlap, dec_threads in runs:
            synth.overlap_decode = overlap
            synth.decoder_threads = dec_threads  # reloads the decoder when the count changes (not timed)
            tm = run_synthesis(synth.synthesize(TEXT, voice, "english", settings)).timings
            label = f"{'overlap' if overlap else 'inline '} decoder {dec_threads} thr"
            print(f"round {r + 1} {label}: RTF {tm.rtf:6.3f}, first audio "
                  f"{tm.first_audio:6.3f} s, decode {tm.decode / tm.frames * 1000:6.1f} ms/frame; "
                  f"load average {load_average()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
