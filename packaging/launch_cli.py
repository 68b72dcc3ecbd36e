"""Entry point of the bundled `qwen3tts` command."""

import sys

from qwen3tts_cli.main import main

if __name__ == "__main__":
    sys.exit(main())
