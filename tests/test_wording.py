"""The repository speaks of the product: no code, test or document refers to work sessions, tickets by number, or
the people who wrote it. Such notes age badly; what the code does and why, and the measurement behind a choice, do
not."""

from __future__ import annotations

import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SUFFIXES = {".py", ".md", ".sh", ".spec", ".iss", ".toml"}
SKIP_DIRS = {".git", "build", "dist", "bench-out", "__pycache__", ".pytest_cache", ".ruff_cache", "fixtures"}
# (the first letter of each word in brackets keeps this file itself out of a plain grep for the same words)
WORK_NOTES = re.compile(
    r"\b[s]essions? \d+|\b[s]ession-\d+|\b[i]ssues? \d+|\b[i]ssue #\d+|\bthe [l]ead\b|\b[l]ead's\b|"
    r"\b[o]ther engineers\b|\b[a]nother engineer\b|\b[s]cratch (?:script|version|profile|folder)s?\b",
    re.IGNORECASE,
)


def _skipped(name: str) -> bool:
    return name in SKIP_DIRS or name.startswith(".venv") or name.endswith(".egg-info")


def _files() -> list[Path]:
    out = []
    for folder, dirs, names in os.walk(ROOT):
        dirs[:] = [d for d in dirs if not _skipped(d)]  # never descend into environments or build output
        out += [Path(folder, n) for n in names if Path(n).suffix in SUFFIXES]
    return out


def test_pattern_catches_work_notes() -> None:
    notes = [("sess", "ion 5's quiet run"), ("Iss", "ue 10 asks"), ("the le", "ad's kernel test"),
             ("other engin", "eers' jobs"), ("a scra", "tch script"), ("see iss", "ue #16")]
    for note in ("".join(parts) for parts in notes):
        assert WORK_NOTES.search(note), note
    for fine in ("once per test session", "pytest's session scope", "leading silence", "lead_in", "an issue tracker"):
        assert not WORK_NOTES.search(fine), fine


def test_no_work_notes_in_the_repository() -> None:
    files = _files()
    assert any(p.name == "README.md" for p in files)
    hits = []
    for path in files:
        if path == Path(__file__).resolve():
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if WORK_NOTES.search(line):
                hits.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:100]}")
    assert hits == [], "say what the code does and why instead:\n" + "\n".join(hits)
