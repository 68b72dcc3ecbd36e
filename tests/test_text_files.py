"""One reader for every text file the user gives (a chapter for --text-file, a jobs file, the app's batch
imports): UTF-8, UTF-8 with a byte-order mark and UTF-16 with one are read; anything else is refused with one line
that says what to do (save it as UTF-8), not which byte failed."""

from __future__ import annotations

import codecs
import json

import pytest

from engine import TextError, decode_text, read_text_file
from qwen3tts_cli.main import main

TEXT = "Grüße, Zoë! 你好。\nSecond line, «quoted».\r\nThird."

READABLE = {
    "utf8": TEXT.encode("utf-8"),
    "utf8_bom": codecs.BOM_UTF8 + TEXT.encode("utf-8"),
    "utf16le_bom": codecs.BOM_UTF16_LE + TEXT.encode("utf-16-le"),
    "utf16be_bom": codecs.BOM_UTF16_BE + TEXT.encode("utf-16-be"),
}

REFUSED = {
    "latin1": "Grüße, café.\n".encode("latin-1"),
    "cp1252": "“Quoted” – dash.\n".encode("cp1252"),
    "utf16le_without_bom": "Hello there.\n".encode("utf-16-le"),
    "utf32_bom": codecs.BOM_UTF32_LE + "Hello.\n".encode("utf-32-le"),
    "utf16_odd_length": codecs.BOM_UTF16_LE + "Hello.".encode("utf-16-le") + b"!",
    "binary": bytes(range(256)),
}


@pytest.mark.parametrize("name", READABLE)
def test_utf8_and_marked_utf16_are_read_exactly(tmp_path, name):
    path = tmp_path / f"{name}.txt"
    path.write_bytes(READABLE[name])
    assert read_text_file(path) == TEXT  # the mark dropped, line endings kept (a CSV reader needs them)
    assert decode_text(READABLE[name], path.name) == TEXT


@pytest.mark.parametrize("name", REFUSED)
def test_other_encodings_are_refused_in_plain_words(tmp_path, name):
    path = tmp_path / f"{name}.txt"
    path.write_bytes(REFUSED[name])
    with pytest.raises(TextError) as e:
        read_text_file(path)
    message = str(e.value)
    assert "\n" not in message and path.name in message and "save it as UTF-8" in message, message
    assert "byte" not in message, message  # not which byte could not be read: what to do about it


def test_empty_and_huge_files(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    assert read_text_file(empty) == ""
    huge = tmp_path / "huge.txt"
    with open(huge, "wb") as f:
        f.truncate(40 * 2**20)
    with pytest.raises(TextError, match="at most 16 MB"):
        read_text_file(huge)


@pytest.mark.parametrize("name", ["utf8_bom", "utf16le_bom"])
def test_cli_split_reads_a_marked_text_file(tmp_path, capsys, name):
    path = tmp_path / "t.txt"
    path.write_bytes(READABLE[name])
    assert main(["split", "--text-file", str(path)]) == 0
    out = capsys.readouterr().out
    assert "Grüße, Zoë!" in out and "\ufeff" not in out


def test_cli_refuses_latin1_with_one_line(tmp_path, capsys):
    path = tmp_path / "latin.txt"
    path.write_bytes(REFUSED["latin1"])
    assert main(["split", "--text-file", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "latin.txt" in err[0] and "save it as UTF-8" in err[0], err


def test_a_utf16_jobs_file_is_read(tmp_path):
    from qwen3tts_cli.batch_jobs import read_jobs

    jobs = tmp_path / "jobs.jsonl"
    line = json.dumps({"name": "ä", "text": "Grüße.", "voice": "v.qvoice"}, ensure_ascii=False)
    jobs.write_bytes(codecs.BOM_UTF16_LE + (line + "\r\n").encode("utf-16-le"))
    (job,) = read_jobs(jobs)
    assert job.error is None and job.name == "ä" and job.text == "Grüße."
