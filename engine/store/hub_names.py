"""What a hub or mirror may name, and what may be shown of its address: the one gate for paths from the network.

A repository listing comes from a server the user does not control (a mirror, a proxy, a compromised hub). Its
file names become paths on the user's disk, so each one must be a plain relative path made of ordinary parts
that stays inside the download folder: no `..`, no absolute or drive paths, no backslashes, no NUL or control
characters, no empty parts, no part longer than a file system allows. A mirror address may carry credentials
(`https://user:pass@host`): they are used for the requests but never stored or shown.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

# Longest file name part most file systems accept (ext4, NTFS, APFS: 255 bytes / UTF-16 units).
MAX_PART_BYTES = 255
# Longest whole relative name; a checkpoint's deepest file is "speech_tokenizer/preprocessor_config.json".
MAX_NAME_CHARS = 512
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# Names Windows opens as devices whatever the folder or extension ("CON.json" is the console).
_DEVICES = {"CON", "PRN", "AUX", "NUL", *(f"COM{i}" for i in range(10)), *(f"LPT{i}" for i in range(10))}
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/@\s]*@")
# A revision is a commit id or a branch/tag name; it becomes part of a URL and of pending.json only.
_REVISION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


class UnsafeName(ValueError):
    """A name from the network that must not become a path; the message says why (a few words)."""


def check_remote_path(name: object) -> str:
    """`name` if it is a relative path of ordinary parts separated by '/', else UnsafeName saying why."""
    if not isinstance(name, str):
        raise UnsafeName("is not a text")
    if not name:
        raise UnsafeName("is empty")
    if len(name) > MAX_NAME_CHARS:
        raise UnsafeName(f"is longer than {MAX_NAME_CHARS} characters")
    if _CONTROL.search(name):
        raise UnsafeName("contains a NUL or control character")
    if "\\" in name:
        raise UnsafeName("contains a backslash")
    if ":" in name:
        raise UnsafeName("contains a drive or stream separator ':'")
    if name.startswith("/"):
        raise UnsafeName("is an absolute path")
    for part in name.split("/"):
        if part == "":
            raise UnsafeName("has an empty path part")
        if part in (".", ".."):
            raise UnsafeName(f"has a '{part}' path part")
        if part.endswith((" ", ".")):
            raise UnsafeName("has a part ending in a space or a dot")
        if part.split(".")[0].upper() in _DEVICES:
            raise UnsafeName(f"has a part Windows reads as a device ({part.split('.')[0]})")
        try:
            size = len(part.encode("utf-8"))
        except UnicodeEncodeError:
            raise UnsafeName("is not valid Unicode") from None
        if size > MAX_PART_BYTES:
            raise UnsafeName(f"has a part longer than {MAX_PART_BYTES} bytes")
    return name


def check_revision(revision: object) -> str:
    if not isinstance(revision, str) or not _REVISION.match(revision):
        raise UnsafeName("is not a commit id or branch name")
    return revision


def inside(folder: Path, name: str) -> Path:
    """folder/name, checked again against the disk: a symlink already in the folder must not point out of it."""
    check_remote_path(name)
    target = folder / name
    try:
        escapes = not target.resolve().is_relative_to(folder.resolve())
    except (OSError, RuntimeError) as e:  # a symlink loop, a path the system refuses
        raise UnsafeName(f"cannot be a path here ({e.strerror if isinstance(e, OSError) else e})") from None
    if escapes:
        raise UnsafeName("leads outside the download folder")
    return target


def shown(name: object, limit: int = 60) -> str:
    """A name as it may appear in a one-line message: escaped (NUL, newlines) and shortened."""
    text = repr(name)
    return text if len(text) <= limit else text[:limit - 5] + "…" + text[-4:]


def redact(text: str) -> str:
    """`text` with the credentials of every URL in it replaced by '***' (https://user:pass@host -> https://***@host)."""
    return _USERINFO.sub(r"\1***@", text)


def without_credentials(url: str) -> str:
    """A URL as it may be stored (source.json): the user name and password removed entirely."""
    return _USERINFO.sub(r"\1", url)


# The loggers that put request URLs in their records: httpx2 (each request, INFO) and huggingface_hub's HTTP
# utilities (retries, WARNING; each request, DEBUG). A filter on a logger sees the records made on that logger.
_URL_LOGGERS = ("httpx2", "huggingface_hub.utils._http", "huggingface_hub.file_download")


class _RedactCredentials(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except (TypeError, ValueError):
            return True
        if "@" in message:
            record.msg, record.args = redact(message), ()
        return True


_REDACTOR = _RedactCredentials()


def redact_url_logs() -> None:
    """Keep a mirror's credentials out of every log record the HTTP libraries make (idempotent)."""
    for name in _URL_LOGGERS:
        logger = logging.getLogger(name)
        if _REDACTOR not in logger.filters:
            logger.addFilter(_REDACTOR)
