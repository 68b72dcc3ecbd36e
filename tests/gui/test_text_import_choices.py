"""Importing a .txt into the batch: one line per row is the default answer; a Latin-1 / Windows-1252 file is
offered to be read as such after a preview of its first lines, instead of only being refused."""

from __future__ import annotations

import pytest

from engine import NotUtf8Error, TextError, decode_text

LATIN1 = "Café crème.\nÇa va très bien.\nÀ demain, Noël.\n"


def test_separate_lines_is_the_default_answer(make_window, dialogs, tmp_path):
    panel = make_window().batch
    path = tmp_path / "lines.txt"
    path.write_text("One.\nTwo.\nThree.\n", encoding="utf-8")
    dialogs.answer = True  # Enter: the default (first) button
    assert panel.import_path(path)
    assert [ln.text for ln in panel.model.lines] == ["One.", "Two.", "Three."]


@pytest.mark.parametrize("codec", ["latin-1", "cp1252"])
def test_a_latin1_file_is_offered_with_a_preview_and_read_as_chosen(make_window, dialogs, tmp_path, codec):
    panel = make_window().batch
    path = tmp_path / "french.txt"
    path.write_bytes((LATIN1 + "\u201cQuoted\u201d.\n" if codec == "cp1252" else LATIN1).encode(codec))
    dialogs.choice = None  # Cancel: nothing imported, nothing said wrong
    assert not panel.import_path(path) and panel.model.rowCount() == 0 and not dialogs.errors
    title, text, choices = dialogs.questions[-1]
    assert "not in UTF-8" in text and "Café crème." in text and "Ça va très bien." in text  # the preview
    dialogs.choice = 0
    assert panel.import_path(path), dialogs.errors
    expected = ["Café crème.", "Ça va très bien.", "À demain, Noël."] + (["\u201cQuoted\u201d."] if codec == "cp1252"
                                                                        else [])
    assert [ln.text for ln in panel.model.lines] == expected


def test_engine_names_a_file_that_is_not_utf8_and_reads_it_with_a_chosen_encoding():
    data = LATIN1.encode("latin-1")
    with pytest.raises(NotUtf8Error):
        decode_text(data, "french.txt")
    assert decode_text(data, "french.txt", "cp1252") == LATIN1
    with pytest.raises(TextError, match="not a text encoding"):
        decode_text(data, "french.txt", "no-such-codec")
    with pytest.raises(TextError):
        decode_text(b"\x81\x8d", "odd.txt", "cp1252")  # bytes Windows-1252 leaves undefined
