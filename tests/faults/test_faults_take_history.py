"""The take history's reader against what a power cut, a full disk or a hand edit leaves on disk: truncated, empty,
wrong-typed, huge and non-regular files. A damaged take is skipped, named once and left where it is; the takes
around it load; nothing hangs or allocates what a header claims."""

from __future__ import annotations

import io
import json
import os
import threading
import tracemalloc
import zipfile
from pathlib import Path

import numpy as np
import pytest

from engine import GenerationSettings, SynthesisResult
from qwen3tts_gui.data.take_store import TakeStore
from qwen3tts_gui.data.takes import Take

TAKE_FILE = "take.npz"


def _take(number: int, text: str = "Hello there.", seconds: float = 0.5) -> Take:
    samples = int(24000 * seconds)
    audio = np.sin(np.arange(samples, dtype=np.float32) / 7).astype(np.float32) * 0.1
    codes = np.arange(16 * (samples // 1920), dtype=np.int64).reshape(-1, 16)
    result = SynthesisResult(audio=audio, codes=codes, ended_by="eos", seed=7)
    return Take(number, text, "Anna", "anna", "english", GenerationSettings(temperature=0.9, top_k=50), result)


@pytest.fixture
def history(tmp_path) -> Path:
    """Three good takes, 1-3, in a take folder."""
    folder = tmp_path / "takes"
    store = TakeStore(folder)
    for n in (1, 2, 3):
        assert store.save(_take(n, f"Take number {n}."))
    return folder


def _meta(folder: Path, number: int) -> dict:
    with zipfile.ZipFile(folder / f"{number:06d}" / TAKE_FILE) as z:
        return json.loads(str(np.load(io.BytesIO(z.read("meta.npy")))))


def _rewrite_meta(folder: Path, number: int, meta) -> None:
    take = _take(number)
    np.savez(folder / f"{number:06d}" / TAKE_FILE, audio=take.audio, codes=take.result.codes,
             meta=np.array(json.dumps(meta)))


def _npy_header(shape: tuple, descr: str) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": descr, "fortran_order": False, "shape": shape})
    return buf.getvalue()


def _returns_within(fn, seconds: float, fifos: list[Path]):
    """fn()'s value; fails (instead of hanging the test run) when it has not returned after `seconds`."""
    out: dict = {}
    t = threading.Thread(target=lambda: out.setdefault("value", fn()), daemon=True)
    t.start()
    t.join(seconds)
    if t.is_alive():
        for fifo in fifos:  # a reader blocked in open() of a FIFO is released by a writer opening it
            try:
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass
        t.join(10)
        pytest.fail(f"still reading after {seconds} s (blocked on a FIFO?)")
    return out["value"]


def _damage_truncated(f: Path) -> None:
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])


def _damage_empty(f: Path) -> None:
    f.write_bytes(b"")


def _damage_fifo(f: Path) -> None:
    f.unlink()
    os.mkfifo(f)


def _damage_folder(f: Path) -> None:
    f.unlink()
    f.mkdir()


def _damage_not_a_zip(f: Path) -> None:
    f.write_bytes(b"not a zip")


def _damage_huge_audio_header(f: Path) -> None:
    """An audio header claiming 100 G samples (373 GiB) in front of 16 bytes."""
    good = zipfile.ZipFile(f)
    members = {n: good.read(n) for n in good.namelist()}
    good.close()
    members["audio.npy"] = _npy_header((100_000_000_000,), "<f4") + bytes(16)
    with zipfile.ZipFile(f, "w", zipfile.ZIP_STORED) as z:
        for name, data in members.items():
            z.writestr(name, data)


def _damage_zip_bomb(f: Path) -> None:
    """audio.npy deflated: 400 MB of zeros in a file of well under a megabyte (its header is honest)."""
    with zipfile.ZipFile(f) as good:
        members = {n: good.read(n) for n in good.namelist() if n != "audio.npy"}
    samples = 100_000_000
    with zipfile.ZipFile(f, "w", zipfile.ZIP_STORED, compresslevel=1) as z:
        for name, data in members.items():
            z.writestr(name, data)
        info = zipfile.ZipInfo("audio.npy")
        info.compress_type = zipfile.ZIP_DEFLATED
        with z.open(info, "w", force_zip64=True) as out:
            out.write(_npy_header((samples,), "<f4"))
            zeros = bytes(1 << 24)
            for _ in range(samples * 4 // len(zeros)):
                out.write(zeros)
            out.write(bytes(samples * 4 % len(zeros)))


def _meta_edit(change):
    def damage(f: Path) -> None:
        folder, number = f.parent.parent, int(f.parent.name)
        meta = _meta(folder, number)
        _rewrite_meta(folder, number, change(meta))
    damage.__name__ = change.__name__
    return damage


def text_a_number(m):
    return {**m, "text": 42}


def settings_a_string(m):
    return {**m, "settings": "fast"}


def settings_null(m):
    return {**m, "settings": None}


def whole_thing_a_list(m):
    return [m]


def top_k_1e30(m):
    return {**m, "settings": {**m["settings"], "top_k": 1e30}}


def max_frames_infinite(m):
    return {**m, "settings": {**m["settings"], "max_frames": float("inf")}}


def seed_a_string(m):
    return {**m, "seed": "seven"}


DAMAGE = [_damage_truncated, _damage_empty, _damage_fifo, _damage_folder, _damage_not_a_zip,
          _damage_huge_audio_header, _meta_edit(text_a_number), _meta_edit(settings_a_string),
          _meta_edit(settings_null), _meta_edit(whole_thing_a_list), _meta_edit(top_k_1e30),
          _meta_edit(max_frames_infinite), _meta_edit(seed_a_string)]


@pytest.mark.parametrize("damage", DAMAGE, ids=lambda d: d.__name__.strip("_").replace("damage_", ""))
def test_a_damaged_take_is_skipped_named_once_and_left_alone(history, damage):
    target = history / "000002" / TAKE_FILE
    damage(target)
    before = target.stat()
    store = TakeStore(history)
    takes = _returns_within(store.load_all, 30, [target])
    assert [t.number for t in takes] == [1, 3]
    assert [t.text for t in takes] == ["Take number 1.", "Take number 3."]
    problems = store.take_problems()
    assert len(problems) == 1 and "000002" in problems[0] and "\n" not in problems[0], problems
    assert store.take_problems() == []
    after = target.stat()  # left for the user, untouched
    assert (after.st_mode, after.st_size, after.st_mtime_ns) == (before.st_mode, before.st_size, before.st_mtime_ns)
    assert store.last_number() == 3  # and its number is never reused


def test_a_compressed_member_is_never_unpacked_into_memory(history):
    _damage_zip_bomb(history / "000002" / TAKE_FILE)
    assert (history / "000002" / TAKE_FILE).stat().st_size < 2**20
    store = TakeStore(history)
    tracemalloc.start()
    try:
        takes = store.load_all()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [t.number for t in takes] == [1, 3]
    assert peak < 100 * 2**20, f"reading the history used {peak / 2**20:.0f} MB"
    assert "000002" in store.take_problems()[0]


def test_a_stored_take_number_is_not_trusted(history):
    """The folder names the take: a huge or different number in the file neither breaks the start nor makes
    removing this take remove another."""
    _rewrite_meta(history, 2, {**_meta(history, 2), "number": 2**63 + 5})
    _rewrite_meta(history, 3, {**_meta(history, 3), "number": 1})
    store = TakeStore(history)
    assert [t.number for t in store.load_all()] == [1, 2, 3]
    store.remove(3)
    assert sorted(p.name for p in history.iterdir()) == ["000001", "000002"]


@pytest.mark.parametrize("name", ["²", "١٢٣٤٥٦", "99999999999999999999", "0000042", "12"])
def test_folders_the_app_did_not_name_are_not_takes(history, name):
    (history / name).mkdir()
    (history / name / TAKE_FILE).write_bytes((history / "000001" / TAKE_FILE).read_bytes())
    store = TakeStore(history)
    assert [t.number for t in store.load_all()] == [1, 2, 3]
    assert store.last_number() == 3  # a stray huge number does not push every later take out of range
    assert store.save(_take(4))
    assert [t.number for t in TakeStore(history).load_all()] == [1, 2, 3, 4]
    assert (history / name / TAKE_FILE).is_file()


def test_a_take_is_synced_before_it_gets_its_name(tmp_path, monkeypatch):
    events = []
    real_fsync, real_rename = os.fsync, os.rename

    def fsync(fd):
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        return real_fsync(fd)

    def rename(src, dst, *a, **k):
        events.append(("rename", str(dst)))
        return real_rename(src, dst, *a, **k)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "rename", rename)
    assert TakeStore(tmp_path / "takes").save(_take(1))
    final = str(tmp_path / "takes" / "000001")
    placed = events.index(("rename", final))
    synced = [p for kind, p in events[:placed] if kind == "fsync"]
    assert any(Path(p).name.startswith(f".{TAKE_FILE}.") for p in synced), events  # the file's content
    assert any(Path(p).name == ".000001.partial" for p in synced), events  # the folder's entry for it
    assert ("fsync", str(tmp_path / "takes")) in events[placed:]  # and the rename itself


def test_the_history_loads_metadata_at_start_and_audio_when_used(tmp_path):
    folder = tmp_path / "takes"
    store = TakeStore(folder)
    made = [_take(n, f"Take {n}.", seconds=60.0) for n in range(1, 9)]  # 5.8 MB of audio each
    for take in made:
        assert store.save(take)
    tracemalloc.start()
    try:
        takes = TakeStore(folder).load_all()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 3 * 2**20, f"loading the history used {peak / 2**20:.1f} MB"
    assert [round(t.result.seconds, 3) for t in takes] == [60.0] * 8
    assert [t.frames for t in takes] == [len(t.result.codes) for t in made]
    for take, original in zip(takes, made, strict=True):  # each read when used, the same samples
        np.testing.assert_array_equal(take.audio, original.audio)
        np.testing.assert_array_equal(take.result.codes, original.result.codes)
    in_memory = [t for t in takes if t.result._arrays is not None]
    assert 1 <= len(in_memory) <= 4 and takes[-1] in in_memory  # the last ones used, not the whole history


def test_a_take_removed_after_the_start_plays_as_silence_instead_of_failing(history):
    takes = TakeStore(history).load_all()
    (history / "000002" / TAKE_FILE).write_bytes(b"")
    assert len(takes[1].audio) == 0 and "empty" in takes[1].result.problem
    assert len(takes[0].audio) == 12000


def test_a_take_voice_file_is_read_when_the_take_is_regenerated(tmp_path, monkeypatch):
    from engine import Voice

    folder = tmp_path / "takes"
    take = _take(1)
    take.voice = Voice(xvector=np.ones(8, np.float32), model_id="m", name="Anna")
    assert TakeStore(folder).save(take)
    reads = []
    real = Voice.load
    monkeypatch.setattr(Voice, "load", classmethod(lambda cls, path, model_id=None: reads.append(path)
                                                   or real.__func__(cls, path, model_id)))
    loaded = TakeStore(folder).load_all()
    assert reads == []  # reading every take's voice made the start 4 ms a take
    assert loaded[0].ready_voice().name == "Anna" and len(reads) == 1
    os.unlink(folder / "000001" / "voice.qvoice")
    os.mkfifo(folder / "000001" / "voice.qvoice")
    again = TakeStore(folder).load_all()[0]
    assert len(again.audio) == 12000  # still plays
    with pytest.raises(Exception, match="not a regular file"):
        again.ready_voice()


def test_a_stray_folder_far_above_the_takes_does_not_stop_the_numbering(history):
    (history / "999999999").mkdir()  # a valid take name: numbering on from it would leave the names read as takes
    store = TakeStore(history)
    assert [t.number for t in store.load_all()] == [1, 2, 3]
    assert store.last_number() == 3
    assert store.save(_take(4))
    assert [t.number for t in TakeStore(history).load_all()] == [1, 2, 3, 4]


def test_a_take_never_replaces_a_folder_already_there(history):
    (history / "000004").mkdir()
    (history / "000004" / "notes.txt").write_text("mine")
    store = TakeStore(history)
    assert not store.save(_take(4))
    assert (history / "000004" / "notes.txt").read_text() == "mine"
    assert "already there" in store.take_problems()[0]
    assert sorted(p.name for p in history.iterdir()) == ["000001", "000002", "000003", "000004"]


def test_a_take_number_is_claimed_past_takes_and_other_writers(history):
    (history / ".000004.partial").mkdir()  # another copy of the app writing its take 4 right now
    (history / ".000004.partial" / TAKE_FILE).write_bytes(b"half written")
    (history / "000005").mkdir()  # put in place by another copy after this one read the history
    store = TakeStore(history)
    assert store.claim_number(3) == 6
    assert store.save(_take(6))
    assert (history / ".000004.partial" / TAKE_FILE).read_bytes() == b"half written"
    assert store.claim_number(6) == 7


def test_a_take_being_written_by_another_copy_is_never_removed(history):
    (history / ".000004.partial").mkdir()
    (history / ".000004.partial" / TAKE_FILE).write_bytes(b"half written")
    store = TakeStore(history)
    assert not store.save(_take(4))  # a number this store did not claim, held by another writer
    assert (history / ".000004.partial" / TAKE_FILE).read_bytes() == b"half written"
    assert "another copy of the app" in store.take_problems()[0]
