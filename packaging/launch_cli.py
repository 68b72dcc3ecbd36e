"""Entry point of the bundled `qwen3tts` command."""

import multiprocessing
import sys

from qwen3tts_cli.main import main

if __name__ == "__main__":
    multiprocessing.freeze_support()  # the self-tuner's spin count processes (see launch_gui.py)
    sys.exit(main())
