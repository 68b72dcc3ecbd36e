"""The chunk journal: a long text's finished chunks kept on disk as they are made, read back without trusting
what is there (truncated, empty, wrong-typed, huge and non-regular files, links)."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from engine import GenerationSettings, SynthesisResult, Voice
from engine.longform.joining import JoinSettings
from engine.longform.journal import JOURNAL_FILE, ChunkJournal, ChunkPlan, JournalError


def _plan(**changes) -> ChunkPlan:
    fields = dict(model_id="m1", text="One. Two. Three.", chunks=("One.", "Two.", "Three."), language="english",
                  settings=GenerationSettings(seed=41, temperature=0.8), join=JoinSettings(sentence_pause=0.2),
                  max_chars=200, voice_name="Anna")
    fields.update(changes)
    return ChunkPlan(**fields)


def _result(frames: int, seed: int) -> SynthesisResult:
    rng = np.random.default_rng(seed)
    return SynthesisResult(audio=rng.standard_normal(frames * 1920).astype(np.float32) * 0.1,
                           codes=rng.integers(0, 2048, (frames, 16)).astype(np.int64), ended_by="eos", seed=seed)


def _voice() -> Voice:
    return Voice(xvector=np.linspace(-1, 1, 32, dtype=np.float32), model_id="m1", ref_codes=np.ones((5, 16), np.int64),
                 ref_text="Reference words.", name="Anna", ref_audio=np.ones(2400, np.float32))


def test_chunks_kept_are_read_back_exactly(tmp_path):
    journal = ChunkJournal.create(tmp_path / "j", _plan(), _voice())
    made = {0: _result(3, 41), 2: _result(5, 43)}
    for i, r in made.items():
        journal.keep(i, r)
    again = ChunkJournal.open(tmp_path / "j")
    assert again.plan == _plan()
    found = again.made()
    assert sorted(found) == [0, 2]
    for i, r in made.items():
        back = found[i].load()
        np.testing.assert_array_equal(back.audio, r.audio)
        np.testing.assert_array_equal(back.codes, r.codes)
        assert back.seed == r.seed and back.ended_by == "eos"
    voice = again.voice()
    assert isinstance(voice, Voice) and voice.ref_text == "Reference words." and voice.ref_audio is None
    np.testing.assert_array_equal(voice.xvector, _voice().xvector)


def test_a_plan_needs_its_base_seed(tmp_path):
    with pytest.raises(JournalError, match="base seed"):
        ChunkJournal.create(tmp_path / "j", _plan(settings=GenerationSettings()))


def test_a_folder_with_a_journal_is_never_given_a_second(tmp_path):
    ChunkJournal.create(tmp_path / "j", _plan())
    with pytest.raises(JournalError, match="already"):
        ChunkJournal.create(tmp_path / "j", _plan(text="Other."))
    assert ChunkJournal.open(tmp_path / "j").plan.text == "One. Two. Three."


@pytest.mark.parametrize("change, words", [
    (dict(model_id="m2"), "another model"),
    (dict(chunks=("One.", "Two.", "Four.")), "another text"),
    (dict(language="german"), "another language"),
    (dict(speaker="vivian"), "another speaker"),
    (dict(instruct="Slowly."), "another instruction"),
    (dict(settings=GenerationSettings(seed=42, temperature=0.8)), "seed 41"),
    (dict(settings=GenerationSettings(seed=41, temperature=0.9)), "other settings (temperature)"),
])
def test_a_plan_that_would_make_other_chunks_differs(change, words):
    assert _plan(**change).differs_from(_plan()) == words


def test_joining_and_names_do_not_change_the_chunks():
    other = _plan(join=JoinSettings(sentence_pause=1.0), voice_name="B", text="One. Two.  Three.", max_chars=300,
                  settings=GenerationSettings(seed=41, temperature=0.8, stream_audio=True))
    assert other.differs_from(_plan()) is None


def _damage(folder, name: str, how: str) -> None:
    path = folder / name
    if how == "truncated":
        path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "wrong type":
        path.write_text(json.dumps(["not", "a", "table"]))
    elif how == "huge":
        with open(path, "r+b") as f:
            f.truncate(2**40)  # sparse: a terabyte it claims
    elif how == "fifo":
        path.unlink()
        os.mkfifo(path)
    elif how == "link":
        target = folder.parent / "elsewhere"
        target.write_bytes(path.read_bytes())
        path.unlink()
        path.symlink_to(target)
    elif how == "folder":
        path.unlink()
        path.mkdir()


HOWS = ["truncated", "empty", "wrong type", "huge", "fifo", "link", "folder"]


@pytest.mark.parametrize("how", HOWS)
def test_a_damaged_journal_file_is_not_a_journal(tmp_path, how):
    ChunkJournal.create(tmp_path / "j", _plan())
    _damage(tmp_path / "j", JOURNAL_FILE, how)
    with pytest.raises(JournalError, match="chunk journal"):
        ChunkJournal.open(tmp_path / "j")


@pytest.mark.parametrize("name", ["0002.json", "0002.audio.npy", "0002.codes.npy"])
@pytest.mark.parametrize("how", HOWS)
def test_a_damaged_chunk_is_made_again_and_the_others_kept(tmp_path, name, how):
    journal = ChunkJournal.create(tmp_path / "j", _plan())
    for i in range(3):
        journal.keep(i, _result(2 + i, 41 + i))
    _damage(tmp_path / "j", name, how)
    journal = ChunkJournal.open(tmp_path / "j")
    usable = {}
    for i, chunk in journal.made().items():
        try:
            usable[i] = chunk.load()
        except JournalError as e:
            assert "chunk 2" in str(e)
    assert 0 in usable and 2 in usable and 1 not in usable


def test_a_forged_note_cannot_claim_a_chunk(tmp_path):
    journal = ChunkJournal.create(tmp_path / "j", _plan())
    journal.keep(0, _result(2, 41))
    (tmp_path / "j" / "0001.json").write_text(json.dumps({"seed": 10**400, "ended_by": "eos", "attempts": 1}))
    (tmp_path / "j" / "0009.json").write_text(json.dumps({"seed": 1, "ended_by": "eos", "attempts": 1}))
    assert ChunkJournal.open(tmp_path / "j").made() == {}


def test_discard_removes_only_the_journal_files(tmp_path):
    journal = ChunkJournal.create(tmp_path / "j", _plan(), _voice())
    journal.keep(1, _result(2, 42))
    (tmp_path / "j" / "0002.wav").write_bytes(b"the user's chunk file")
    journal.discard()
    assert sorted(p.name for p in (tmp_path / "j").iterdir()) == ["0002.wav"]
    journal = ChunkJournal.create(tmp_path / "k", _plan())
    journal.discard()
    assert not (tmp_path / "k").exists()


def test_discard_removes_what_a_killed_run_left_half_written(tmp_path):
    import subprocess
    import sys

    journal = ChunkJournal.create(tmp_path / "j", _plan())
    journal.keep(0, _result(2, 41))
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (tmp_path / "j" / f".0002.audio.npy.{int(gone.stdout)}.abcd1234.tmp").write_bytes(b"half a chunk")  # kill -9
    ChunkJournal.open(tmp_path / "j").discard()
    assert not (tmp_path / "j").exists()


@pytest.mark.parametrize("damaged", [{"temperature": 10**30}, {"temperature": "hot"}, {"seed": 2**64},
                                     {"top_k": -1}, {"greedy": 1}, "fast"], ids=str)
def test_a_journal_and_a_take_refuse_damaged_settings_in_the_same_words(tmp_path, damaged):
    """A chunk journal's settings and a take file's are read by one reader (GenerationSettings.from_table): the same
    damage is refused by both, in the same words (a temperature past what a file holds used to pass the journal)."""
    from qwen3tts_gui.data.take_file import FORMAT, TakeFileError, read_header, write_take_file

    plan = _plan().to_json()
    plan["settings"] = {**plan["settings"], **damaged} if isinstance(damaged, dict) else damaged
    with pytest.raises(JournalError) as journal:
        ChunkPlan.from_json(plan)
    result = _result(2, 41)
    meta = dict(format=FORMAT, number=1, text="One.", voice_name="Anna", language="english",
                settings=plan["settings"], seed=41, ended_by="eos", timings={}, created="", instruct=None,
                speaker=None, device="")
    (tmp_path / "take").mkdir()
    path = write_take_file(tmp_path / "take", result.audio, result.codes, meta)
    with pytest.raises(TakeFileError) as take:
        read_header(path)
    assert str(journal.value) == str(take.value) and len(str(take.value).splitlines()) == 1


@pytest.mark.parametrize("damaged, says", [
    ({"sentence_pause": "long"}, "its join setting sentence_pause is 'long', not a float"),
    ({"fade": 2**70}, "its join setting fade is"),
    ({"paragraph_pause": 99}, "its join settings are out of range (The paragraph pause must be between 0 and 10"),
    ({"fade": None}, "its join setting fade is 'None', not a float"),
    ("slow", "its join settings are not a table of values"),
], ids=str)
def test_a_journal_refuses_damaged_joining_as_it_does_damaged_settings(damaged, says):
    """The joining is read by the settings' reader (settings_from_table): the same kinds of damage, named alike in
    one line, the setting and its value included."""
    plan = _plan().to_json()
    plan["join"] = {**plan["join"], **damaged} if isinstance(damaged, dict) else damaged
    with pytest.raises(JournalError) as e:
        ChunkPlan.from_json(plan)
    assert says in str(e.value) and len(str(e.value).splitlines()) == 1


def test_a_journal_reads_its_joining_back():
    plan = _plan(join=JoinSettings(sentence_pause=0.25, paragraph_pause=1.5, fade=0.02))
    assert ChunkPlan.from_json(json.loads(json.dumps(plan.to_json()))) == plan
