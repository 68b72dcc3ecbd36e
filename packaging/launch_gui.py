"""Entry point of the bundled desktop app. `--self-test` runs the installation check instead of the window."""

import sys

if __name__ == "__main__":
    if "--self-test" in sys.argv[1:]:
        from packaging_self_test import main as self_test

        raise SystemExit(self_test())
    from qwen3tts_gui.app import main

    raise SystemExit(main())
