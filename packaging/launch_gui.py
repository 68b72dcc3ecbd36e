"""Entry point of the bundled desktop app. `--self-test` runs the installation check instead of the window."""

import multiprocessing
import sys

if __name__ == "__main__":
    # the self-tuner times OpenMP spin counts in processes of their own (multiprocessing's spawn start): in the
    # frozen app such a process is this executable again, which freeze_support turns into the worker
    multiprocessing.freeze_support()
    if "--self-test" in sys.argv[1:]:
        from packaging_self_test import main as self_test

        raise SystemExit(self_test())
    from qwen3tts_gui.app import main

    raise SystemExit(main())
