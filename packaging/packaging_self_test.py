"""`qwen3tts-studio --self-test`: proves an installed app works without a screen or a model.

It builds the demo bundle in a temporary folder, opens it the way the app does, makes a voice from a
synthetic reference, generates a few frames through the app's own SynthesisWorker (a QThread, offscreen),
writes a WAV atomically and reads it back. Prints one line per step; exit 0 on success, 1 with what failed.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np

FRAMES = 6


def _reference(seconds: float = 2.0, sr: int = 22050) -> tuple[np.ndarray, int]:
    """A voiced-sounding synthetic reference: a gliding harmonic tone with a syllable envelope."""
    t = np.arange(int(seconds * sr)) / sr
    f0 = 140 + 30 * np.sin(2 * np.pi * 0.7 * t)
    phase = 2 * np.pi * np.cumsum(f0) / sr
    voice = sum(np.sin(k * phase) / k for k in range(1, 8))
    envelope = 0.5 + 0.5 * np.sin(2 * np.pi * 3.0 * t) ** 2
    return (0.2 * voice * envelope).astype(np.float32), sr


def run(workdir: Path) -> None:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import QEventLoop, QTimer
    from PySide6.QtWidgets import QApplication

    from qwen3tts_gui.engine_adapter import (
        GenerationSettings,
        SynthesisRequest,
        SynthesisResult,
        make_demo_bundle,
        open_synthesizer,
        read_audio_file,
        save_audio,
    )
    from qwen3tts_gui.workers import SynthesisWorker

    app = QApplication.instance() or QApplication([sys.argv[0]])
    _check_look(app)
    t0 = time.monotonic()
    bundle = make_demo_bundle(workdir / "demo-bundle")
    print(f"ok: demo bundle built in {time.monotonic() - t0:.1f} s")
    synth = open_synthesizer(bundle)
    print(f"ok: bundle opened ({len(synth.languages)} languages)")
    voice = synth.create_voice(_reference(), name="self-test")
    print(f"ok: voice created (x-vector of {len(voice.xvector)} values)")

    settings = GenerationSettings(greedy=True, max_frames=FRAMES, seed=1)
    worker = SynthesisWorker(synth, SynthesisRequest("Hello from the self test.", voice, "auto", settings))
    frames: list[int] = []
    outcome: dict[str, object] = {}
    loop = QEventLoop()
    worker.frame.connect(lambda ev: frames.append(ev.index))
    worker.done.connect(lambda res: outcome.setdefault("result", res))
    worker.failed.connect(lambda msg: outcome.setdefault("error", msg))
    worker.finished.connect(loop.quit)
    QTimer.singleShot(120_000, loop.quit)
    worker.start()
    loop.exec()
    worker.wait(5000)
    if "error" in outcome:
        raise RuntimeError(f"generation failed: {outcome['error']}")
    result = outcome.get("result")
    if not isinstance(result, SynthesisResult):
        raise RuntimeError("generation produced no result within 120 s")
    if frames != list(range(len(frames))) or not frames:
        raise RuntimeError(f"frame events out of order or missing: {frames}")
    print(f"ok: generated {len(frames)} frames through the app's worker, {result.seconds:.2f} s of audio")

    out = workdir / "self-test.wav"
    save_audio(out, result.audio)
    data, sr = read_audio_file(out)
    if sr != 24000 or data.shape[0] != len(result.audio):
        raise RuntimeError(f"WAV round trip gave {data.shape[0]} samples at {sr} Hz")
    if not np.allclose(data[:, 0], result.audio, atol=1e-4):
        raise RuntimeError("WAV round trip changed the samples")
    print(f"ok: wrote and re-read {out.name} ({data.shape[0]} samples at {sr} Hz)")
    _check_single_window(workdir)
    _check_download_client()
    _check_speech_server(synth)
    _check_gpu(bundle, voice, settings, result.codes)
    del app


def _check_look(app) -> None:
    """The style sheet, the window icon and the images the sheet names made it into the bundle, where the app
    looks for them."""
    from qwen3tts_gui.app import apply_look

    missing = apply_look(app)
    if missing:
        raise RuntimeError(f"the app's look is incomplete; missing {', '.join(missing)}")
    print("ok: style sheet and icon found")


def _check_single_window(workdir: Path) -> None:
    """The single-window lock and its local socket (QtNetwork) are frozen in."""
    from qwen3tts_gui.single_instance import SingleInstance, Start

    instance = SingleInstance(workdir / "data")
    if instance.start() is not Start.FIRST or instance.problem:
        raise RuntimeError(f"the single-window lock failed: {instance.problem}")
    print("ok: single-window lock and socket")


def _check_speech_server(synth) -> None:
    """The speech server's HTTP stack (Starlette, uvicorn and anyio's thread pool: loaded by name at run time) is
    in the bundle."""
    import json
    import urllib.request

    from qwen3tts_server import BackgroundServer, ServerConfig

    server = BackgroundServer(synth, ServerConfig(port=0))
    address = server.start()
    try:
        with urllib.request.urlopen(f"{address}/v1/models", timeout=30) as response:
            models = json.loads(response.read())["data"]
        with urllib.request.urlopen(f"{address}/v1/audio/voices", timeout=30) as response:  # the thread pool
            json.loads(response.read())["voices"]
    finally:
        server.stop()
    print(f"ok: the speech server answered at {address} ({models[0]['id']})")


def _check_download_client() -> None:
    """The model download client is frozen in: asking a closed local port gives the store's own message."""
    import socket

    from engine.store import HubError
    from engine.store.hub import repo_listing

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    try:
        repo_listing("Qwen/Qwen3-TTS-12Hz-0.6B-Base", endpoint=f"http://127.0.0.1:{port}")
    except HubError as e:
        if "Cannot reach" not in str(e) and "HF_HUB_OFFLINE" not in str(e):
            raise
    else:
        raise RuntimeError(f"a closed port 127.0.0.1:{port} answered")
    print("ok: model download client present (huggingface_hub)")


def _check_gpu(bundle: Path, voice, settings, cpu_codes: np.ndarray) -> None:
    """The frozen app finds the system's Vulkan loader (ncnn dlopens it): every GPU it sees gives the CPU's greedy
    codes; with no loader or no GPU it says why and the app stays on the CPU."""
    from qwen3tts_gui.engine_adapter import SynthesisResult, gpu_choices, open_synthesizer

    gpus, reason = gpu_choices()
    if not gpus:
        print(f"ok: no GPU ({reason}); the CPU runs everything")
        return
    for label, device in gpus:
        synth = open_synthesizer(bundle, device=device)
        if not synth.device.on_gpu:
            print(f"ok: {label} cannot run the model here; the CPU does ({synth.device.note})")
            continue
        last = list(synth.synthesize("Hello from the self test.", voice, "auto", settings))[-1]
        if not isinstance(last, SynthesisResult) or not np.array_equal(last.codes, cpu_codes):
            raise RuntimeError(f"{label} gave other greedy codes than the CPU")
        print(f"ok: {label}: the CPU's greedy codes")


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="qwen3tts-selftest-") as tmp:
        try:
            run(Path(tmp))
        except Exception as e:  # report, don't crash: this is what a user pastes into a bug report
            print(f"FAILED: {type(e).__name__}: {e}")
            traceback.print_exc(file=sys.stderr)
            return 1
    print("self-test passed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
