"""Two runs of one long text never keep chunks in one journal at once: ChunkJournal.claim holds the folder with an
advisory lock, and `qwen3tts synth` refuses, in one line, a folder another process holds now (its own --chunks-dir,
or the cache folder of the same command), leaving that run's chunks alone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from engine import ChunkJournal, JournalInUse
from qwen3tts_cli.main import main
from tests.test_chapter_resume import CHAPTER, _command, _made, _run_folders, demo_bundle  # noqa: F401

ROOT = Path(__file__).resolve().parent.parent
HOLDER = """
import sys
from engine import ChunkJournal
with ChunkJournal.claim(sys.argv[1]):
    print("held", flush=True)
    sys.stdin.read()  # until the test closes it (or kills this process)
"""


class Holder:
    """Another process holding `folder` with the engine's claim, as a run keeping chunks there does."""

    def __init__(self, folder: Path):
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        self.proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(folder)], cwd=ROOT, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline().strip() == "held"

    def release(self) -> None:
        self.proc.stdin.close()
        assert self.proc.wait(timeout=30) == 0

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)


def test_a_claimed_folder_is_refused_until_its_holder_ends(tmp_path):
    folder = tmp_path / "chunks"
    with ChunkJournal.claim(folder):
        with pytest.raises(JournalInUse, match="in use by another run"), ChunkJournal.claim(folder):
            pass
    with ChunkJournal.claim(folder):  # released with the block
        pass
    holder = Holder(folder)
    with pytest.raises(JournalInUse):
        with ChunkJournal.claim(folder):
            pass
    holder.kill()  # kill -9: no clean-up, and still nothing held
    with ChunkJournal.claim(folder):
        pass


def test_synth_refuses_a_chunks_dir_another_run_holds(demo_bundle, tmp_path, capsys):  # noqa: F811
    chapter = tmp_path / "chapter.txt"
    chapter.write_text(CHAPTER, encoding="utf-8")
    chunks_dir, out = tmp_path / "chunks", tmp_path / "chapter.wav"
    command = _command(demo_bundle, chapter, out, chunks_dir, "--seed", "11")
    holder = Holder(chunks_dir)
    try:
        assert main(command) != 0
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and f"--chunks-dir {chunks_dir} is in use by another" in err
        assert list(chunks_dir.iterdir()) == [] and not out.exists()
    finally:
        holder.release()
    assert main(command) == 0 and out.is_file()


def test_the_same_command_twice_at_once_is_refused_and_the_first_run_keeps_its_chunks(demo_bundle, tmp_path,  # noqa: F811
                                                                                  capsys, monkeypatch):
    """Without --chunks-dir both runs would keep chunks in one cache folder (named by the command): the second
    would read the first's chunks as made, or start the folder afresh under it. It is refused instead."""
    from engine import ChunkJournal as Journal

    cache = tmp_path / "cache"
    monkeypatch.setenv("QWEN3TTS_CACHE_DIR", str(cache))
    chapter = tmp_path / "chapter.txt"
    chapter.write_text(CHAPTER, encoding="utf-8")
    out = tmp_path / "chapter.wav"
    command = _command(demo_bundle, chapter, out, None, "--seed", "11")

    made = []

    def stop_after_three(self, chunk, result, attempts=1):
        if len(made) == 3:
            raise KeyboardInterrupt
        made.append(chunk)
        keep(self, chunk, result, attempts)

    keep = Journal.keep
    with monkeypatch.context() as m:
        m.setattr(Journal, "keep", stop_after_three)
        assert main(command) == 130
    [folder] = _run_folders(cache)
    kept = _made(folder)
    assert len(kept) == 3
    capsys.readouterr()
    holder = Holder(folder)  # the same command, running now in another process
    try:
        assert main(command) != 0
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "The same command is running now" in err
        assert _made(folder) == kept and not out.exists()
    finally:
        holder.release()
    assert main(command) == 0  # and once it has ended, the same command continues its chunks
    assert "3 of 30 chunks were made before" in capsys.readouterr().err and out.is_file()
