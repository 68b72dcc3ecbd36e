"""The batch's imports read text files as the command line does (the engine's one reader): UTF-8, UTF-8 with a
byte-order mark and UTF-16 with one; anything else is refused with a message that says to save it as UTF-8 (a
Latin-1 file is first offered to be read as such: tests/gui/test_text_import_choices.py; refused here)."""

from __future__ import annotations

import codecs

import pytest

LINES = "Grüße.\nZoë sagt «hallo».\n"


@pytest.mark.parametrize("data", [
    codecs.BOM_UTF8 + LINES.encode("utf-8"),
    codecs.BOM_UTF16_LE + LINES.encode("utf-16-le"),
    codecs.BOM_UTF16_BE + LINES.replace("\n", "\r\n").encode("utf-16-be"),
], ids=["utf8_bom", "utf16le_bom", "utf16be_bom_crlf"])
def test_marked_utf8_and_utf16_files_are_imported(make_window, dialogs, tmp_path, data):
    panel = make_window().batch
    for suffix in (".txt", ".csv"):
        path = tmp_path / f"lines{suffix}"
        path.write_bytes(data)
        dialogs.answer = True  # a .txt of two lines: each line an item of its own (the default answer)
        assert panel.import_path(path), dialogs.errors
    assert [ln.text for ln in panel.model.lines] == ["Grüße.", "Zoë sagt «hallo»."] * 2  # no BOM left in a text


@pytest.mark.parametrize("data", ["Grüße, café.\n".encode("latin-1"), "Hello.\n".encode("utf-16-le")],
                         ids=["latin1", "utf16_without_bom"])
def test_other_encodings_are_refused_saying_save_it_as_utf8(make_window, dialogs, tmp_path, data):
    panel = make_window().batch
    path = tmp_path / "lines.txt"
    path.write_bytes(data)
    dialogs.choice = None  # a Latin-1 file is offered to be read as such: declined
    assert not panel.import_path(path)
    # a Latin-1 file: the offer says what is wrong (and what to do) before it offers to read it anyway
    title, text = dialogs.questions[-1][:2] if dialogs.questions else dialogs.errors[-1]
    assert title in ("Cannot import", "Not UTF-8") and "lines.txt" in text and "save it as UTF-8" in text
    assert "byte" not in text and panel.model.rowCount() == 0
