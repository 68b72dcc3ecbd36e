"""Write a random-weight Qwen3-TTS 12 Hz Base checkpoint (hub layout) with numpy + safetensors only.

    python benchmarks/make_checkpoint.py DEST --preset 0.6b [--seed 0] [--dtype bf16|fp32] [--force]

Presets: demo (tiny), 0.6b and 1.7b (real shapes and tensor names; the official loader accepts them). Full-size
presets stream to disk (about 2.2 GB for 0.6b in bf16, 4.3 GB in fp32); wrap them in `flock /tmp/fullsize.lock`.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine import EngineError  # noqa: E402
from qwen3tts_cli.common import ProgressBar  # noqa: E402
from tools.random_checkpoint import PRESETS, write_random_checkpoint  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dest", type=Path, help="checkpoint folder to create")
    ap.add_argument("--preset", choices=list(PRESETS), default="0.6b")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dtype", choices=["bf16", "fp32"], help="model.safetensors storage (default: the preset's)")
    ap.add_argument("--force", action="store_true", help="replace an existing folder at DEST")
    a = ap.parse_args(argv)
    bar = ProgressBar(f"checkpoint {a.preset}")
    t0 = time.monotonic()
    try:
        out = write_random_checkpoint(a.dest, a.preset, seed=a.seed, progress=bar.update, dtype=a.dtype,
                                      overwrite=a.force)
    except EngineError as e:
        print(f"make_checkpoint: {e}", file=sys.stderr)
        return 2
    size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    bar.done(f"wrote {out} ({a.preset}, seed {a.seed}, {size / 1e9:.2f} GB) in {time.monotonic() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
