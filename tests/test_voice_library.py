"""engine.store.VoiceLibrary: the saved voices found by name (the app and the speech server share it)."""

from __future__ import annotations

import os

import numpy as np

from engine import Voice
from engine.store import VoiceLibrary, default_voices_dir


def _save(folder, stem: str, name: str) -> None:
    Voice(xvector=np.ones(8, np.float32), model_id="m", name=name).save(folder / f"{stem}.qvoice")


def test_a_name_finds_its_file_first_then_a_unique_voice_name(tmp_path):
    _save(tmp_path, "Anna", "Anna")
    _save(tmp_path, "Anna (2)", "Anna")
    _save(tmp_path, "narrator", "The Narrator")
    library = VoiceLibrary(tmp_path)
    assert library.find("anna").path.name == "Anna.qvoice"  # the file name, in any case
    assert library.find("ANNA (2)").path.name == "Anna (2).qvoice"
    assert library.find("the narrator").path.name == "narrator.qvoice"  # the voice's own name
    _save(tmp_path, "other", "The Narrator")
    assert library.find("The Narrator") is None  # two voices of that name: neither is guessed


def test_a_name_never_reaches_outside_the_folder(tmp_path):
    inner = tmp_path / "voices"
    inner.mkdir()
    _save(tmp_path, "outside", "outside")
    _save(inner, "inside", "inside")
    library = VoiceLibrary(inner)
    for name in ("../outside", str(tmp_path / "outside"), "..\\outside", "inside\0", "", "  "):
        assert library.find(name) is None
    assert library.find(" inside ").path.parent == inner


def test_damaged_and_odd_files_are_skipped_and_reported_once(tmp_path):
    _save(tmp_path, "good", "Good")
    (tmp_path / "empty.qvoice").write_bytes(b"")
    (tmp_path / "truncated.qvoice").write_bytes((tmp_path / "good.qvoice").read_bytes()[:50])
    os.mkfifo(tmp_path / "pipe.qvoice")
    (tmp_path / "dangling.qvoice").symlink_to(tmp_path / "missing")
    library = VoiceLibrary(tmp_path)
    assert [e.name for e in library.entries()] == ["Good"]
    assert len(library.take_problems()) == 4
    library.entries()
    assert library.take_problems() == []
    assert library.find("empty") is None and library.find("good").name == "Good"


def test_the_default_folder_is_the_apps_unless_one_is_chosen(tmp_path):
    assert default_voices_dir().name == "voices"
    assert default_voices_dir(tmp_path) == tmp_path
