"""Data loss: nothing the user made is deleted or overwritten, nothing is half-written.

Each test reproduces one way a user could lose work; bad files and full disks are made here (a real tmpfs where the
machine allows mounting one, a patched free-space figure otherwise).
"""

from __future__ import annotations

import errno
import multiprocessing
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

import engine.convert as convert_mod
from engine.convert import convert_checkpoint
from engine.errors import BundleError, ConvertError
from engine.io.fileio import create_new, current_umask, write_atomic
from engine.runtime.bundle_writer import PARTIAL_MARK, BundleWriter, sweep_partials
from engine.voice import Voice
from tests.bundles import bundle_for, fixture_models

from .conftest import REF, ROOT, one_line, run_cli


def _tree(path: Path) -> dict[str, bytes]:
    return {p.relative_to(path).as_posix(): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


# --- 1. convert --force ----------------------------------------------------------------------------------------


def test_force_never_replaces_a_folder_of_other_files(checkpoint, tmp_path, capsys):
    thesis = tmp_path / "d" / "thesis.txt"
    thesis.parent.mkdir()
    thesis.write_text("four years of work")
    code, err = run_cli(capsys, "convert", checkpoint, thesis.parent, "--force")
    assert code == 2 and "not a model bundle" in one_line(err)
    assert thesis.read_text() == "four years of work"
    assert os.listdir(tmp_path) == ["d"]  # no temp folder left beside it either


def test_force_never_replaces_the_checkpoint_or_a_folder_holding_it(checkpoint, tmp_path, capsys):
    src = tmp_path / "models" / "ckpt"
    shutil.copytree(checkpoint, src)
    before = _tree(tmp_path)
    for dest in (src, src.parent, tmp_path / "link"):
        if dest.name == "link":
            dest.symlink_to(src)
        code, err = run_cli(capsys, "convert", src, dest, "--force")
        assert code == 2 and "checkpoint being converted" in one_line(err), dest
    (tmp_path / "link").unlink()
    assert _tree(tmp_path) == before


def test_force_replaces_a_previous_bundle_but_not_one_holding_user_files(checkpoint, tmp_path):
    dest = tmp_path / "bundle"
    convert_checkpoint(checkpoint, dest, parts=["text"])
    convert_checkpoint(checkpoint, dest, parts=["text"], overwrite=True)  # a bundle: replaced
    assert (dest / "text_rows.npy").is_file()
    (dest / "my notes.txt").write_text("keep me")
    with pytest.raises(BundleError, match="not part of the bundle"):
        convert_checkpoint(checkpoint, dest, parts=["text"], overwrite=True)
    assert (dest / "my notes.txt").read_text() == "keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bundle"]


# --- 3. voice create onto its own input -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def bundle() -> Path:
    return bundle_for(fixture_models()[0], "fp32")  # the fixtures are committed: none fails, never skips


def test_voice_create_refuses_to_overwrite_its_reference(bundle, tmp_path, capsys):
    ref = tmp_path / "ref.qvoice"  # audio under a voice suffix: soundfile reads by content
    shutil.copyfile(REF, ref)
    link = tmp_path / "link.qvoice"
    link.symlink_to(ref)
    original = ref.read_bytes()
    for out in (ref, link):
        code, err = run_cli(capsys, "voice", "create", ref, "--model", bundle, "--ref-text", "Hi there.", "-o", out)
        assert code == 2 and "also an input" in one_line(err), out
        assert ref.read_bytes() == original
    code, err = run_cli(capsys, "voice", "create", REF, "--model", bundle, "-o", tmp_path / "voice.wav")
    assert code == 2 and ".qvoice" in one_line(err)  # the suffix rule synth has for its outputs


def test_synth_refuses_an_output_that_is_its_input(bundle, tmp_path, capsys):
    ref = tmp_path / "ref.wav"
    shutil.copyfile(REF, ref)
    hard = tmp_path / "hard.wav"
    os.link(ref, hard)
    original = ref.read_bytes()
    for out in (ref, hard):
        code, err = run_cli(capsys, "synth", "--model", bundle, "--text", "Hello.", "--ref", ref, "--x-vector-only",
                            "--max-frames", "3", "-o", out)
        assert code == 2 and "also an input" in one_line(err)
    assert ref.read_bytes() == original


# --- 4. concurrent voice adds -----------------------------------------------------------------------------------


def _add_anna(folder: str, barrier, results) -> None:
    from qwen3tts_gui.data.voices import VoiceLibrary

    voice = Voice(xvector=np.full(8, os.getpid(), np.float32), model_id="m", name="Anna")
    barrier.wait()  # all four look for a free name at the same moment
    results.put(VoiceLibrary(Path(folder)).add(voice).name)


def test_voices_added_at_once_by_four_processes_all_survive(tmp_path):
    ctx = multiprocessing.get_context("fork")
    barrier, results = ctx.Barrier(4), ctx.Queue()
    procs = [ctx.Process(target=_add_anna, args=(str(tmp_path), barrier, results)) for _ in range(4)]
    for p in procs:
        p.start()
    names = [results.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert sorted(names) == ["Anna (2).qvoice", "Anna (3).qvoice", "Anna (4).qvoice", "Anna.qvoice"]
    pids = {float(Voice.load(tmp_path / n).xvector[0]) for n in names}
    assert len(pids) == 4  # four different voices, none overwritten
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_create_new_never_replaces(tmp_path):
    target = tmp_path / "a.bin"
    create_new(target, b"first")
    with pytest.raises(FileExistsError):
        create_new(target, b"second")
    assert target.read_bytes() == b"first" and os.listdir(tmp_path) == ["a.bin"]


# --- 5. full disk during convert; temp folders ---------------------------------------------------------------


def test_convert_refuses_early_when_the_disk_is_too_small(checkpoint, tmp_path, monkeypatch):
    free = 1_000_000
    monkeypatch.setattr(convert_mod.shutil, "disk_usage", lambda _p: shutil._ntuple_diskusage(10**9, 10**9 - free, free))
    with pytest.raises(ConvertError, match="not enough free space"):
        convert_checkpoint(checkpoint, tmp_path / "b")
    assert os.listdir(tmp_path) == []


FULL_DISK_SCRIPT = """
import sys
import engine.convert as c
from engine.errors import EngineError
c.check_free_space = lambda *a: None  # let it run onto the full disk
try:
    c.convert_checkpoint(sys.argv[1], sys.argv[2], parts=["text"])
except EngineError as e:
    print(e, file=sys.stderr)
    sys.exit(3)
"""


def test_convert_onto_a_full_disk_is_an_error_not_a_crash(checkpoint, small_disk):
    disk = small_disk(64)  # the tokenizer files fit, the 180 KB text table does not
    r = subprocess.run([sys.executable, "-c", FULL_DISK_SCRIPT, str(checkpoint), str(disk / "b")], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 3, f"exit {r.returncode} (SIGBUS is -7): {r.stderr[-500:]}"
    assert "disk is full" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert os.listdir(disk) == []  # the temp folder is gone


def test_stale_temp_folders_are_swept_but_live_ones_kept(tmp_path):
    dead = tmp_path / f".b{PARTIAL_MARK}dead"
    (dead / "sub").mkdir(parents=True)
    (dead / "sub" / "x.bin").write_bytes(b"x" * 100)
    user = tmp_path / ".my-hidden-folder"
    user.mkdir()
    with BundleWriter(tmp_path / "other") as live:  # the next run sweeps the dead writer's folder
        assert not dead.exists() and user.is_dir()
        assert sweep_partials(tmp_path) == [] and live.tmp.is_dir()  # a live writer holds its lock
        code = f"from engine.runtime.bundle_writer import sweep_partials; print(len(sweep_partials(__import__('pathlib').Path({str(tmp_path)!r}))))"
        r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert r.stdout.strip() == "0" and live.tmp.is_dir()  # another process does not take a live one
    assert sorted(p.name for p in tmp_path.iterdir()) == [".my-hidden-folder"]


# --- 6. synth output checked before the work, rescued after a late failure ---------------------------------------


def test_synth_checks_the_output_before_generating(bundle, small_disk, monkeypatch, capsys):
    disk = small_disk(16)
    (disk / "filler").write_bytes(b"\0" * 16 * 1024)  # now full
    import engine.synthesis.synthesizer

    def no_work(*a, **k):
        raise AssertionError("generation started although the output cannot be written")

    monkeypatch.setattr(engine.synthesis.synthesizer.Synthesizer, "speak", no_work)
    code, err = run_cli(capsys, "synth", "--model", bundle, "--text", "Hello.", "--ref", REF, "--x-vector-only",
                        "-o", disk / "out.wav")
    assert code == 2 and "disk is full" in one_line(err)


def test_synth_keeps_the_audio_when_saving_fails_late(bundle, tmp_path, monkeypatch, capsys):
    import engine.io.audio

    out = tmp_path / "out.wav"
    real = engine.io.audio.write_atomic

    def full_for_out(path, data):
        if Path(path) == out:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(path, data)

    monkeypatch.setattr(engine.io.audio, "write_atomic", full_for_out)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "rescue"))  # where rescued audio goes first
    (tmp_path / "rescue").mkdir()
    code, err = run_cli(capsys, "synth", "--model", bundle, "--text", "Hello.", "--ref", REF, "--x-vector-only",
                        "--greedy", "--max-frames", "4", "-o", out)
    line = one_line(err)
    assert code == 2 and "disk is full" in line and "kept in" in line
    kept = list((tmp_path / "rescue").glob("qwen3tts-rescued-*.wav"))
    assert len(kept) == 1 and str(kept[0]) in line
    audio, sr = sf.read(kept[0])
    assert sr == 24000 and len(audio) > 0 and not out.exists()


# --- 7. modes, owners, links -------------------------------------------------------------------------------------


def test_replacing_keeps_mode_symlink_and_hard_links(tmp_path):
    private = tmp_path / "private.wav"
    private.write_bytes(b"old")
    os.chmod(private, 0o600)
    write_atomic(private, b"new")
    assert stat.S_IMODE(private.stat().st_mode) == 0o600 and private.read_bytes() == b"new"

    target = tmp_path / "real.wav"
    target.write_bytes(b"old")
    link = tmp_path / "link.wav"
    link.symlink_to(target)
    write_atomic(link, b"through the link")
    assert link.is_symlink() and target.read_bytes() == b"through the link"

    twin = tmp_path / "twin.wav"
    os.link(target, twin)
    write_atomic(target, b"both names")
    assert twin.read_bytes() == b"both names" and os.path.samefile(target, twin)

    fresh = tmp_path / "new.wav"
    write_atomic(fresh, b"x")
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o666 & ~current_umask()
    assert sorted(os.listdir(tmp_path)) == ["link.wav", "new.wav", "private.wav", "real.wav", "twin.wav"]


def test_replacing_a_file_of_another_owner_keeps_the_owner(tmp_path):
    if os.getuid() != 0:
        pytest.skip("needs root to make a file owned by someone else")
    f = tmp_path / "theirs.wav"
    f.write_bytes(b"old")
    os.chown(f, 12345, 12345)
    write_atomic(f, b"new")
    st = f.stat()
    assert (st.st_uid, st.st_gid) == (12345, 12345) and f.read_bytes() == b"new"


def test_bundles_and_exported_voices_get_ordinary_modes(checkpoint, tmp_path):
    from qwen3tts_gui.data.voices import VoiceLibrary

    dest = convert_checkpoint(checkpoint, tmp_path / "bundle", parts=["text"])
    assert stat.S_IMODE(dest.stat().st_mode) == 0o777 & ~current_umask()
    assert stat.S_IMODE((dest / "tokenizer").stat().st_mode) == 0o777 & ~current_umask()
    library = VoiceLibrary(tmp_path / "voices")
    path = library.add(Voice(xvector=np.ones(8, np.float32), model_id="m", name="Anna"))
    exported = library.export(path, tmp_path / "anna")
    assert exported.name == "anna.qvoice"
    assert stat.S_IMODE(exported.stat().st_mode) == stat.S_IMODE(path.stat().st_mode) == 0o666 & ~current_umask()


def test_new_files_follow_the_users_umask(tmp_path):
    old = os.umask(0o027)
    try:
        write_atomic(tmp_path / "a.wav", b"x")
        create_new(tmp_path / "b.qvoice", b"x")
        assert current_umask() == 0o027
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "a.wav").stat().st_mode) == 0o640
    assert stat.S_IMODE((tmp_path / "b.qvoice").stat().st_mode) == 0o640


def test_a_failed_in_place_rewrite_keeps_the_complete_copy(tmp_path, monkeypatch):
    import engine.io.fileio

    target, twin = tmp_path / "a.wav", tmp_path / "b.wav"
    target.write_bytes(b"old")
    os.link(target, twin)  # hard links are rewritten in place

    def fails(path, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(engine.io.fileio, "_rewrite_in_place", fails)
    with pytest.raises(OSError, match="complete new content is kept in") as e:
        write_atomic(target, b"new content")
    kept = Path(re.search(r"kept in (\S+)\)", str(e.value)).group(1))
    assert kept.read_bytes() == b"new content" and kept.parent == tmp_path


def test_streamed_long_outputs_keep_mode_symlink_and_hard_links(tmp_path):
    from engine.io.audio_writer import AudioFileWriter

    target = tmp_path / "book.wav"
    sf.write(target, np.zeros(100, np.float32), 24000)
    os.chmod(target, 0o600)
    link, twin = tmp_path / "link.wav", tmp_path / "twin.wav"
    link.symlink_to(target)
    os.link(target, twin)
    with AudioFileWriter(link) as w:
        w.write(np.full(2400, 0.5, np.float32))
    assert link.is_symlink() and os.path.samefile(target, twin)
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert sf.info(twin).frames == 2400  # the hard link sees the new recording
    assert sorted(os.listdir(tmp_path)) == ["book.wav", "link.wav", "twin.wav"]


def test_a_long_recording_that_cannot_be_put_in_place_is_kept(tmp_path, monkeypatch):
    import engine.io.audio_writer
    from engine.errors import AudioError
    from engine.io.audio_writer import AudioFileWriter

    (tmp_path / "rescue").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "rescue"))

    def read_only_now(tmp, path, discard=True):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(engine.io.audio_writer, "place", read_only_now)
    out = tmp_path / "book.wav"
    with pytest.raises(AudioError, match=r"the disk there is read-only \(mounted read-only\). The audio was kept in") as e:
        with AudioFileWriter(out) as w:
            w.write(np.full(4800, 0.25, np.float32))
    kept = list((tmp_path / "rescue").glob("qwen3tts-rescued-*.wav"))
    assert len(kept) == 1 and str(kept[0]) in str(e.value)
    assert sf.info(kept[0]).frames == 4800 and not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["rescue"]  # no temp file left beside the output
