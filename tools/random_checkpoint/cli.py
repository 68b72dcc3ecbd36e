"""The command line: python -m tools.random_checkpoint [DEST] regenerates the demo checkpoint the app ships."""

from __future__ import annotations

from pathlib import Path

from .checkpoint import write_random_checkpoint
from .presets import DEMO_CHECKPOINT, DEMO_SEED


def main(argv: list[str] | None = None) -> int:
    """Regenerate the demo checkpoint the app ships: python -m tools.random_checkpoint [DEST]."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m tools.random_checkpoint", description=main.__doc__)
    ap.add_argument("dest", type=Path, nargs="?", default=DEMO_CHECKPOINT)
    args = ap.parse_args(argv)
    out = write_random_checkpoint(args.dest, "demo", seed=DEMO_SEED, overwrite=True)
    print(f"wrote {out}")
    return 0

