"""The speech server with real clients: the official `openai` package and curl, against the demo model.

Each test compares what a client receives with the same speech synthesized here without the server, so a server
that loses, reorders, re-encodes or mixes up audio fails."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from openai import OpenAI

import engine
from engine import (
    GenerationSettings,
    LongTextOptions,
    SynthesisRequest,
    Voice,
)

from .conftest import (
    FRAMES,
    VOICES,
    curl,
    error_of,
    local,
    post_speech,
    read_audio,
    same_audio,
    seed_with_frames,
    start,
)

ROOT = Path(__file__).resolve().parents[2]
TEXT = "Good evening. This is a voice of the library, speaking through the server."


def client(server, key: str = "not-needed") -> OpenAI:
    return OpenAI(base_url=f"{server.address}/v1", api_key=key, max_retries=0, timeout=120)


@pytest.mark.parametrize("fmt", ["wav", "flac", "pcm"])
def test_openai_client_gets_what_a_local_synthesis_makes(server, synth, library, fmt):
    """A request alone is spoken as the app's streamed take (its audio decoded as the frames come); wav and pcm
    are sent so, flac written whole at the end: either way the samples are the local streamed synthesis's."""
    response = client(server).audio.speech.create(model="tts-1", voice="anna", input=TEXT, response_format=fmt,
                                                  extra_body={"seed": 11, "max_frames": FRAMES})
    data = response.content
    got = np.frombuffer(data, "<i2") if fmt == "pcm" else read_audio(data)
    want = local(synth, TEXT, "Anna", library, seed=11, stream=True)
    assert got.size > 0
    assert same_audio(got, want, streamed=True)


@pytest.mark.parametrize("fmt", ["mp3", "opus"])
def test_compressed_formats_decode_to_the_speech(server, synth, library, fmt):
    """mp3 (OpenAI's default format) and opus: the audio library reads them back at the speech's length."""
    body = {"input": TEXT, "voice": "Bob", "seed": 3, "model": "demo", "max_frames": FRAMES}
    if fmt != "mp3":
        body["response_format"] = fmt
    status, headers, data = post_speech(server.address, body)
    assert status == 200 and headers["content-type"] == {"mp3": "audio/mpeg", "opus": "audio/ogg"}[fmt]
    import io

    import soundfile as sf

    audio, rate = sf.read(io.BytesIO(data))
    want = local(synth, TEXT, "Bob", library, seed=3)
    assert rate == engine.SAMPLE_RATE
    assert abs(len(audio) - len(want)) <= 2 * 1152 + 312  # codec padding of a frame or two at most


def test_streaming_response_arrives_in_pieces_before_the_speech_ends(server, synth, library):
    """with_streaming_response: the body comes in several pieces as the frames are decoded, and together they are
    exactly the local streamed synthesis."""
    seed = seed_with_frames(synth, TEXT, "Anna", library, FRAMES - 5)
    pieces, times = [], []
    t0 = time.monotonic()
    with client(server).audio.speech.with_streaming_response.create(
            model="tts-1", voice="Anna", input=TEXT, response_format="pcm", extra_body={"seed": seed, "max_frames": FRAMES}) as response:
        assert response.headers["x-seed"] == str(seed)
        for piece in response.iter_bytes():
            pieces.append(piece)
            times.append(time.monotonic() - t0)
    got = np.frombuffer(b"".join(pieces), "<i2")
    assert same_audio(got, local(synth, TEXT, "Anna", library, seed=seed, stream=True), streamed=True)
    assert len(pieces) > 2
    assert times[0] < times[-1]


def sse_events(chunks) -> list[dict]:
    """The events of a Server-Sent Events body, read by the openai package's own decoder."""
    from openai._streaming import SSEDecoder

    return [event.json() for event in SSEDecoder().iter_bytes(iter(chunks))]


def audio_of(events: list[dict]) -> bytes:
    """OpenAI's speech events: deltas of base64 audio, then one speech.audio.done with the usage, nothing else."""
    import base64

    assert [e["type"] for e in events] == ["speech.audio.delta"] * (len(events) - 1) + ["speech.audio.done"]
    return b"".join(base64.b64decode(e["audio"]) for e in events[:-1])


def test_sse_stream_carries_the_local_synthesis_in_openais_events(server, synth, library):
    """stream_format "sse" through the openai package: delta events arrive as the frames are decoded (the first
    before the speech ends), their audio together is the local streamed synthesis, and speech.audio.done counts
    the frames in its usage."""
    seed = seed_with_frames(synth, TEXT, "Anna", library, FRAMES - 5)
    pieces, times = [], []
    t0 = time.monotonic()
    with client(server).audio.speech.with_streaming_response.create(
            model="tts-1", voice="Anna", input=TEXT, response_format="pcm", stream_format="sse",
            extra_body={"seed": seed, "max_frames": FRAMES}) as response:
        assert response.headers["content-type"] == "text/event-stream" and response.headers["x-seed"] == str(seed)
        for piece in response.iter_bytes():
            pieces.append(piece)
            times.append(time.monotonic() - t0)
    events = sse_events(pieces)
    got = np.frombuffer(audio_of(events), "<i2")
    want = local(synth, TEXT, "Anna", library, seed=seed, stream=True)
    assert same_audio(got, want, streamed=True)
    assert len(events) > 3 and times[0] < times[-1]
    frames = -(-len(want) // engine.SAMPLES_PER_FRAME)
    assert events[-1]["usage"] == {"input_tokens": len(TEXT), "output_tokens": frames,
                                   "total_tokens": len(TEXT) + frames}


@pytest.mark.parametrize("fmt", ["wav", "flac"])
def test_sse_with_curl_carries_a_whole_file(server, synth, library, fmt):
    """wav as it is made, flac whole at the end: either way the deltas joined are the file the format names."""
    status, headers, data = post_speech(server.address, {"input": TEXT, "voice": "Bob", "seed": 4,
                                                         "response_format": fmt, "stream_format": "sse",
                                                         "max_frames": FRAMES}, "-N")
    assert status == 200 and headers["content-type"] == "text/event-stream"
    assert all(line.startswith(b"data: {") for line in data.split(b"\n\n") if line)
    want = local(synth, TEXT, "Bob", library, seed=4, stream=True)
    assert same_audio(read_audio(audio_of(sse_events([data]))), want, streamed=True)


def test_sse_failure_after_the_events_began_is_an_error_event(synth, library):
    """A request past its time limit once the events have begun: an error event in OpenAI's shape, no done."""
    from qwen3tts_server import Limits

    server = start(synth, library, limits=Limits(request_seconds=2.0))
    text = "\n\n".join(f"Paragraph {n}. " + "Words to keep the engine busy for a while. " * 6 for n in range(60))
    try:
        status, _, data = post_speech(server.address, {"input": text, "voice": "Anna", "response_format": "pcm",
                                                       "stream_format": "sse"})
        events = sse_events([data])
        assert status == 200 and events[-1]["type"] == "error"
        assert events[-1]["error"]["code"] == "timeout" and "\n" not in events[-1]["error"]["message"]
        assert {e["type"] for e in events[:-1]} <= {"speech.audio.delta"}
    finally:
        server.stop()


def test_curl_lists_models_and_voices_and_speaks(server, synth, library):
    status, _, body = curl(f"{server.address}/v1/models")
    assert status == 200 and [m["id"] for m in json.loads(body)["data"]] == ["demo"]
    status, _, body = curl(f"{server.address}/v1/audio/voices")
    assert status == 200 and [v["id"] for v in json.loads(body)["voices"]] == list(VOICES)
    status, headers, data = post_speech(server.address, {"model": "demo", "input": TEXT, "voice": "bob",
                                                         "response_format": "wav", "seed": 5,
                                                         "max_frames": FRAMES})
    assert status == 200 and headers["content-type"] == "audio/wav" and headers["x-seed"] == "5"
    assert headers.get("transfer-encoding") == "chunked"  # streamed
    assert same_audio(read_audio(data), local(synth, TEXT, "Bob", library, seed=5, stream=True), streamed=True)


def test_requests_waiting_together_run_side_by_side_with_the_audio_they_get_alone(server, synth, library):
    texts = ["The first line of four.", "A second, slightly longer line of the four.", "Third.",
             "And the fourth line, which is the longest of them all by a few words."]
    results: dict[int, tuple[int, dict, bytes]] = {}

    def send(i: int) -> None:
        results[i] = post_speech(server.address, {"input": texts[i], "voice": VOICES[i % 2], "seed": 100 + i,
                                                  "response_format": "flac", "max_frames": FRAMES})

    threads = [threading.Thread(target=send, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(results[i][0] == 200 for i in range(4))
    assert max(int(results[i][1]["x-batched"]) for i in range(4)) >= 2  # they ran side by side
    for i in range(4):
        # side by side and alone: the speech synthesize() streams alone with its seed (within the tolerance of
        # streamed decoding, whose pushes group frames as the decoder keeps up)
        want = local(synth, texts[i], VOICES[i % 2], library, seed=100 + i, stream=True)
        assert same_audio(read_audio(results[i][2]), want, streamed=True)
        alone = post_speech(server.address, {"input": texts[i], "voice": VOICES[i % 2], "seed": 100 + i,
                                             "response_format": "flac", "max_frames": FRAMES})
        assert alone[1]["x-batched"] == "1"
        assert same_audio(read_audio(alone[2]), want, streamed=True)


def test_requests_side_by_side_stream_their_first_audio_before_their_last_frame(server, synth, library,
                                                                                   monkeypatch):
    """Requests generated side by side stream as a request alone does: the openai client gets each one's first
    bytes before the last frame of its speech is made, and the bytes are the speech synthesize() streams alone.
    Every model step is slowed down here (and its end time noted) so that "before" is plain to see."""
    from engine.synthesis import generation

    frames = 12
    seeds = [s for s in range(60) if len(local(synth, TEXT, "Anna", library, s)) >= frames * engine.SAMPLES_PER_FRAME]
    seeds = seeds[:3]  # each runs to the frame cap: all three make their last frame at the run's last frame step
    assert len(seeds) == 3
    made: list[float] = []  # when each step that made frames ended
    step = generation.FrameLoop.step

    def slow_step(loop):
        result = step(loop)
        if result.frames:
            made.append(time.monotonic())
        time.sleep(0.05)
        return result

    monkeypatch.setattr(generation.FrameLoop, "step", slow_step)
    first: dict[int, float] = {}
    got: dict[int, tuple[int, bytes]] = {}

    def send(i: int) -> None:
        pieces = []
        with client(server).audio.speech.with_streaming_response.create(
                model="tts-1", voice="Anna", input=TEXT, response_format="pcm",
                extra_body={"seed": seeds[i], "max_frames": frames}) as response:
            for piece in response.iter_bytes():
                if piece and i not in first:
                    first[i] = time.monotonic()
                pieces.append(piece)
            got[i] = int(response.headers["x-batched"]), b"".join(pieces)

    threads = [threading.Thread(target=send, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    monkeypatch.undo()
    assert sorted(got) == [0, 1, 2] and all(batched == 3 for batched, _ in got.values())
    for i, seed in enumerate(seeds):
        want = local(synth, TEXT, "Anna", library, seed, stream=True)[:frames * engine.SAMPLES_PER_FRAME]
        assert same_audio(np.frombuffer(got[i][1], "<i2"), want, streamed=True)
        assert first[i] < made[-1], f"request {i}: its first bytes came after its last frame"


def test_a_long_input_goes_through_the_long_text_path(server, synth, library):
    """Several chunks: split, generated chunk by chunk and joined with the app's pauses, as Synthesizer.speak does."""
    text = "\n\n".join(f"Paragraph {n}. " + "This sentence fills the paragraph with words. " * 6 for n in range(3))
    assert len(SynthesisRequest(text).chunks()) > 1
    status, _, data = post_speech(server.address, {"input": text, "voice": "Anna", "seed": 9,
                                                   "response_format": "pcm", "max_frames": FRAMES})
    assert status == 200
    voice = Voice.load(library / "Anna.qvoice")
    settings = GenerationSettings(**{**vars(synth.default_settings), "seed": 9, "max_frames": FRAMES})
    want = np.concatenate([e.samples for e in synth.speak(SynthesisRequest(text, voice, "auto", settings,
                                                                           options=LongTextOptions(batch_size=1)))
                           if isinstance(e, engine.ChunkAudio)])
    assert same_audio(np.frombuffer(data, "<i2"), want)


def test_the_api_key_is_required_when_set(synth, library):
    server = start(synth, library, api_key="right-key-123")
    try:
        for key in ("wrong-key-123", "right-key-12", "right-key-1234"):
            with pytest.raises(Exception) as caught:
                client(server, key).audio.speech.create(model="tts-1", voice="Anna", input="Hi.")
            assert getattr(caught.value, "status_code", None) == 401
        status, headers, body = post_speech(server.address, {"input": "Hi.", "voice": "Anna"})
        assert status == 401 and error_of(body)["code"] == "invalid_api_key" and headers["www-authenticate"] == "Bearer"
        audio = client(server, "right-key-123").audio.speech.create(model="tts-1", voice="Anna", input="Hi.",
                                                                    response_format="wav").content
        assert audio[:4] == b"RIFF"
        assert curl(f"{server.address}/health")[0] == 200  # the health line needs no key
    finally:
        server.stop()


def test_a_request_addressed_to_another_host_name_is_refused(server):
    """Without a key the server is this computer's: a web page that renamed itself to 127.0.0.1 (DNS rebinding)
    still sends its own host name, and is refused."""
    status, _, body = curl("-H", "Host: attacker.example", f"{server.address}/v1/models")
    assert status == 403 and error_of(body)["code"] == "host_not_allowed"
    assert curl("-H", "Host: localhost:8880", f"{server.address}/v1/models")[0] == 200


def test_custom_voice_speakers_and_voice_design_descriptions(tmp_path, library):
    for kind in ("custom_voice", "voice_design"):
        synth = engine.Synthesizer(engine.make_demo_bundle(tmp_path / kind, kind=kind), threads=1, tuning=False)
        server = start(synth, library)
        try:
            voices = json.loads(curl(f"{server.address}/v1/audio/voices")[2])["voices"]
            if kind == "custom_voice":
                assert {v["id"] for v in voices} == {s.name for s in synth.kind.speakers}
                ok = {"input": "Hi there.", "voice": "Serena", "instructions": "Cheerfully.", "max_frames": 8}
                bad = {"input": "Hi there.", "voice": "Anna"}
            else:
                assert voices == []
                ok = {"input": "Hi there.", "voice": "alloy", "instructions": "A calm low voice.", "max_frames": 8}
                bad = {"input": "Hi there.", "voice": "alloy"}
            status, _, data = post_speech(server.address, {**ok, "response_format": "wav"})
            assert status == 200 and len(read_audio(data)) > 0
            status, _, body = post_speech(server.address, bad)
            assert status == 400 and error_of(body)["param"] in ("voice", "instructions")
        finally:
            server.stop()


def test_qwen3tts_serve_runs_until_interrupted(demo_q8, library, tmp_path):
    """The command line: listens, says where, speaks, and stops on Ctrl+C with exit code 0."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "QWEN3TTS_CACHE_DIR": str(tmp_path)}
    proc = subprocess.Popen([sys.executable, "-m", "qwen3tts_cli", "serve", "--model", str(demo_q8), "--port", "0",
                             "--threads", "1", "--voices", str(library)], cwd=ROOT, env=env,
                            stderr=subprocess.PIPE, text=True)
    watchdog = threading.Timer(60, proc.kill)  # a line that never comes must not hang the suite
    watchdog.start()
    try:
        line = proc.stderr.readline()
        match = re.search(r"at (http://127\.0\.0\.1:\d+)/v1", line)
        assert match, line
        assert proc.stderr.readline().strip() == f"qwen3tts: voices: {', '.join(VOICES)}."
        status, _, data = post_speech(match.group(1), {"input": "Hello.", "voice": "Anna", "response_format": "wav"})
        assert status == 200 and data[:4] == b"RIFF"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 0
    finally:
        watchdog.cancel()
        proc.kill()
        proc.wait()


def test_a_long_text_and_a_stream_of_short_requests_take_turns(server):
    """Short requests arriving all the time neither wait for a whole long text nor stop it: between its chunks the
    engine serves them, and then the long text goes on."""
    import http.client
    from urllib.parse import urlsplit

    netloc = urlsplit(server.address).netloc
    text = "\n\n".join(f"Part {n}. " + "A sentence to fill this part of the text. " * 5 for n in range(3))
    chunks = len(SynthesisRequest(text).chunks())
    ended: dict[str, float] = {}

    def post(body: dict) -> None:
        conn = http.client.HTTPConnection(netloc, timeout=120)
        conn.request("POST", "/v1/audio/speech", json.dumps(body), {"Content-Type": "application/json"})
        response = conn.getresponse()
        assert response.status == 200 and response.read()
        conn.close()

    def long_text() -> None:
        post({"input": text, "voice": "Anna", "response_format": "pcm", "max_frames": 10, "seed": 1})
        ended["long"] = time.monotonic()

    def shorts(n: int) -> None:
        for i in range(2 * chunks):  # the long text needs `chunks` turns; the shorts go on twice as long
            post({"input": f"Short {n} {i}.", "voice": "Bob", "response_format": "pcm", "max_frames": 10})
        ended[f"shorts {n}"] = time.monotonic()

    first = threading.Thread(target=long_text)
    first.start()
    time.sleep(0.1)
    threads = [threading.Thread(target=shorts, args=(n,)) for n in range(3)]
    for t in threads:
        t.start()
    for t in [first, *threads]:
        t.join(120)
    assert ended["long"] < max(v for k, v in ended.items() if k != "long")


def test_qwen3tts_serve_takes_every_generation_setting_as_every_requests_default(demo_q8, monkeypatch, capsys):
    """serve's generation flags come from the declaration, as synth's and batch's do: those given are laid over
    the model's own settings as the defaults of every request; a bad one is refused in one line before the model
    loads."""
    from dataclasses import replace

    import qwen3tts_server
    from qwen3tts_cli.main import main

    served = []
    monkeypatch.setattr(qwen3tts_server, "run_server", lambda synth, config, ready: served.append((synth, config)))
    assert main(["serve", "--model", str(demo_q8), "--threads", "1", "--seed", "5", "--temperature", "0.3",
                 "--greedy"]) == 0
    synth, config = served[0]
    assert config.defaults == replace(synth.default_settings, seed=5, temperature=0.3, greedy=True)
    assert main(["serve", "--model", str(demo_q8), "--threads", "1"]) == 0
    assert served[1][1].defaults is None  # the model's own, as the app's sharing switch has them by default
    capsys.readouterr()
    loaded = []
    monkeypatch.setattr(engine, "Synthesizer", lambda *a, **k: loaded.append(a))
    assert main(["serve", "--model", str(demo_q8), "--top-p", "1.5"]) != 0
    said = capsys.readouterr().err.strip().splitlines()
    assert len(said) == 1 and "Top-p must be greater than 0 and at most 1, not 1.5" in said[0], said
    assert not loaded
