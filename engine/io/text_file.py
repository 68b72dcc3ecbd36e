"""Text files the user gives us (a chapter for `--text-file`, a jobs file, the app's batch imports): one reader.

Accepted: UTF-8, UTF-8 with a byte-order mark (Windows Notepad's "UTF-8 with BOM") and UTF-16 with a byte-order
mark (Notepad's "Unicode"); the mark says which, so nothing is guessed. Anything else (Latin-1, Windows-1252,
UTF-16 without a mark, UTF-32, a binary file) is refused in plain words that say what to do: save it as UTF-8.
Guessing an 8-bit code page (chardet and the like) would read some files as the wrong letters without a word, so
it is never guessed: a file that is not UTF-8 raises NotUtf8Error, and a caller that has shown the user a preview
may read it again with the 8-bit encoding the user chose (decode_text's `encoding`).
"""

from __future__ import annotations

import codecs
import os
from pathlib import Path

from ..errors import NotUtf8Error, TextError
from .safefile import regular_file_problem

MAX_TEXT_FILE_BYTES = 16 * 1024 * 1024  # ~250 hours of speech; anything larger is not a text for this app

_SAVE_AS_UTF8 = "open it in a text editor and save it as UTF-8"


def decode_text(data: bytes, name: str, encoding: str | None = None) -> str:
    """The text of a file's bytes (see the module docstring); TextError naming `name` in plain words otherwise.
    Line endings are kept as they are (a CSV reader needs them). `encoding`: an 8-bit encoding the user chose for
    a file that is not UTF-8 ("cp1252", "latin-1"...)."""
    if encoding is not None:
        return _decode_chosen(data, name, encoding)
    if data.startswith((codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)):  # before UTF-16: FF FE starts both
        raise TextError(f"{name} is in UTF-32, which this app does not read; {_SAVE_AS_UTF8}.")
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        encoding = "utf-16"  # the mark says which byte order
    else:
        encoding = "utf-8-sig"  # a UTF-8 mark is dropped
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError:
        if encoding == "utf-16":
            raise TextError(f"{name} is damaged UTF-16 text (it ends in the middle of a character); "
                            f"{_SAVE_AS_UTF8}.") from None
        raise NotUtf8Error(f"{name} is not in UTF-8 (perhaps Latin-1 or Windows-1252); {_SAVE_AS_UTF8}.") from None
    if "\x00" in text:  # UTF-16 without its mark, or not text at all
        raise TextError(f"{name} is not plain UTF-8 text (it holds NUL characters); {_SAVE_AS_UTF8}.")
    return text


def _decode_chosen(data: bytes, name: str, encoding: str) -> str:
    try:
        text = data.decode(encoding)
    except LookupError:
        raise TextError(f"{encoding!r} is not a text encoding this app knows.") from None
    except UnicodeDecodeError as e:
        raise TextError(f"{name} is not {encoding} text either (byte {e.start} cannot be read); "
                        f"{_SAVE_AS_UTF8}.") from None
    if "\x00" in text:
        raise TextError(f"{name} is not plain text (it holds NUL characters); {_SAVE_AS_UTF8}.")
    return text


def read_text_file(path: str | os.PathLike) -> str:
    """A text file as str (see decode_text). Raises TextError with one line on any problem: missing, not a
    regular file (a FIFO would block the read forever), larger than MAX_TEXT_FILE_BYTES, not UTF-8 or UTF-16."""
    path = Path(path)
    problem = regular_file_problem(path, "text file")
    if problem:
        raise TextError(problem)
    try:
        size = path.stat().st_size
        if size > MAX_TEXT_FILE_BYTES:
            raise TextError(f"{path.name} is {size / 2**20:.0f} MB; a text file can be at most "
                            f"{MAX_TEXT_FILE_BYTES // 2**20} MB.")
        data = path.read_bytes()
    except FileNotFoundError:
        raise TextError(f"The text file {path} does not exist.") from None
    except OSError as e:
        raise TextError(f"Cannot read {path}: {e.strerror or e}.") from None
    return decode_text(data, path.name)
