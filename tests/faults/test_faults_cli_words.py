"""The command line's files and words under faults: a batch never replaces a file that appeared in its output folder
during the run, a FIFO given as --jobs is called what it is, a long instruction is not blamed on the text, a full
disk is called full, and the temporary files a killed run left are swept by the next one (only those)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import engine
from engine.io.audio_writer import AudioFileWriter
from qwen3tts_cli.main import main
from tests.bundles import bundle_for

from .conftest import REF, one_line, run_cli


def test_a_file_that_appears_during_a_batch_is_not_replaced(tmp_path, capsys, monkeypatch):
    bundle = bundle_for("tiny06b", "fp32")
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text("".join(json.dumps({"name": n, "text": "Hello there.", "ref": str(REF), "x_vector_only": True,
                                        "max_frames": 6}) + "\n" for n in ("a", "b")), encoding="utf-8")
    out = tmp_path / "out"
    real = engine.Synthesizer.synthesize_many

    def meanwhile(self, *args, **kwargs):  # another program writes b.wav while the batch runs
        (out / "b.wav").write_bytes(b"someone else's recording")
        (out / "b.codes.npy").write_bytes(b"theirs too")
        yield from real(self, *args, **kwargs)

    monkeypatch.setattr(engine.Synthesizer, "synthesize_many", meanwhile)
    code = main(["batch", "--model", str(bundle), "--jobs", str(jobs), "--out-dir", str(out), "--greedy", "--codes",
                 "--threads", "1"])
    stdout = capsys.readouterr().out
    assert code == 0, stdout
    assert "b (2).wav (b.wav appeared during the run and was left alone)" in stdout
    assert (out / "b.wav").read_bytes() == b"someone else's recording"
    assert (out / "b.codes.npy").read_bytes() == b"theirs too"
    assert sorted(p.name for p in out.iterdir()) == ["a.codes.npy", "a.wav", "b (2).codes.npy", "b (2).wav",
                                                     "b.codes.npy", "b.wav"]
    np.testing.assert_array_equal(np.load(out / "b (2).codes.npy"), np.load(out / "a.codes.npy"))  # same job


def test_a_fifo_as_the_jobs_file_is_called_what_it_is(tmp_path, capsys):
    fifo = tmp_path / "jobs.jsonl"
    os.mkfifo(fifo)
    code, err = run_cli(capsys, "batch", "--model", tmp_path / "none", "--jobs", fifo, "--out-dir", tmp_path / "o")
    line = one_line(err)
    assert code == 2 and "not a regular file" in line and "does not exist" not in line, line


def test_a_long_instruction_is_not_blamed_on_the_text(tmp_path, capsys):
    bundle = bundle_for("tinyvd17b", parts=["text", "talker", "codec_decoder"])
    code, err = run_cli(capsys, "synth", "--model", bundle, "--text", "Hello there.", "--instruct",
                        "A calm and warm voice. " * 6000, "-o", tmp_path / "x.wav", "--threads", "1")
    line = one_line(err)
    assert code == 2 and "instruction" in line and "at most 0 s" not in line and "text is too long" not in line
    assert not (tmp_path / "x.wav").exists()


def test_a_text_too_long_for_one_synthesis_is_refused_before_it_is_tokenized(monkeypatch):
    synth = engine.Synthesizer(bundle_for("tiny06b", "fp32"), threads=1)
    voice = synth.create_voice(str(REF), ref_text=None)
    monkeypatch.setattr(type(synth), "_build_prompt", lambda *a, **k: pytest.fail("tokenized a hopeless text"))
    with pytest.raises(engine.TextError, match="too long"):
        synth.synthesize("a" * 5_000_000, voice)
    with pytest.raises(engine.TextError, match="too long"):
        synth.synthesize("a" * 5_000_000, voice, settings=engine.GenerationSettings(max_frames=10))


def test_a_full_disk_while_writing_audio_is_called_full(small_disk):
    disk = small_disk(256)
    writer = AudioFileWriter(disk / "chapter.wav")
    with pytest.raises(engine.AudioError) as e:
        for _ in range(100):
            writer.write(np.full(24000, 0.1, np.float32))  # 48 kB a second at 16 bits
        writer.commit()
    writer.abort()
    assert "the disk is full" in str(e.value) and "System error" not in str(e.value) and ".." not in str(e.value)
    assert os.listdir(disk) == []


def _killed_writer(folder: Path) -> Path:
    """Start writing folder/out.wav in another process and kill it (-9) half way; returns the temp it left."""
    code = ("import sys, time, numpy as np\n"
            "from engine.io.audio_writer import AudioFileWriter\n"
            "w = AudioFileWriter(sys.argv[1])\n"
            "w.write(np.zeros(240000, np.float32))\n"
            "print(w._tmp, flush=True)\n"
            "time.sleep(60)\n")
    root = Path(__file__).resolve().parents[2]
    p = subprocess.Popen([sys.executable, "-c", code, str(folder / "out.wav")], stdout=subprocess.PIPE, text=True,
                         cwd=root, env={**os.environ, "PYTHONPATH": str(root)})
    tmp = Path(p.stdout.readline().strip())
    p.kill()
    p.wait()
    return tmp


def test_temps_of_a_killed_run_are_swept_and_nothing_else(tmp_path):
    from engine.io.fileio import STALE_SECONDS, sweep_stale_temps, write_atomic

    left = _killed_writer(tmp_path)
    assert left.is_file() and left.name.startswith(".out.wav.")
    old = time.time() - STALE_SECONDS - 5
    os.utime(left, (old, old))
    keep = {name: tmp_path / name for name in (".notes.abcdefgh.tmp", "song.wav", ".out.wav.12.tmp", "x.tmp")}
    for path in keep.values():
        path.write_bytes(b"user data")
        os.utime(path, (old, old))
    young = _killed_writer(tmp_path)  # killed a moment ago: too young to tell from a write in progress
    mine = tmp_path / f".out.wav.{os.getpid()}.abcdefgh.tmp"
    mine.write_bytes(b"being written by this process")
    os.utime(mine, (old, old))
    write_atomic(tmp_path / "song.wav", b"new")  # the next write into the folder sweeps it
    assert not left.exists()
    assert young.exists() and mine.exists()
    for name, path in keep.items():
        assert path.exists(), name
    assert sweep_stale_temps(tmp_path) == []  # once per folder per process


def test_half_written_takes_are_swept_at_start(tmp_path):
    from qwen3tts_gui.data.take_store import STALE_SECONDS as TAKE_STALE
    from qwen3tts_gui.data.take_store import TakeStore

    folder = tmp_path / "takes"
    old, fresh = folder / ".000007.partial", folder / ".000008.partial"
    for d in (old, fresh):
        d.mkdir(parents=True)
        (d / ".take.npz.123.abcdefgh.tmp").write_bytes(bytes(1000))
    stamp = time.time() - TAKE_STALE - 5
    for p in (old / ".take.npz.123.abcdefgh.tmp", old):
        os.utime(p, (stamp, stamp))
    (folder / ".notes.partial").mkdir()  # not ours: left
    TakeStore(folder).load_all()
    assert not old.exists() and fresh.exists() and (folder / ".notes.partial").exists()
