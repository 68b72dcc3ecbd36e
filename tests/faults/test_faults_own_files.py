"""The app's own files are never written through a link.

A link planted where the app keeps a file of its own (a tuning record, the verified-files record, the saved text,
the batch lines, a download's pending.json and parts, the models-folder pointer, the move journal, a take, a
library voice, the log, the settings, the single-window lock, an unfinished long text's chunks) once had its target replaced by the app's JSON; run as root, that target
was /etc/passwd. The files are not listed by hand: the app is used in a private home (synth, which verifies the
bundle and tunes; a model download and install from a hub on 127.0.0.1; moving the models folder; the window's
data files, its lock and a long text it stops and continues; the log) with every write the process makes recorded (Python's audit hook: opens for writing,
renames), and each name written must be one of OWN_FILES (or a user's output, or inside a folder the process has
just made for itself). Then the same is done in a second home with a link planted at every one of those names:
the targets stay as they were, the links stay links, and the app says so in one line or carries on.
"""

from __future__ import annotations

import fnmatch
import gc
import logging
import os
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from engine.io.fileio import OwnFileError, open_own_file, read_own_file, write_own_file
from engine.runtime.cache_folder import merge_old_folder
from engine.voice import Voice
from tests.bundles import bundle_for
from tests.hub_server import HubServer, Repo

from .conftest import REF, ROOT, run_cli
from .test_faults_take_history import _take

TINY = ROOT / "tests" / "fixtures" / "models" / "tiny06b"
REPO = "Qwen/Qwen3-TTS-12Hz-0.6B-Base"
NAME = "Qwen3-TTS-12Hz-0.6B-Base"

# Every name the app writes in its folders, relative to the private home (fnmatch patterns; "*" crosses "/").
OWN_FILES = {
    "tuning record": ".cache/Qwen3-TTS Studio/tuning/*.json",
    "verified bundle files": ".cache/Qwen3-TTS Studio/verified-bundle-files.json",
    "models-folder pointer": ".config/Qwen3-TTS Studio/models-folder.txt",
    "download bookkeeping": "*/models/.downloads/*/pending.json",
    "download part": "*/models/.downloads/*.part",
    "download, checked": "*/models/.downloads/*",  # a part renamed to its name once its checksum matched
    "download lock": "*/models/.locks/*.lock",
    "move journal": "*/moved/.move.json",
    "saved text": ".local/share/Qwen3-TTS Studio/text.txt",
    "batch lines": ".local/share/Qwen3-TTS Studio/batch lines.json",
    "library voice": ".local/share/Qwen3-TTS Studio/voices/*.qvoice",
    "log": ".local/state/Qwen3-TTS Studio/log/qwen3tts-gui.log",
    "chunk journal": "chunks/*",  # the app's bookkeeping, in a folder the user named
    "window lock": ".local/share/Qwen3-TTS Studio/window.lock",
    "unfinished text journal": ".local/share/Qwen3-TTS Studio/unfinished/*",  # continued in its folder
}
# Written inside a folder the process made for itself a moment before (exclusively, or after removing whatever
# had its name): nothing can be planted there first.
FRESH = {
    "a take being kept": ".local/share/Qwen3-TTS Studio/takes/.*.partial/*",
    "a take put in place": ".local/share/Qwen3-TTS Studio/takes/[0-9]*",
    "a model being converted": "*/models/.installing-*",
    "an installed model": f"*/models/{NAME}",
    "models being moved": "*/moved/.moving-*",
    "a moved model": f"*/moved/{NAME}",
    # folders renamed to a name (a rename never follows a link there: a link in the way makes it fail)
    "the locks folder, put back after a move": "*/models/.locks",
    "a model set aside for removal": "*/models/.removing-*",
}
USERS = {"the user's output": "out/*"}


def in_home(home: Path, monkeypatch) -> Path:
    """Every folder of the app under `home`, as on a fresh account (no folder overridden by QWEN3TTS_*)."""
    home.mkdir(parents=True, exist_ok=True)
    monkeypatch.setenv("HOME", str(home))
    for var, sub in (("XDG_CACHE_HOME", ".cache"), ("XDG_CONFIG_HOME", ".config"), ("XDG_DATA_HOME", ".local/share"),
                     ("XDG_STATE_HOME", ".local/state")):
        monkeypatch.setenv(var, str(home / sub))
    for var in ("QWEN3TTS_CACHE_DIR", "QWEN3TTS_MODELS_DIR", "HF_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_HOME", str(home.parent / f"{home.name}-hf"))
    monkeypatch.setattr("os.getloadavg", lambda: (0.2, 0.2, 0.2))
    import huggingface_hub.constants

    from engine.store import installer

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(installer, "free_bytes", lambda folder: 1 << 40)
    return home


class Writes:
    """The names this process writes under a folder while `recording`: files opened for writing (not exclusive
    creations, which never follow a link) and rename targets."""

    def __init__(self) -> None:
        self.root: str | None = None
        self.names: set[str] = set()
        sys.addaudithook(self._hook)  # cannot be removed: it records only while root is set

    def _hook(self, event: str, args: tuple) -> None:
        if self.root is None:
            return
        if event == "open" and isinstance(args[0], (str, os.PathLike)):
            path, mode, flags = args
            writes = flags & (os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC)
            exclusive = flags & os.O_CREAT and flags & os.O_EXCL
            unnamed = flags & _TMPFILE == _TMPFILE  # a file with no name (filelock's probe of the folder)
            if writes and not exclusive and not unnamed:
                self._add(path)
        elif event == "os.rename" and isinstance(args[1], (str, os.PathLike)):
            self._add(args[1])

    def _add(self, path) -> None:
        full = os.path.abspath(os.fspath(path))
        if self.root and full.startswith(self.root + os.sep):
            self.names.add(os.path.relpath(full, self.root))


_TMPFILE = getattr(os, "O_TMPFILE", -1)
_writes: list[Writes] = []


def recorder() -> Writes:
    if not _writes:
        _writes.append(Writes())
    return _writes[0]


def use_the_app(home: Path, capsys, monkeypatch) -> list[str]:
    """Everything that writes the app's own files, once; returns what was said on stderr, line by line."""
    from engine.store import ModelStore, move_store
    from qwen3tts_gui.data.batch_store import LINES_FILE, save_rows
    from qwen3tts_gui.data.paths import data_dir, log_file, takes_dir, voices_dir
    from qwen3tts_gui.data.saved_text import TEXT_FILE, save_text
    from qwen3tts_gui.data.take_store import TakeStore
    from qwen3tts_gui.data.voices import VoiceLibrary
    from qwen3tts_gui.diagnostics import setup_logging

    said: list[str] = []
    (home / "out").mkdir(exist_ok=True)
    # synth: verifies the bundle's files and tunes (the first use of a model on this computer)
    code, err = run_cli(capsys, "synth", "--model", bundle_for("tiny06b", "fp32"), "--text", "Hello.", "-o",
                        home / "out" / "a.wav", "--greedy", "--max-frames", "2", "--language", "english",
                        "--ref", REF, "--x-vector-only", "--chunks-dir", home / "chunks")
    said += err.splitlines()
    assert "Traceback" not in err and (code == 0 or len(err.strip().splitlines()) <= 2), err
    # a model downloaded and installed, then the models folder moved
    with HubServer({REPO: Repo.from_folder(TINY)}) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        code, err = run_cli(capsys, "models", "download", REPO, "--precision", "fp32")
        said += err.splitlines()
        assert "Traceback" not in err, err
    try:
        move_store(ModelStore(), home / "data" / "moved")
    except OSError as e:
        said.append(str(e))
    except Exception as e:  # noqa: BLE001 - an engine error is a line for the user
        said.append(str(e))
    # the window's files
    for problem in (save_text(data_dir() / TEXT_FILE, "Hello again."),
                    save_rows(data_dir() / LINES_FILE, [("A line.", "Anna", "english", "")])):
        if problem:
            said.append(problem)
    store = TakeStore(takes_dir())
    store.save(_take(store.claim_number(0)))
    library = VoiceLibrary(voices_dir())
    voice = Voice(xvector=np.zeros(8, np.float32), model_id="test", name="Anna")
    try:
        library.rename(library.add(voice), "Anna")  # saved again in place
    except Exception as e:  # noqa: BLE001 - a VoiceError is what the library shows
        said.append(str(e))
    setup_logging(log_file())
    said += use_the_window(home)
    return said


LONG_TEXT = "One sentence to speak first. A second one follows it. And a third one ends the text."


def use_the_window(home: Path) -> list[str]:
    """The window's files beside its data: the single-window lock it takes at the start, and a long text spoken
    with its chunks kept in <data>/unfinished/ as the window does it (stopped after its first chunk, then
    continued at the next start and taken). Returns what the app said (its status line, its log's warnings)."""
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication

    from qwen3tts_gui.context import AppContext
    from qwen3tts_gui.controllers.generation_controller import UNFINISHED
    from qwen3tts_gui.controllers.unfinished import Unfinished
    from qwen3tts_gui.data.paths import data_dir
    from qwen3tts_gui.data.settings import Settings
    from qwen3tts_gui.engine_adapter import (
        Cancelled,
        GenerationSettings,
        LongTextOptions,
        SynthesisRequest,
        open_synthesizer,
    )
    from qwen3tts_gui.single_instance import SingleInstance
    from qwen3tts_gui.workers import speak_whole
    from tests.gui.fakes import FakeAudioBackend

    said: list[str] = []
    app = QApplication.instance() or QApplication([])  # noqa: F841 - the window's objects need it
    heard = _Heard()
    logging.getLogger("qwen3tts_gui").addHandler(heard)
    try:
        for _ in ("the first start", "a later one"):  # a later start opens the lock file the first one made
            instance = SingleInstance(data_dir())
            instance.start()
            if instance.problem:
                said.append(instance.problem)
            del instance  # the lock is released with it, as when the app ends
            gc.collect()
        settings = Settings(QSettings(str(home.parent / f"{home.name}-settings.ini"), QSettings.Format.IniFormat))
        ctx = AppContext(settings, FakeAudioBackend())
        unfinished = Unfinished(ctx, None, data_dir() / UNFINISHED)  # type: ignore[arg-type]
        unfinished.status.connect(lambda message, ms: said.append(message))
        synth = open_synthesizer(bundle_for("tiny06b", "fp32"), threads=1)
        voice = synth.create_voice(str(REF), name="Anna")
        options = LongTextOptions(max_chars=40)
        journal, chosen = unfinished.begin(synth, LONG_TEXT, voice, "Anna", "english",
                                           GenerationSettings(greedy=True, max_frames=2), None, options)

        def after_the_first_chunk() -> None:
            if journal is not None and journal.made():
                raise Cancelled("closed")

        request = SynthesisRequest(LONG_TEXT, voice, "english", chosen, options=options)
        try:
            speak_whole(synth, request, after_the_first_chunk, journal=journal, notice=said.append)
        except Cancelled:
            pass
        note = unfinished.stopped(journal)
        unfinished.asked.clear()
        for kept in unfinished.journals():  # the next start: each unfinished text continued where it stopped
            plan = kept.plan
            again = SynthesisRequest(plan.text, kept.voice(), plan.language, plan.settings,
                                     options=replace(options, max_chars=plan.max_chars, join=plan.join))
            speak_whole(synth, again, lambda: None, journal=kept, notice=said.append)
            unfinished.taken(kept)()
        assert journal is None or note, "the text was not stopped with a chunk kept"
    finally:
        logging.getLogger("qwen3tts_gui").removeHandler(heard)
    return said + heard.lines


class _Heard(logging.Handler):
    """The app's log warnings, as lines."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def kind_of(name: str) -> str | None:
    for table in (OWN_FILES, FRESH, USERS):
        for kind, pattern in table.items():
            if fnmatch.fnmatch(name, pattern) or fnmatch.fnmatch(name, pattern + "/*"):
                return kind
    return None


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> set[str]:
    """The names written while the app is used once in a clean private home."""
    mp = pytest.MonkeyPatch()
    home = in_home(tmp_path_factory.mktemp("clean") / "home", mp)
    rec = recorder()
    rec.root, rec.names = str(home), set()
    made = home / "out" / "a.wav"

    try:
        import contextlib
        import io

        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            use_the_app(home, _Capture(err), mp)
    finally:
        rec.root = None
        mp.undo()
    assert made.is_file(), err.getvalue()
    return set(rec.names)


class _Captured:
    def __init__(self, err: str = ""):
        self.out, self.err = "", err


class _Capture:
    """capsys for a module-scoped run: what was written to the redirected stderr since the last read."""

    def __init__(self, stream):
        self.stream, self.seen = stream, 0

    def readouterr(self):
        text = self.stream.getvalue()
        new, self.seen = text[self.seen:], len(text)
        return _Captured(new)


def test_every_name_the_app_writes_is_listed(written):
    assert written, "nothing was recorded"
    unlisted = sorted(name for name in written if kind_of(name) is None)
    assert not unlisted, f"written by the app and in no list here: {unlisted}"
    own = {kind_of(name) for name in written} & set(OWN_FILES)
    assert own == set(OWN_FILES), f"listed but never written (a stale entry): {set(OWN_FILES) - own}"


def _plant(home: Path, names: set[str], outside: Path, dangling: bool) -> dict[Path, Path]:
    """A link at each own-file name, to a file of its own outside (or, dangling, to a name nothing has)."""
    links = {}
    for i, name in enumerate(sorted(names)):
        link, target = home / name, outside / f"target-{i}"
        if not dangling:
            target.write_text(f"precious {i}")
        link.parent.mkdir(parents=True, exist_ok=True)
        if link.is_dir() and not link.is_symlink():
            continue  # a folder the app made (a model's): its files are listed one by one
        link.unlink(missing_ok=True)
        link.symlink_to(target)
        links[link] = target
    return links


# a link there stops its command (or the text's continuation) before the other files are written
STOPPERS = {"download lock", "chunk journal", "unfinished text journal"}


@pytest.mark.parametrize("kinds, dangling", [
    ("the others", False), ("the others", True), ("the stoppers", False), ("the stoppers", True),
], ids=["links to files", "dangling links", "links to files at the lock and journal", "dangling there"])
def test_a_link_at_every_own_file_is_never_written_through(written, tmp_path, capsys, monkeypatch, kinds, dangling):
    """A link at the download lock or in the chunk journal stops that command (in one line) before its other files
    are written: those get runs of their own."""
    own = {name for name in written if kind_of(name) in OWN_FILES
           and (kind_of(name) in STOPPERS) == (kinds == "the stoppers")}
    home = in_home(tmp_path / "home", monkeypatch)
    outside = tmp_path / "outside"
    outside.mkdir()
    links = _plant(home, own, outside, dangling)
    assert links
    said = use_the_app(home, capsys, monkeypatch)
    for link, target in links.items():
        if dangling:
            assert not os.path.lexists(target), f"created through the link at {link.relative_to(home)}"
        else:
            i = int(target.name.split("-")[1])
            assert target.read_text() == f"precious {i}", f"written through the link at {link.relative_to(home)}"
    assert sorted(os.listdir(outside)) == sorted(t.name for t in links.values() if not dangling)
    assert not [line for line in said if "Traceback" in line]
    # where the app could not do without the file, it said which link was in the way
    for kind, word in (("tuning record", "record"), ("saved text", "text"), ("batch lines", "lines"),
                       ("download lock", "lock"), ("chunk journal", "journal"), ("window lock", "single-window"),
                       ("unfinished text journal", "unfinished text")):
        if any(kind_of(str(link.relative_to(home))) == kind for link in links):
            assert [line for line in said if "is a symbolic link" in line and word in line], (kind, said)


# -------------------------------------------------------------------------------------------------- the writer


def test_write_own_file_refuses_a_link_and_leaves_it(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("root:x:0:0")
    link = tmp_path / "record.json"
    link.symlink_to(victim)
    with pytest.raises(OwnFileError, match=r"symbolic link \(to .*victim\).*remove the link"):
        write_own_file(link, b"{}")
    assert victim.read_text() == "root:x:0:0" and link.is_symlink()
    dangling = tmp_path / "pointer.txt"
    dangling.symlink_to(tmp_path / "nowhere" / "made")
    with pytest.raises(OwnFileError):
        write_own_file(dangling, b"x")
    assert not (tmp_path / "nowhere").exists()
    (tmp_path / "folder").mkdir()
    with pytest.raises(OwnFileError, match="folder"):
        write_own_file(tmp_path / "folder", b"x")
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []  # no temporary left


def test_write_own_file_replaces_a_hard_linked_file_without_writing_the_other_name(tmp_path):
    other = tmp_path / "elsewhere"
    other.write_text("someone else's")
    mine = tmp_path / "mine.json"
    os.link(other, mine)
    write_own_file(mine, b"new")
    assert mine.read_bytes() == b"new" and other.read_text() == "someone else's"


def test_open_and_read_own_file_refuse_links_and_pipes(tmp_path):
    victim = tmp_path / "victim"
    victim.write_bytes(b"x" * 10)
    link = tmp_path / "a.part"
    link.symlink_to(victim)
    with pytest.raises(OwnFileError):
        open_own_file(link, truncate=True)
    with pytest.raises(OwnFileError):
        read_own_file(link, 100)
    assert victim.read_bytes() == b"x" * 10
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(OwnFileError, match="not a regular file"):
        read_own_file(fifo, 100)  # at once: a plain open would wait for a writer
    with pytest.raises(OwnFileError, match="not a regular file"):
        open_own_file(fifo, truncate=False)
    with open_own_file(tmp_path / "b.part", truncate=False) as f:
        f.write(b"abc")
    assert read_own_file(tmp_path / "b.part", 100) == b"abc"
    with pytest.raises(ValueError, match="more than"):
        read_own_file(tmp_path / "b.part", 2)


def test_a_download_part_planted_as_a_link_stops_the_download(tmp_path, monkeypatch):
    """A link put at a part's name while a download runs (a resumable one is found by name)."""
    import huggingface_hub.constants

    from engine.store.transfer import fetch_into

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    part = tmp_path / "config.json.part"
    part.symlink_to(victim)
    body = (TINY / "config.json").read_bytes()
    with HubServer({REPO: Repo.from_folder(TINY)}) as server:
        url = f"{server.url}/{REPO}/resolve/main/config.json"
        with pytest.raises(OSError, match="symbolic link"):
            fetch_into(url, {}, part, len(body), 10.0, lambda n: None, lambda: False)
    assert victim.read_bytes() == b"precious"


# -------------------------------------------------------------------------------------------------- the settings


def test_a_link_in_place_of_the_settings_file_is_set_aside_not_written_through(tmp_path):
    """Qt writes the settings file itself (not seen by the audit hook): a link there is renamed aside first."""
    victim = tmp_path / "victim.conf"
    victim.write_text("[General]\nprecious=1\n")
    config = tmp_path / "config"
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(ROOT)!r})
        from PySide6.QtCore import QCoreApplication
        from qwen3tts_gui import APP_ID, APP_NAME
        from qwen3tts_gui.data import settings as s
        app = QCoreApplication([])
        QCoreApplication.setOrganizationName(APP_NAME)
        QCoreApplication.setApplicationName(APP_ID)
        files = s._settings_files()
        files[0].parent.mkdir(parents=True, exist_ok=True)
        files[0].symlink_to({str(victim)!r})
        settings = s.user_settings()
        settings.model_path = "/somewhere/else"
        settings.sync()
        print(files[0])
    """)
    env = {**os.environ, "XDG_CONFIG_HOME": str(config), "HOME": str(tmp_path), "QT_QPA_PLATFORM": "offscreen"}
    r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    path = Path(r.stdout.strip().splitlines()[-1])
    assert victim.read_text() == "[General]\nprecious=1\n"
    assert path.is_file() and not path.is_symlink() and "somewhere" in path.read_text()
    aside = path.with_name(path.name + ".damaged")
    assert aside.is_symlink() and os.readlink(aside) == str(victim)  # the user's link kept, under another name


# -------------------------------------------------------------------------------------------------- one cache folder


def test_the_old_cache_folder_is_moved_into_the_one_cache_folder_without_following_links(tmp_path, monkeypatch):
    from engine.runtime import cache_folder

    old, new = tmp_path / ".cache" / "qwen3tts-studio", tmp_path / ".cache" / "Qwen3-TTS Studio"
    old.mkdir(parents=True)
    (old / "verified-bundle-files.json").write_text('{"a": 1}')
    (old / "tuning").mkdir()
    (old / "tuning" / "k.json").write_text("{}")
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (old / "tuning" / "planted.json").symlink_to(victim)
    new.mkdir(parents=True)
    (new / "tuning").mkdir()
    (new / "tuning" / "planted.json").symlink_to(tmp_path / "nowhere")  # already there: left alone
    moved = merge_old_folder(old, new)
    assert sorted(p.relative_to(new).as_posix() for p in moved) == ["tuning/k.json", "verified-bundle-files.json"]
    assert (new / "verified-bundle-files.json").read_text() == '{"a": 1}' and not (old / "tuning" / "k.json").exists()
    assert (old / "tuning" / "planted.json").is_symlink() and victim.read_text() == "precious"
    assert not (tmp_path / "nowhere").exists()
    # the app's one folder: the verified-files record and the tuning records live there, the old one moved in
    monkeypatch.delenv("QWEN3TTS_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / ".cache"))
    monkeypatch.setattr(cache_folder, "_merged", set())
    (old / "verified-bundle-files.json").write_text('{"b": 2}')
    (new / "verified-bundle-files.json").unlink()
    assert cache_folder.cache_dir() == new and (new / "verified-bundle-files.json").read_text() == '{"b": 2}'
    from engine.runtime import bundle, tuning

    assert tuning.cache_dir is cache_folder.cache_dir and bundle.cache_dir is cache_folder.cache_dir


# -------------------------------------------------------------------------------------------------- every writer

# The writers that follow a link on purpose (write_atomic, place, target_of: a path the user named, whose link the
# user made) and the raw writes (open for writing, write_text, copyfile...) that happen only inside a folder the
# process has just made for itself. Every other file the app writes goes through write_own_file / open_own_file.
# A new writer fails the test below until it is put in one of these lists (or, better, uses write_own_file).
FOLLOWS_LINKS_ON_PURPOSE = {
    ("engine/io/audio.py", "save_audio"): "an audio file the user named (synth -o, the app's Save)",
    ("engine/io/audio_writer.py", "AudioFileWriter.__init__"): "a long recording the user named",
    ("engine/io/audio_writer.py", "AudioFileWriter.commit"): "the same",
    ("engine/voice.py", "Voice.save"): "a voice file the user named (voice create -o, the app's Export); "
                                       "own_file=True for the library's",
    ("qwen3tts_cli/common.py", "save_npy_atomic"): "--codes-out / --codes files the user named",
}
RAW_WRITES_IN_A_FRESH_FOLDER = {
    ("engine/runtime/ncnn_graph.py", "Graph.save"): "a conversion's hidden work folder",
    ("engine/runtime/bundle_writer.py", "BundleWriter.finish"): "the same",
    ("engine/runtime/bundle_writer.py", "BundleWriter.copy_file"): "the same",
    ("engine/convert/text.py", "convert"): "the same",
    ("engine/convert/q8_check.py", "move_talker_part"): "the same (the check's folder)",
    ("engine/demo.py", "make_demo_bundle"): "a temporary folder (tempfile.TemporaryDirectory)",
    ("engine/store/move.py", "_copy_file"): "the move's staging folder, made by the move",
    ("engine/io/audio_writer.py", "AudioFileWriter.commit"): "its own temporary file (made exclusively)",
}
_FOLLOWING = {"write_atomic", "place", "target_of"}
_RAW = {"write_text", "write_bytes", "copyfile", "copy2", "copytree"}


def _writers() -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    """(sites naming a link-following writer, sites writing raw) in the app's code, by file and function."""
    import ast

    following: set[tuple[str, str]] = set()
    raw: set[tuple[str, str]] = set()

    def visit(node, scope: str, rel: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = scope
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                inner = f"{scope}.{child.name}" if scope else child.name
            if isinstance(child, ast.Name) and child.id in _FOLLOWING and isinstance(child.ctx, ast.Load):
                following.add((rel, scope))
            elif isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute) and child.func.attr in _RAW:
                raw.add((rel, scope))
            elif isinstance(child, ast.Call) and isinstance(child.func, ast.Name) and child.func.id == "open":
                mode = child.args[1:2] or [k.value for k in child.keywords if k.arg == "mode"]
                if mode and isinstance(mode[0], ast.Constant) and any(c in str(mode[0].value) for c in "wax+"):
                    raw.add((rel, scope))
            visit(child, inner, rel)

    for base in ("engine", "qwen3tts_cli", "qwen3tts_gui"):
        for path in sorted((ROOT / base).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel != "engine/io/fileio.py":
                visit(ast.parse(path.read_text(encoding="utf-8")), "", rel)
    return following, raw


def test_every_writer_of_the_app_is_listed():
    """Writers are found by reading the code: one that follows links, or writes raw, outside the lists above is
    a file of the app's own written the unsafe way (two such landed while this was written: the chunk journal and
    the 8-bit check's manifest)."""
    following, raw = _writers()
    assert following - set(FOLLOWS_LINKS_ON_PURPOSE) == set(), "write with write_own_file, or list it here"
    assert raw - set(RAW_WRITES_IN_A_FRESH_FOLDER) == set(), "write with write_own_file, or list it here"
    assert set(FOLLOWS_LINKS_ON_PURPOSE) <= following and set(RAW_WRITES_IN_A_FRESH_FOLDER) <= raw, "stale entries"
