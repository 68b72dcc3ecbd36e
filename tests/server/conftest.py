"""A speech server on the demo model (8-bit, so that requests waiting together run side by side), with a voice
library of two voices, for the server tests; and the helpers they share."""

from __future__ import annotations

import io
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import engine
from engine import GenerationSettings, Synthesizer, Voice
from qwen3tts_server import BackgroundServer, Limits, ServerConfig

pytest.importorskip("openai")  # the official client is in the test extra

VOICES = ("Anna", "Bob")


@pytest.fixture(scope="session")
def demo_q8(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return engine.make_demo_bundle(tmp_path_factory.mktemp("server") / "demo", precision="q8")


@pytest.fixture(scope="session")
def synth(demo_q8: Path) -> Synthesizer:
    return Synthesizer(demo_q8, threads=1, tuning=False)


@pytest.fixture(scope="session")
def library(synth: Synthesizer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("voices")
    rng = np.random.default_rng(7)
    for name in VOICES:
        Voice(xvector=rng.standard_normal(synth.hidden_size).astype(np.float32), model_id=synth.model_id,
              name=name).save(folder / f"{name}.qvoice")
    return folder


def start(synth, library: Path, **config) -> BackgroundServer:
    config.setdefault("limits", Limits())
    server = BackgroundServer(synth, ServerConfig(port=0, voices_dir=library, model_name="demo", **config))
    server.start()
    return server


@pytest.fixture(scope="module")
def server(synth, library) -> Iterator[BackgroundServer]:
    """batch_wait 0.3 s: requests sent together by the tests' threads surely meet in one batch."""
    s = start(synth, library, batch_wait=0.3, limits=Limits(max_waiting=16, read_seconds=2.0))
    yield s
    s.stop()


def curl(*args: str, data: bytes | None = None, timeout: float = 120) -> tuple[int, dict[str, str], bytes]:
    """(status, headers, body) of one curl call; `data` goes to its standard input."""
    out = subprocess.run(["curl", "-s", "-S", "-D", "-", *args], input=data, capture_output=True, timeout=timeout,
                         check=True)
    head, _, body = out.stdout.partition(b"\r\n\r\n")
    while head.split(b" ")[1:2] == [b"100"]:  # "100 Continue" before the answer
        head, _, body = body.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return int(lines[0].split()[1]), headers, body


def post_speech(address: str, body: dict | bytes, *extra: str) -> tuple[int, dict[str, str], bytes]:
    """POST /v1/audio/speech with curl (the body from standard input, as JSON)."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return curl("-H", "Content-Type: application/json", "--data-binary", "@-", *extra,
                f"{address}/v1/audio/speech", data=data)


def error_of(body: bytes) -> dict:
    """OpenAI's error shape: {"error": {"message", "type", "param", "code"}}, one line."""
    error = json.loads(body)["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["message"] and "\n" not in error["message"]
    return error


HALF_STEP = 0.5 / 32768  # what rounding to 16 bits may move a sample
STREAM_ATOL = 1e-4  # streamed against whole decoding, as the engine holds it (tests/test_synthesizer.py)


def as_float(pcm: np.ndarray) -> np.ndarray:
    return np.asarray(pcm, np.float64) / 32768


def same_audio(got: np.ndarray, want: np.ndarray, streamed: bool = False) -> bool:
    """16-bit audio a client got against the float samples of a local synthesis: the same length, each sample the
    local one rounded to 16 bits (streamed: within the engine's streaming tolerance too; streamed decoding groups
    frames as its thread keeps up, and the groups' sums round differently)."""
    limit = HALF_STEP + (STREAM_ATOL if streamed else 1e-7)
    return got.shape == want.shape and float(np.abs(as_float(got) - np.clip(want, -1, 32767 / 32768)).max(
        initial=0)) <= limit


def read_audio(data: bytes) -> np.ndarray:
    import soundfile as sf

    audio, rate = sf.read(io.BytesIO(data), dtype="int16")
    assert rate == engine.SAMPLE_RATE
    return audio


FRAMES = 40  # the tests' frame cap (3.2 s of speech): the demo model would often run on to its cap of minutes


def local(synth, text: str, voice_name: str, library: Path, seed: int, stream: bool = False) -> np.ndarray:
    """The same speech synthesized here, without the server."""
    voice = Voice.load(library / f"{voice_name}.qvoice")
    settings = GenerationSettings(**{**vars(synth.default_settings), "seed": seed, "stream_audio": stream,
                                     "max_frames": FRAMES})
    events = list(synth.synthesize(text, voice, "auto", settings))
    if stream:
        return np.concatenate([e.samples for e in events if isinstance(e, engine.AudioChunk)])
    return events[-1].audio


def seed_with_frames(synth, text: str, voice_name: str, library: Path, min_frames: int) -> int:
    """A seed whose speech of `text` runs at least min_frames frames (the demo model stops at random)."""
    for seed in range(50):
        if len(local(synth, text, voice_name, library, seed)) >= min_frames * engine.SAMPLES_PER_FRAME:
            return seed
    raise AssertionError(f"no seed in 0..49 gives {min_frames} frames")
