"""python -m tools.random_checkpoint [DEST]: regenerate the demo checkpoint the app ships (cli.py)."""

from .cli import main

raise SystemExit(main())
