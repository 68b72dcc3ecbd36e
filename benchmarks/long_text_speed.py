"""Long text: one chunk after the other against chunks side by side (synthesize_many). Figures only.

    python benchmarks/long_text_speed.py --model BUNDLE [--chunks 8] [--batch-sizes 1,4] [--rounds 2]
                                         [--decoder-precision fp32|bf16|auto]

Each round runs every batch size once, alternating (the machine is shared: compare within a round), on the same
text, seed and per-chunk frame cap, and checks the recordings are identical. Prints wall time, real-time factor
and the time to the first chunk of audio.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from engine import (
    DECODER_PRECISIONS,
    DEFAULT_DECODER_PRECISION,
    ChunkAudio,
    GenerationSettings,
    LongTextOptions,
    SynthesisRequest,
    Synthesizer,
    Voice,
)

SENTENCES = [
    "The river ran quietly past the old mill, where nobody had worked for years.",
    "Every morning the baker opened his shutters and looked out at the square.",
    "She wrote a letter to her brother, who lived far away by the sea.",
    "In the evening the wind turned, and the first drops of rain began to fall.",
]


def run(synth: Synthesizer, text: str, voice: Voice, batch_size: int, frames: int) -> tuple[float, float, np.ndarray]:
    options = LongTextOptions(max_chars=80, batch_size=batch_size)
    settings = GenerationSettings(seed=1, max_frames=frames)
    t0 = time.perf_counter()
    first, pieces = None, []
    for ev in synth.speak(SynthesisRequest(text, voice, "english", settings, options=options)):
        if isinstance(ev, ChunkAudio):
            first = first if first is not None else time.perf_counter() - t0
            pieces.append(ev.samples)
    return time.perf_counter() - t0, first or 0.0, np.concatenate(pieces)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True)
    p.add_argument("--chunks", type=int, default=8)
    p.add_argument("--frames", type=int, default=40, help="frames per chunk at most (the demo model stops at random)")
    p.add_argument("--batch-sizes", default="1,4")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--decoder-precision", default=DEFAULT_DECODER_PRECISION, choices=DECODER_PRECISIONS)
    args = p.parse_args()
    synth = Synthesizer(args.model, decoder_precision=args.decoder_precision,
                        **({"threads": args.threads} if args.threads else {}))
    voice = Voice(xvector=np.random.default_rng(0).standard_normal(synth.hidden_size).astype(np.float32),
                  model_id=synth.model_id)
    text = " ".join(SENTENCES[i % len(SENTENCES)] for i in range(args.chunks))
    sizes = [int(s) for s in args.batch_sizes.split(",")]
    print(f"bundle {args.model}: {args.chunks} chunks, at most {args.frames} frames each, batch sizes {sizes}, "
          f"speech decoder {synth.decoder_precision}, {synth.threads} threads")
    reference = None
    for r in range(args.rounds):
        for size in sizes:
            wall, first, audio = run(synth, text, voice, size, args.frames)
            same = reference is None or np.array_equal(audio, reference)
            reference = audio if reference is None else reference
            seconds = len(audio) / 24000
            print(f"round {r + 1}  batch {size}: {wall:6.1f} s for {seconds:5.1f} s of audio (RTF {wall / seconds:.2f}), "
                  f"first chunk after {first:5.1f} s, recording {'identical' if same else 'DIFFERENT'}")


if __name__ == "__main__":
    main()
