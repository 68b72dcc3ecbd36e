"""The batch's imports read text files as the command line does (the engine's one reader): UTF-8, UTF-8 with a
byte-order mark and UTF-16 with one; anything else is refused with a message that says to save it as UTF-8."""

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
        dialogs.answer = False  # a .txt of two lines: each line an item of its own
        assert panel.import_path(path), dialogs.errors
    assert [ln.text for ln in panel.model.lines] == ["Grüße.", "Zoë sagt «hallo»."] * 2  # no BOM left in a text


@pytest.mark.parametrize("data", ["Grüße, café.\n".encode("latin-1"), "Hello.\n".encode("utf-16-le")],
                         ids=["latin1", "utf16_without_bom"])
def test_other_encodings_are_refused_saying_save_it_as_utf8(make_window, dialogs, tmp_path, data):
    panel = make_window().batch
    path = tmp_path / "lines.txt"
    path.write_bytes(data)
    assert not panel.import_path(path)
    title, text = dialogs.errors[-1]
    assert title == "Cannot import" and "lines.txt" in text and "save it as UTF-8" in text and "byte" not in text
    assert panel.model.rowCount() == 0
