"""Crashes and hangs from bad files: each gives one clear error, quickly.

The bad files are made here: FIFOs, looping and dangling symlinks, lying headers, zip bombs, tampered bundles.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import threading
import zipfile
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

import engine.runtime.bundle as bundle_mod
from engine.convert.checkpoint import SafetensorsFile
from engine.errors import AudioError, BundleError, ConvertError, VoiceError
from engine.io.audio import MAX_SECONDS, load_audio
from engine.runtime.bundle import Bundle
from engine.voice import MAX_VOICE_BYTES, Voice
from tests.bundles import bundle_for, fixture_models

from .conftest import REF, one_line, run_cli


def finishes(fn, seconds: float = 20.0):
    """fn()'s result or exception, failing the test if it blocks (a FIFO opened for reading waits forever)."""
    box: dict = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the test
            box["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"{fn} hung for {seconds} s"
    if "error" in box:
        raise box["error"]
    return box.get("value")


@pytest.fixture(scope="module")
def bundle() -> Path:
    return bundle_for(fixture_models()[0], "fp32")  # the fixtures are committed: none fails, never skips


@pytest.fixture
def bundle_copy(bundle, tmp_path) -> Path:
    dest = tmp_path / "bundle"
    shutil.copytree(bundle, dest)
    return dest


def _edit_manifest(path: Path, change) -> None:
    manifest = json.loads((path / "manifest.json").read_text())
    change(manifest)
    (path / "manifest.json").write_text(json.dumps(manifest))


# --- 9. non-regular files -----------------------------------------------------------------------------------------


def test_fifo_as_reference_or_voice_is_refused_not_waited_on(tmp_path):
    fifo = tmp_path / "ref.wav"
    os.mkfifo(fifo)
    with pytest.raises(AudioError, match="not a regular file"):
        finishes(lambda: load_audio(fifo))
    with pytest.raises(VoiceError, match="not a regular file"):
        finishes(lambda: Voice.load(fifo))


def test_fifo_as_text_file_is_refused_not_waited_on(tmp_path):
    from engine.errors import TextError
    from engine.io.text_file import read_text_file

    fifo = tmp_path / "book.txt"
    os.mkfifo(fifo)
    with pytest.raises(TextError, match="not a regular file"):
        finishes(lambda: read_text_file(fifo))


def test_symlink_loops_and_dangling_links_are_named_as_such(tmp_path):
    loop = tmp_path / "loop.wav"
    loop.symlink_to(loop)
    dangling = tmp_path / "dangling.wav"
    dangling.symlink_to(tmp_path / "gone.wav")
    with pytest.raises(AudioError, match="loops back on itself"):
        load_audio(loop)
    with pytest.raises(AudioError, match="gone.wav, which does not exist"):
        load_audio(dangling)


# --- 10. unbounded memory from small files ------------------------------------------------------------------------


def test_absurd_sample_rate_is_refused_before_resampling(tmp_path):
    bad = tmp_path / "one_hertz.wav"
    sf.write(bad, (np.sin(np.arange(72000) * 0.1) * 0.3).astype(np.float32), 1, subtype="PCM_16")  # 144 KB
    assert bad.stat().st_size < 150_000
    with pytest.raises(AudioError, match="sample rate of 1 Hz"):
        load_audio(bad)


def test_overlong_reference_is_refused_from_its_header(tmp_path, monkeypatch):
    long = tmp_path / "long.wav"
    rate = 1000
    sf.write(long, np.zeros((MAX_SECONDS + 1) * rate, np.int16), rate)
    decoded = []
    monkeypatch.setattr(sf.SoundFile, "read", lambda *a, **k: decoded.append(1))
    with pytest.raises(AudioError, match=f"at most {MAX_SECONDS} s"):
        load_audio(long)
    assert decoded == []  # refused before a single sample was decoded


def _zip_voice(path: Path, members: dict[str, bytes]) -> None:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            z.writestr(name, data)


def _npy(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


META = json.dumps({"format": "qwen3tts-voice", "version": 1, "model_id": "m", "name": "x"}).encode()


def test_zip_bomb_voice_is_refused_without_inflating(tmp_path):
    bomb = tmp_path / "bomb.qvoice"
    big = np.zeros(MAX_VOICE_BYTES // 4 + 1024, np.float32)
    _zip_voice(bomb, {"voice.json": META, "xvector.npy": _npy(np.ones(8, np.float32)), "ref_audio.npy": _npy(big)})
    del big
    assert bomb.stat().st_size < 2_000_000
    with pytest.raises(VoiceError, match="unpacks to"):
        Voice.load(bomb)
    with pytest.raises(VoiceError, match="unpacks to"):
        Voice.summary(bomb)


def test_voice_summary_reads_metadata_without_the_audio(tmp_path, monkeypatch):
    path = tmp_path / "v.qvoice"
    Voice(xvector=np.ones(8, np.float32), model_id="m", name="Anna", ref_text="Hi.",
          ref_audio=np.zeros(3 * 24000, np.float32)).save(path)
    import engine.voice

    monkeypatch.setattr(engine.voice, "load_npy_bytes", lambda _b: pytest.fail("summary decoded an array"))
    s = Voice.summary(path)
    assert (s.name, s.model_id, s.ref_text, s.ref_seconds, s.icl) == ("Anna", "m", "Hi.", 3.0, True)


# --- 11. tracebacks where one line belongs -----------------------------------------------------------------------


def _lying_npy(shape: tuple[int, ...]) -> bytes:
    """An .npy header claiming `shape` float32, followed by 8 bytes of data."""
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "<f4", "fortran_order": False, "shape": shape})
    return buf.getvalue() + b"\0" * 8


def test_npy_headers_claiming_huge_arrays(tmp_path, capsys):
    voice = tmp_path / "huge.qvoice"
    _zip_voice(voice, {"voice.json": META, "xvector.npy": _lying_npy((10**12,))})
    with pytest.raises(VoiceError, match="promises 4000000000000 bytes"):
        Voice.load(voice)
    codes = tmp_path / "codes.npy"
    codes.write_bytes(_lying_npy((10**11, 16)))
    code, err = run_cli(capsys, "decode", "--model", tmp_path, "--codes", codes, "-o", tmp_path / "o.wav")
    assert code == 2 and "promises" in one_line(err)


def test_malformed_voice_fields(tmp_path):
    for field, value in (("name", 5), ("ref_text", ["a"]), ("model_id", None)):
        meta = {"format": "qwen3tts-voice", "version": 1, "model_id": "m", field: value}
        path = tmp_path / f"{field}.qvoice"
        _zip_voice(path, {"voice.json": json.dumps(meta).encode(), "xvector.npy": _npy(np.ones(8, np.float32))})
        with pytest.raises(VoiceError, match=f"its {field} is not text"):
            Voice.load(path)
    _zip_voice(tmp_path / "list.qvoice", {"voice.json": b"[1, 2]"})
    with pytest.raises(VoiceError, match="not a Qwen3-TTS Studio voice file"):
        Voice.load(tmp_path / "list.qvoice")


def test_malformed_manifest_entries(bundle_copy):
    _edit_manifest(bundle_copy, lambda m: m["files"]["talker.bin"].pop("size"))
    with pytest.raises(BundleError, match="has no size or checksum"):
        Bundle.open(bundle_copy)
    _edit_manifest(bundle_copy, lambda m: m.update(files=["talker.bin"]))
    with pytest.raises(BundleError, match="has no file list"):
        Bundle.open(bundle_copy)


def test_manifest_parts_missing_values_name_the_value(bundle_copy):
    from engine.synthesis.synthesizer import Synthesizer

    _edit_manifest(bundle_copy, lambda m: m["parts"]["talker"].pop("talker_graph"))
    with pytest.raises(BundleError, match="'talker' part has no 'talker_graph'"):  # was KeyError: 'talker_graph'
        Synthesizer(bundle_copy, threads=1)
    _edit_manifest(bundle_copy, lambda m: m["parts"].update(talker=[1, 2]))
    with pytest.raises(BundleError, match="'talker' part is not a table"):
        Synthesizer(bundle_copy, threads=1)


def _safetensors(path: Path, header: dict, data: bytes = b"") -> Path:
    raw = json.dumps(header).encode()
    path.write_bytes(len(raw).to_bytes(8, "little") + raw + data)
    return path


def test_malformed_safetensors_entries(tmp_path):
    cases = {
        "no shape": {"w": {"dtype": "F32", "data_offsets": [0, 8]}},
        "not an object": {"w": [1, 2]},
        "does not match": {"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}},
        "data_offsets": {"w": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}},
    }
    for why, header in cases.items():
        with pytest.raises(ConvertError, match=why):
            SafetensorsFile(_safetensors(tmp_path / "m.safetensors", header, b"\0" * 8))


def test_close_with_live_views_does_not_hide_the_real_error(tmp_path):
    f = SafetensorsFile(_safetensors(tmp_path / "m.safetensors",
                                     {"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 8))
    view = memoryview(f._mm)  # what a traceback's frames hold while an error propagates
    f.close()  # raised BufferError before
    view.release()


def test_non_utf8_text_on_the_command_line(tmp_path, capsys):
    text = b"caf\xe9".decode("utf-8", "surrogateescape")  # how Python hands over a Latin-1 argv
    code, err = run_cli(capsys, "synth", "--model", tmp_path, "--text", text, "--ref", REF, "--x-vector-only",
                        "-o", tmp_path / "o.wav")
    assert code == 2 and "not valid UTF-8" in one_line(err)


def test_bad_seed_and_temperature_are_one_line_errors(bundle, tmp_path, capsys):
    base = ["synth", "--model", bundle, "--text", "Hello.", "--ref", REF, "--x-vector-only", "--max-frames", "2",
            "-o", tmp_path / "o.wav"]
    # the engine checks the settings (GenerationSettings.check); the message names the setting and the value
    for option, value, words in (("--seed", "-1", "seed must be a whole number"),
                                 ("--temperature", "inf", "temperature must be a finite number"),
                                 ("--temperature", "nan", "temperature must be a finite number")):
        code, err = run_cli(capsys, *base, option, value)
        line = one_line(err).lower()
        assert code == 2 and words in line and f"not {value}" in line, (option, value, err)
    assert not (tmp_path / "o.wav").exists()


def test_full_disk_while_saving_a_voice(bundle, tmp_path, monkeypatch, capsys):
    import errno

    import engine.voice

    def full(*_a, **_k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(engine.voice, "write_atomic", full)
    code, err = run_cli(capsys, "voice", "create", REF, "--model", bundle, "-o", tmp_path / "v.qvoice")
    assert code == 2 and "disk is full" in one_line(err)
    assert os.listdir(tmp_path) == []


# --- 12. damaged weights of the right size; the verification cache ------------------------------------------------


def test_weights_damaged_without_a_size_change_are_found_at_load(bundle_copy, monkeypatch):
    calls = []
    real = bundle_mod.sha256_file
    monkeypatch.setattr(bundle_mod, "sha256_file", lambda p: calls.append(Path(p).name) or real(p))
    Bundle.open(bundle_copy)
    n_files = len(json.loads((bundle_copy / "manifest.json").read_text())["files"])
    assert len(calls) == n_files  # first load: every file read once
    calls.clear()
    Bundle.open(bundle_copy)
    assert calls == []  # later loads: nothing read again (size, mtime and inode unchanged)

    weights = bundle_copy / "talker.bin"
    data = bytearray(weights.read_bytes())
    data[len(data) // 2] ^= 0xFF
    weights.write_bytes(bytes(data))  # same size, new mtime
    with pytest.raises(BundleError, match="talker.bin does not match its checksum"):
        Bundle.open(bundle_copy)
    assert calls == ["talker.bin"]  # only the changed file was read


# --- 13. manifest names confined to the bundle ----------------------------------------------------------------------


def test_manifest_names_outside_the_bundle_are_refused(bundle_copy, tmp_path):
    outside = tmp_path / "secret.txt"
    outside.write_text("x")
    info = {"size": 1, "sha256": "0" * 64}
    for name in ("../secret.txt", str(outside), "tokenizer/../../secret.txt"):
        _edit_manifest(bundle_copy, lambda m, n=name: m["files"].update({n: info}))
        with pytest.raises(BundleError, match="not a name inside the bundle"):
            Bundle.open(bundle_copy)
        _edit_manifest(bundle_copy, lambda m, n=name: m["files"].pop(n))
    (bundle_copy / "escape.txt").symlink_to(outside)
    _edit_manifest(bundle_copy, lambda m: m["files"].update({"escape.txt": info}))
    with pytest.raises(BundleError, match="points outside the bundle folder"):
        Bundle.open(bundle_copy)


# --- 15. messages that say what is wrong ------------------------------------------------------------------------------


def test_string_version_is_called_damaged_not_a_version_mismatch(bundle_copy):
    _edit_manifest(bundle_copy, lambda m: m.update(version="1"))
    with pytest.raises(BundleError, match=r"its version is '1', not a whole number"):
        Bundle.open(bundle_copy)


def test_nan_x_vector_is_called_invalid_not_a_shape_problem(bundle):
    from engine.synthesis.synthesizer import Synthesizer

    synth = Synthesizer(bundle, threads=1)
    x = np.ones(synth.hidden_size, np.float32)
    x[3] = np.nan
    with pytest.raises(VoiceError, match="invalid values") as e:
        synth.check_voice(Voice(xvector=x, model_id=synth.model_id))
    assert "shape" not in str(e.value)


# --- 16. --threads beyond the core count ---------------------------------------------------------------------------


def test_threads_are_clamped_to_the_cores_with_a_note(tmp_path, capsys, monkeypatch):
    import qwen3tts_cli.main
    import qwen3tts_cli.tools

    seen = []
    monkeypatch.setattr(qwen3tts_cli.tools, "cmd_decode", lambda args: seen.append(args.threads) or 0)
    monkeypatch.setattr(qwen3tts_cli.main, "usable_cpus", lambda: 2)
    code, err = run_cli(capsys, "decode", "--model", tmp_path, "--codes", tmp_path / "c.npy", "-o",
                        tmp_path / "o.wav", "--threads", "1000")
    assert code == 0 and seen == [2]
    assert one_line(err) == "qwen3tts: --threads 1000 is more than the 2 cores available; using 2."
    code, err = run_cli(capsys, "decode", "--model", tmp_path, "--codes", tmp_path / "c.npy", "-o",
                        tmp_path / "o.wav", "--threads", "2")
    assert code == 0 and seen == [2, 2] and err == ""
