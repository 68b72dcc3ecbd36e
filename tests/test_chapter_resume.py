"""Hours of work are not lost: a chapter spoken with `qwen3tts synth` keeps every chunk as it is made (in
--chunks-dir, else in the cache folder under the command's request), and the same command after a kill -9 (a real
process, on the demo model) or Ctrl+C continues where it stopped: the chunks made before are not generated again and the output is sample for sample the file of an unbroken run.
The runner's side (Synthesizer.speak with `made`) is tested on the demo model too. Two runs never keep chunks in one
folder at once: ChunkJournal.claim holds it, and synth refuses in one line a folder another process holds now."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from engine import (
    GenerationSettings,
    JournalInUse,
    LongTextOptions,
    SynthesisRequest,
    Synthesizer,
    run_speech,
)
from engine.longform.journal import ChunkJournal
from qwen3tts_cli.main import main
from qwen3tts_cli.resume import RUNS_FOLDER

ROOT = Path(__file__).resolve().parent.parent
REF = ROOT / "tests" / "fixtures" / "audio" / "en_24k_mono_2s.wav"
CHAPTER = "\n\n".join(" ".join(f"Sentence {p * 6 + s + 1} of the chapter." for s in range(6)) for p in range(5))
CHUNKS = 30


@pytest.fixture(scope="module")
def demo_bundle(tmp_path_factory) -> Path:
    from engine.demo import make_demo_bundle

    return make_demo_bundle(tmp_path_factory.mktemp("demo") / "bundle")


def _command(bundle: Path, chapter: Path, out: Path, chunks_dir: Path | None, *extra: str) -> list[str]:
    args = ["synth", "--model", str(bundle), "--text-file", str(chapter), "--ref", str(REF), "--x-vector-only",
            "--max-chars", "30", "--max-frames", "4", "--batch-size", "1", "--threads", "1", "--float",
            "-o", str(out), *extra]
    return args + (["--chunks-dir", str(chunks_dir)] if chunks_dir is not None else [])


def _made(chunks_dir: Path) -> list[str]:
    return sorted(p.name for p in chunks_dir.glob("[0-9][0-9][0-9][0-9].json")) if chunks_dir.is_dir() else []


def _killed_when(command: list[str], enough) -> None:
    """Run `qwen3tts COMMAND` in a process of its own and kill -9 it once enough() says so."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    run = subprocess.Popen([sys.executable, "-m", "qwen3tts_cli", *command], cwd=ROOT, env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        end = time.monotonic() + 300
        while not enough() and run.poll() is None and time.monotonic() < end:
            time.sleep(0.02)
        assert run.poll() is None, f"the run ended before it could be killed: {run.stderr.read()[-1000:]}"
        run.send_signal(signal.SIGKILL)  # kill -9: no clean-up of any kind
        run.wait()
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()


def _chapter_in_cache(tmp_path: Path, monkeypatch) -> tuple[Path, Path]:
    """(the cache folder, set for this test, where synth keeps chunks without --chunks-dir; the chapter's file)."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("QWEN3TTS_CACHE_DIR", str(cache))
    chapter = tmp_path / "chapter.txt"
    chapter.write_text(CHAPTER, encoding="utf-8")
    return cache, chapter


def _stopped_after(chunks: int, monkeypatch, command: list[str]) -> None:
    """`qwen3tts COMMAND` in this process, stopped by Ctrl+C while the chunk after the first `chunks` is being
    kept."""
    real_keep, kept = ChunkJournal.keep, []

    def interrupted(self, chunk, result, attempts=1):
        if len(kept) == chunks:
            raise KeyboardInterrupt
        kept.append(chunk)
        real_keep(self, chunk, result, attempts)

    with monkeypatch.context() as m:
        m.setattr(ChunkJournal, "keep", interrupted)
        assert main(command) == 130


def _run_folders(cache: Path) -> list[Path]:
    """The folders synth keeps long texts' chunks in without --chunks-dir."""
    return sorted(p for p in (cache / RUNS_FOLDER).iterdir()) if (cache / RUNS_FOLDER).is_dir() else []


def test_a_chapter_killed_mid_way_continues_where_it_stopped(demo_bundle, tmp_path, capsys):
    chapter = tmp_path / "chapter.txt"
    chapter.write_text(CHAPTER, encoding="utf-8")
    chunks_dir, out = tmp_path / "chunks", tmp_path / "chapter.wav"
    command = _command(demo_bundle, chapter, out, chunks_dir, "--seed", "11")
    _killed_when(command, lambda: len(_made(chunks_dir)) >= 5)
    kept = _made(chunks_dir)
    assert 5 <= len(kept) < CHUNKS and not out.exists()

    assert main(command) == 0  # the same command again
    err = capsys.readouterr().err
    assert f"continuing in {chunks_dir}: {len(kept)} of {CHUNKS} chunks were made before" in err
    assert _made(chunks_dir) == [] and not (chunks_dir / "journal.json").exists()  # complete: the journal goes
    assert sorted(p.name for p in chunks_dir.glob("*.wav")) == [f"{i:04d}.wav" for i in range(1, CHUNKS + 1)]
    resumed, sr = sf.read(out, dtype="float32")

    unbroken = tmp_path / "unbroken.wav"
    assert main(_command(demo_bundle, chapter, unbroken, None, "--seed", "11")) == 0, capsys.readouterr().err
    expected, _ = sf.read(unbroken, dtype="float32")
    assert sr == 24000 and len(resumed) == len(expected) and np.array_equal(resumed, expected)


def test_without_a_chunks_folder_the_same_command_continues_a_killed_chapter(demo_bundle, tmp_path, capsys,
                                                                             monkeypatch):
    """No --chunks-dir: the chunks are kept in the cache folder under the command's request, found again by the
    same command after a kill -9, and removed once the output is written."""
    cache, chapter = _chapter_in_cache(tmp_path, monkeypatch)
    out = tmp_path / "chapter.wav"
    command = _command(demo_bundle, chapter, out, None, "--seed", "11")
    _killed_when(command, lambda: any(len(_made(f)) >= 5 for f in _run_folders(cache)))
    [folder] = _run_folders(cache)
    kept = _made(folder)
    assert 5 <= len(kept) < CHUNKS and not out.exists()

    other = tmp_path / "other.wav"  # another output is another request: made from the start, beside it
    assert main(_command(demo_bundle, chapter, other, None, "--seed", "11")) == 0
    assert "made before" not in capsys.readouterr().err and _run_folders(cache) == [folder]

    assert main(command) == 0  # the same command again
    err = capsys.readouterr().err
    assert f"{len(kept)} of {CHUNKS} chunks were made before (kept in {folder}" in err
    assert _run_folders(cache) == []  # the output is written: its chunks go
    assert np.array_equal(sf.read(out, dtype="float32")[0], sf.read(other, dtype="float32")[0])


@pytest.mark.parametrize("where", ["--chunks-dir", "the cache folder"])
def test_an_interrupted_run_without_a_seed_continues_with_its_own(demo_bundle, tmp_path, capsys, monkeypatch, where):
    """The seed a run without --seed drew is kept with its chunks: the same command (no --seed) continues with it,
    which is what running it again after a stop means; the line saying so names the folder to remove instead."""
    cache, chapter = _chapter_in_cache(tmp_path, monkeypatch)
    chunks_dir, out = (tmp_path / "chunks" if where == "--chunks-dir" else None), tmp_path / "chapter.wav"
    _stopped_after(3, monkeypatch, _command(demo_bundle, chapter, out, chunks_dir))
    assert "the same command continues there" in capsys.readouterr().err
    folder = chunks_dir or _run_folders(cache)[0]
    seed = json.loads((folder / "journal.json").read_text())["settings"]["seed"]
    assert isinstance(seed, int) and _made(folder) == ["0001.json", "0002.json", "0003.json"]

    assert main(_command(demo_bundle, chapter, out, chunks_dir)) == 0  # no --seed: the stopped run's
    assert "3 of 30 chunks were made before" in capsys.readouterr().err
    unbroken = tmp_path / "unbroken.wav"
    assert main(_command(demo_bundle, chapter, unbroken, None, "--seed", str(seed))) == 0
    assert np.array_equal(sf.read(out, dtype="float32")[0], sf.read(unbroken, dtype="float32")[0])
    assert _run_folders(cache) == []


def test_kept_chunks_this_command_cannot_use_are_made_again(demo_bundle, tmp_path, capsys, monkeypatch):
    """Without --chunks-dir, a journal in the command's cache folder that cannot be read (here a link planted in
    place of it) is said in one line and replaced; the link's target is never written."""
    cache, chapter = _chapter_in_cache(tmp_path, monkeypatch)
    command = _command(demo_bundle, chapter, tmp_path / "a.wav", None, "--seed", "11")
    _stopped_after(0, monkeypatch, command)
    [folder] = _run_folders(cache)
    victim = tmp_path / "victim.json"
    victim.write_text("precious")
    (folder / "journal.json").unlink()
    (folder / "journal.json").symlink_to(victim)
    capsys.readouterr()
    assert main(command) == 0
    err = capsys.readouterr().err
    assert [line for line in err.splitlines() if "cannot be used" in line and "symbolic link" in line
            and "starting afresh" in line]
    assert victim.read_text() == "precious" and _run_folders(cache) == [] and (tmp_path / "a.wav").is_file()


def test_a_cache_that_refuses_chunks_never_stops_the_run(demo_bundle, tmp_path, capsys, monkeypatch):
    """The chunks kept without --chunks-dir are a safeguard nobody asked for: a full disk there is said once and
    the recording is made all the same (what was kept goes with the output written)."""
    import errno

    cache, chapter = _chapter_in_cache(tmp_path, monkeypatch)
    real_keep, calls = ChunkJournal.keep, []

    def full_after_two(self, chunk, result, attempts=1):
        calls.append(chunk)
        if len(calls) > 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_keep(self, chunk, result, attempts)

    monkeypatch.setattr(ChunkJournal, "keep", full_after_two)
    out = tmp_path / "a.wav"
    assert main(_command(demo_bundle, chapter, out, None, "--seed", "11")) == 0
    err = capsys.readouterr().err
    assert len([line for line in err.splitlines() if "not kept" in line]) == 1 and len(calls) == 3
    assert _run_folders(cache) == []
    monkeypatch.setattr(ChunkJournal, "keep", real_keep)
    unbroken = tmp_path / "unbroken.wav"
    assert main(_command(demo_bundle, chapter, unbroken, None, "--seed", "11")) == 0
    assert np.array_equal(sf.read(out, dtype="float32")[0], sf.read(unbroken, dtype="float32")[0])


@pytest.mark.parametrize("change, words", [
    (["--seed", "12"], "seed 11"),
    (["--seed", "11", "--temperature", "0.5"], "other settings (temperature)"),
    (["--seed", "11", "--max-chars", "60"], "another text"),
])
def test_a_folder_of_another_run_is_refused_in_one_line(demo_bundle, tmp_path, capsys, monkeypatch, change, words):
    chapter = tmp_path / "chapter.txt"
    chapter.write_text(CHAPTER, encoding="utf-8")
    chunks_dir = tmp_path / "chunks"

    def stop(self, chunk, result, attempts=1):
        raise KeyboardInterrupt

    monkeypatch.setattr(ChunkJournal, "keep", stop)
    assert main(_command(demo_bundle, chapter, tmp_path / "a.wav", chunks_dir, "--seed", "11")) == 130
    capsys.readouterr()
    before = sorted(os.listdir(chunks_dir))
    assert main(_command(demo_bundle, chapter, tmp_path / "b.wav", chunks_dir, *change)) == 2
    err = capsys.readouterr().err
    assert f"holds chunks of {words}" in err and err.count("\n") == 1
    assert sorted(os.listdir(chunks_dir)) == before


def test_chunks_made_before_go_into_the_recording_as_they_were(demo_bundle, tmp_path):
    synth = Synthesizer(demo_bundle, threads=1)
    voice = synth.create_voice(str(REF))
    settings = GenerationSettings(seed=5, max_frames=4)
    options = LongTextOptions(max_chars=30)

    def recording(made=None) -> tuple[np.ndarray, list[int]]:
        pieces, generated = [], []
        events = synth.speak(SynthesisRequest(CHAPTER, voice, "english", settings, options=options), made=made)
        run_speech(events, on_audio=lambda ev: (pieces.append(ev.samples),
                                                        ev.attempts and generated.append(ev.chunk)))
        return np.concatenate(pieces), generated

    whole, generated = recording()
    assert generated == list(range(CHUNKS))
    chunk_results = {}
    events = synth.speak(SynthesisRequest(CHAPTER, voice, "english", settings, options=options))
    run_speech(events, on_audio=lambda ev: chunk_results.__setitem__(ev.chunk, ev.result))
    made = {i: (lambda r=chunk_results[i]: r) for i in (0, 1, 2, 7, 29)}  # a kill at 3; side by side: 7 too
    again, generated = recording(made)
    assert generated == [i for i in range(CHUNKS) if i not in made]
    assert np.array_equal(again, whole)


# ------------------------------------------------------------------------------------------- one run at a time

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


def test_synth_refuses_a_chunks_dir_another_run_holds(demo_bundle, tmp_path, capsys):
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


def test_the_same_command_twice_at_once_is_refused_and_the_first_run_keeps_its_chunks(demo_bundle, tmp_path,
                                                                                  capsys, monkeypatch):
    """Without --chunks-dir both runs would keep chunks in one cache folder (named by the command): the second
    would read the first's chunks as made, or start the folder afresh under it. It is refused instead."""
    cache, chapter = _chapter_in_cache(tmp_path, monkeypatch)
    out = tmp_path / "chapter.wav"
    command = _command(demo_bundle, chapter, out, None, "--seed", "11")
    _stopped_after(3, monkeypatch, command)
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
