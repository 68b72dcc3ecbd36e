"""The Studio text box's text, kept between starts in a file of its own: <data>/text.txt.

It used to live in the settings file, which Qt reads whole before the window opens: a 10 MB text delayed the
start by about 39 s. The file's size is checked before it is read; a text larger than the text box takes is
left in a file beside it and named, never loaded and never overwritten.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..engine_adapter import os_reason, write_own_file
from .settings import Settings
from .user_files import UnusableFile, read_regular, set_aside

TEXT_FILE = "text.txt"
MAX_CHARS = 1_000_000  # about 17 hours of speech; a larger text is a book for the command line, not a text box
MAX_BYTES = 4 * MAX_CHARS  # UTF-8 takes at most four bytes a character


def too_long(text: str) -> str | None:
    """Why `text` is too long to speak from the app, or None."""
    if len(text) > MAX_CHARS:
        return (f"The text is {len(text):,} characters; the app speaks at most {MAX_CHARS:,} at a time "
                "(about 17 hours). Split it, or use qwen3tts synth --text-file.")
    return None


def load_text(path: Path) -> tuple[str, str | None]:
    """(text, problem). A file that is not a regular file, too large or not UTF-8 is set aside as
    '<stem>.unread<suffix>' (kept for the user, and not replaced when the app saves its text) and named."""
    try:
        try:
            text = read_regular(path, MAX_BYTES).decode("utf-8")
        except UnicodeDecodeError:
            raise UnusableFile("it is not UTF-8 text") from None
        if len(text) > MAX_CHARS:
            raise UnusableFile(f"it has {len(text):,} characters, more than the text box takes ({MAX_CHARS:,})")
    except FileNotFoundError:
        return "", None
    except UnusableFile as e:
        return "", f"The text from last time ({path}) was not loaded: {e}; {set_aside(path, 'unread')}."
    return text, None


def save_text(path: Path, text: str) -> str | None:
    """Write the text box's text atomically; a problem in words, or None."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_own_file(path, text.encode("utf-8"))
    except OSError as e:
        return f"The text could not be kept for the next start in {path}: {os_reason(e)}."
    return None


def restore_text(path: Path, settings: Settings) -> tuple[str, str | None]:
    """The text from last time, moved first out of the settings file where older versions kept it."""
    older = settings.text
    if older and not os.path.lexists(path):
        if save_text(path, older) is not None:  # the disk refuses: it stays where it was, for the next start
            return ("", None) if too_long(older) else (older, None)
    if older:
        settings.qsettings.remove(Settings.text.key)
    return load_text(path)
