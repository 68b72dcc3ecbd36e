"""Batch lines as plain data: parsing pasted text / .txt / .csv, and the numbered output file names."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from .paths import readable_name

MERGED_NAME = "all lines (merged).wav"


class LineState(StrEnum):
    """Where a batch line is in its run (a str: compares equal to its value, e.g. "done")."""

    READY = "ready"
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


STATE_TEXT = {LineState.READY: "Ready", LineState.QUEUED: "Waiting", LineState.DONE: "Done",
              LineState.CANCELLED: "Cancelled"}


@dataclass
class BatchLine:
    key: int  # stable id while lines are reordered
    text: str
    voice: str = ""  # a voice name from the library; "" = the voice selected in the voice panel
    language: str = "auto"
    instruct: str = ""  # a style instruction (CustomVoice 1.7B); "" = the instruction on the Studio tab
    state: LineState = LineState.READY
    frames: int = 0
    estimated: int = 0
    duration: float | None = None
    output: str = ""
    error: str = ""

    def status_text(self) -> str:
        if self.state == LineState.RUNNING:
            return f"Generating {self.frames}/{max(self.estimated, self.frames)}" if self.frames else "Starting…"
        if self.state == LineState.FAILED:
            return f"Failed: {self.error}"
        return STATE_TEXT[self.state]

    def reset(self) -> None:
        self.state, self.frames, self.estimated, self.error = LineState.READY, 0, 0, ""


def output_name(number: int, text: str) -> str:
    """'007 - Hello there.wav': sorts in line order and says what is in it."""
    return f"{number:03d} - {readable_name(text)}.wav"


Row = tuple[str, str, str, str]  # text, voice, language, instruction ("" = the defaults)
COLUMN_NAMES = {"text": ("text",), "voice": ("voice", "speaker"), "language": ("language",),
                "instruct": ("instruction", "instruct", "style")}


def parse_pasted(text: str) -> list[Row]:
    """One line per non-empty line; tab-separated 'text<TAB>voice<TAB>language<TAB>instruction' (from a
    spreadsheet) works too."""
    rows = []
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = [p.strip() for p in line.split("\t")] if "\t" in line else [line.strip()]
        rows.append(_row(parts))
    return rows


def parse_csv(text: str) -> list[Row]:
    """Columns text[, voice[, language[, instruction]]]; a header row naming them may come first (in any order;
    "speaker" for voice and "style" or "instruct" for instruction are understood too)."""
    try:
        dialect = csv.Sniffer().sniff(text[:4096], delimiters=",;\t")
    except csv.Error:
        dialect = csv.excel
    rows = [r for r in csv.reader(io.StringIO(text), dialect) if any(c.strip() for c in r)]
    if not rows:
        return []
    header = [c.strip().lower() for c in rows[0]]
    if "text" in header:
        idx = {name: next((header.index(a) for a in aliases if a in header), None)
               for name, aliases in COLUMN_NAMES.items()}
        out = []
        for r in rows[1:]:
            def get(name: str, r: list[str] = r) -> str:
                i = idx[name]
                return r[i].strip() if i is not None and i < len(r) else ""
            if get("text"):
                out.append((get("text"), get("voice"), (get("language") or "auto").lower(), get("instruct")))
        return out
    return [_row([c.strip() for c in r]) for r in rows if r and r[0].strip()]


def _row(parts: list[str]) -> Row:
    text = parts[0]
    voice = parts[1] if len(parts) > 1 else ""
    language = (parts[2] if len(parts) > 2 else "") or "auto"
    instruct = parts[3] if len(parts) > 3 else ""
    return text, voice, language.lower(), instruct


def read_lines_file(path: Path) -> list[Row]:
    """A .csv (columns) or any text file (one line each). Raises ValueError with a one-line reason."""
    text = _read_text(path)
    rows = parse_csv(text) if Path(path).suffix.lower() == ".csv" else parse_pasted(text)
    if not rows:
        raise ValueError(f"{Path(path).name} has no lines to speak")
    return rows


def read_long_text(path: Path) -> Row:
    """The whole file as one item (a chapter: spoken in chunks, one output file)."""
    text = _read_text(path).strip()
    if not text:
        raise ValueError(f"{Path(path).name} has no text to speak")
    return text, "", "auto", ""


def _read_text(path: Path) -> str:
    try:
        raw = Path(path).read_bytes()
    except OSError as e:
        raise ValueError(f"cannot read {Path(path).name}: {e.strerror}") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ValueError(f"{Path(path).name} is not UTF-8 text") from None
    if "\x00" in text:
        raise ValueError(f"{Path(path).name} is not a text file")
    return text
