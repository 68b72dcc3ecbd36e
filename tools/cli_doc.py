"""Write docs/cli.md from the real `qwen3tts ... --help` texts, so the reference never drifts from the command.

    python tools/cli_doc.py            # rewrite docs/cli.md
    python tools/cli_doc.py --check    # exit 1 when docs/cli.md differs from what the command prints

The command's parser comes from the console script named in pyproject.toml ([project.scripts] qwen3tts), so the
page follows the command wherever its module lives. Help is formatted at a fixed width (COLUMNS) so the page is
the same on every terminal.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "cli.md"
WIDTH = "100"

INTRO = """# The `qwen3tts` command

Every command of the command-line tool, with its `--help` text as the tool prints it. This page is generated
by `python tools/cli_doc.py` from the command itself (a test fails when the two differ).

From a checkout, `./qwen3tts.sh ARGS` runs the command (it sets up `.venv` on first use); after
`source .venv/bin/activate`, or from the `.deb` / `.tar.gz`, it is `qwen3tts ARGS`. `--model` takes an installed
model's name (`qwen3tts models list`) or a model folder. Errors are one line on stderr and a non-zero exit status.
"""


def build_parser() -> argparse.ArgumentParser:
    """The parser of the `qwen3tts` console script."""
    target = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]["qwen3tts"]
    module = importlib.import_module(target.split(":")[0])
    return module.build_parser()


def _subcommands(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    for action in parser._actions:  # argparse offers no public walk over sub-commands
        if isinstance(action, argparse._SubParsersAction):
            yield from action.choices.items()


def _walk(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], str]]:
    yield path, parser.format_help()
    for name, sub in _subcommands(parser):
        yield from _walk(sub, (*path, name))


def render() -> str:
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH
    try:
        pages = list(_walk(build_parser()))
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old
    out = [INTRO]
    for path, text in pages:
        title = " ".join(("qwen3tts", *path))
        out.append(f"## `{title}`\n\n```\n{text.rstrip()}\n```\n")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="compare instead of writing")
    args = p.parse_args(argv)
    text = render()
    if args.check:
        current = DOC.read_text(encoding="utf-8") if DOC.is_file() else ""
        if current != text:
            print(f"{DOC.relative_to(ROOT)} is out of date: run python tools/cli_doc.py", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(text, encoding="utf-8")
    print(f"wrote {DOC.relative_to(ROOT)} ({len(pages_of(text))} commands)")
    return 0


def pages_of(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("## `qwen3tts")]


if __name__ == "__main__":
    raise SystemExit(main())
