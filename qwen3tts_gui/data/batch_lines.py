"""Batch lines as plain data: parsing pasted text / .txt / .csv, and the numbered output file names."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from ..engine_adapter import MAX_TEXT_FILE_BYTES, NotUtf8Error, TextError, decode_text
from .paths import readable_name
from .user_files import UnusableFile, read_regular

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


MAX_LINES = 10_000  # a batch of 10,000 lines is many hours of speech; a larger file is not a batch
MAX_FILE_BYTES = MAX_TEXT_FILE_BYTES  # 16 MB of text: far more than 10,000 lines; a larger file is refused unread


def parse_pasted(text: str) -> list[Row]:
    """One line per non-empty line; tab-separated 'text<TAB>voice<TAB>language<TAB>instruction' (from a
    spreadsheet) works too. Raises ValueError past MAX_LINES."""
    return _pasted_rows(text.splitlines())


def _pasted_rows(lines) -> list[Row]:
    rows = []
    for line in lines:
        if not line.strip():
            continue
        if "\x00" in line:
            raise ValueError("it is not a text file")
        parts = [p.strip() for p in line.split("\t")] if "\t" in line else [line.strip()]
        rows.append(_row(parts))
        _check_count(rows)
    return rows


def parse_csv(text: str) -> list[Row]:
    """Columns text[, voice[, language[, instruction]]]; a header row naming them may come first (in any order;
    "speaker" for voice and "style" or "instruct" for instruction are understood too). Raises ValueError naming
    the line of a quote that is not closed (it would merge the rows after it into one) and past MAX_LINES."""
    return _csv_rows(io.StringIO(text, newline=""))


def _csv_rows(stream: io.TextIOBase) -> list[Row]:
    sample = stream.read(4096)
    stream.seek(0)
    try:  # only the delimiter is guessed: the sniffer's other guesses (doublequote off) let broken quotes pass
        delimiter = csv.Sniffer().sniff(sample, delimiters=",;\t").delimiter
    except csv.Error:
        delimiter = ","
    reader = csv.reader(stream, csv.excel, delimiter=delimiter, strict=True)
    rows: list[list[str]] = []
    line = 1
    def open_quote() -> ValueError:
        return ValueError(f"line {line}: a quote is not closed on its line, so lines {line} to {reader.line_num} "
                          "would become one; close the quote (or double it: \"\") and import again")

    try:
        for record in reader:
            # a text spread over several lines is a quote left open: the rows after it would become one
            if reader.line_num > line and any("\n" in c or "\r" in c for c in record):
                raise open_quote()
            line = reader.line_num + 1
            if any(c.strip() for c in record):
                if any("\x00" in c for c in record):
                    raise ValueError("it is not a text file")
                rows.append(record)
                _check_count(rows)
    except csv.Error as e:
        if reader.line_num > line:  # the file ended inside a quote
            raise open_quote() from None
        raise ValueError(f"line {reader.line_num}: {e}; check the quotes on that line") from None
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


def _check_count(rows: list) -> None:
    if len(rows) > MAX_LINES + 1:  # one more: a header row
        raise ValueError(f"it has more than {MAX_LINES:,} lines; split it into smaller files")


def _row(parts: list[str]) -> Row:
    text = parts[0]
    voice = parts[1] if len(parts) > 1 else ""
    language = (parts[2] if len(parts) > 2 else "") or "auto"
    instruct = parts[3] if len(parts) > 3 else ""
    return text, voice, language.lower(), instruct


class NotUtf8(ValueError):
    """The file is in an 8-bit code page: read_lines_file / read_long_text with the encoding the user chose."""


def read_lines_file(path: Path, encoding: str | None = None) -> list[Row]:
    """A .csv (columns) or any text file (one line each): a file larger than MAX_FILE_BYTES, or one that is not
    a regular file (a FIFO, /dev/zero), is refused before anything is read. UTF-8 or UTF-16 with its mark (the
    engine's one text reader). Raises ValueError with a one-line reason."""
    path = Path(path)
    f = _open_text(path, encoding)
    try:
        rows = _csv_rows(f) if path.suffix.lower() == ".csv" else _pasted_rows(f)
    except ValueError as e:
        raise ValueError(f"{path.name}, {e}") from None
    if not rows:
        raise ValueError(f"{path.name} has no lines to speak")
    return rows


def read_long_text(path: Path, encoding: str | None = None) -> Row:
    """The whole file as one item (a chapter: spoken in chunks, one output file)."""
    text = _open_text(path, encoding).read().strip()
    if not text:
        raise ValueError(f"{Path(path).name} has no text to speak")
    return text, "", "auto", ""


def preview(path: Path, encoding: str, lines: int = 6) -> str:
    """The first lines of a file read with `encoding` (undecodable bytes shown as �), for the user to judge."""
    data = _read(path)
    shown = [line for line in data.decode(encoding, errors="replace").splitlines() if line.strip()][:lines]
    return "\n".join(line if len(line) <= 80 else line[:79] + "…" for line in shown)


def _read(path: Path) -> bytes:
    try:
        return read_regular(Path(path), MAX_FILE_BYTES)
    except FileNotFoundError:
        raise ValueError(f"{Path(path).name} does not exist") from None
    except UnusableFile as e:
        raise ValueError(f"{Path(path).name} cannot be imported: {e}") from None


def _open_text(path: Path, encoding: str | None = None) -> io.StringIO:
    """A regular file of at most MAX_FILE_BYTES, decoded as the engine decodes every text file the user gives."""
    data = _read(path)
    try:  # line endings as in the file: csv
        return io.StringIO(decode_text(data, Path(path).name, encoding), newline="")
    except NotUtf8Error as e:
        raise NotUtf8(str(e).rstrip(".")) from None
    except TextError as e:
        raise ValueError(str(e).rstrip(".")) from None
