"""The speech server under load: N clients at once (1, 2, 4, 8), each sending its requests one after another,
against `qwen3tts serve` on a bundle (public API and the command only; the server runs in its own process).

    python benchmarks/server_load.py --model BUNDLE [--clients 1,2,4,8] [--requests 3] [--frames 50]
                                     [--threads 2] [--rounds 1] [--decoder-precision fp32]
                                     [--code NAME=FOLDER ...]

BUNDLE: a converted full-size bundle (q8 runs requests side by side). Each request asks for `--frames` frames
(80 ms each) of streamed 16-bit PCM with its own seed. Prints, per client count: time to first byte and to last
byte (median and p95 over the requests), audio seconds per wall second and that against the round's first level
(one client), the server's CPU seconds per audio second (all its threads, from /proc: the work a second of
audio costs, which other programs' load changes far less than the wall-clock figures), the most requests
generated side by side, the server's resident memory (now and its peak) and the 1-minute load average after the
level. The CPU, the load average
before and after, and the thread count head the table. Levels run in order, then again for each further round.

--code NAME=FOLDER (repeatable): compare versions of this program in one run, each server running the code of its
FOLDER (a checkout, e.g. `git worktree add /tmp/before COMMIT`); every round runs all levels of each in turn, so
they alternate under the same load. Without it, the server runs this checkout's code.
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine import SAMPLE_RATE, cpu_model, load_average  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TEXT = ("The quick brown fox jumps over the lazy dog, and the evening train to the coast leaves on time from "
        "platform four.")


def _make_voice(bundle: str, folder: str) -> None:
    """A random x-vector voice of this model in a fresh library (a child process: the model's memory goes away)."""
    import numpy as np

    from engine import Synthesizer, Voice

    synth = Synthesizer(bundle, threads=1, tuning=False)
    x = np.random.default_rng(0).standard_normal(synth.hidden_size).astype(np.float32) * 0.05
    Voice(xvector=x, model_id=synth.model_id, name="bench").save(Path(folder) / "bench.qvoice")


def memory_mb(pid: int) -> tuple[float, float]:
    """(resident now, resident peak) of a process, in MB (Linux /proc)."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) a process has used so far, all its threads (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def request(netloc: str, seed: int, frames: int) -> tuple[float, float, int, int]:
    """(seconds to first byte, to last byte, audio bytes, side by side) of one streamed request."""
    body = json.dumps({"model": "tts-1", "input": TEXT, "voice": "bench", "response_format": "pcm", "seed": seed,
                       "max_frames": frames})
    conn = http.client.HTTPConnection(netloc, timeout=600)
    t0 = time.perf_counter()
    conn.request("POST", "/v1/audio/speech", body, {"Content-Type": "application/json"})
    response = conn.getresponse()
    if response.status != 200:
        raise SystemExit(f"request failed: {response.status} {response.read()[:300]!r}")
    first = None
    size = 0
    while chunk := response.read1(65536):
        if first is None:
            first = time.perf_counter() - t0
        size += len(chunk)
    last = time.perf_counter() - t0
    conn.close()
    return first if first is not None else last, last, size, int(response.getheader("x-batched", "1"))


def level(netloc: str, clients: int, requests: int, frames: int, seed0: int) -> dict:
    results: list[tuple[float, float, int, int]] = []
    lock = threading.Lock()

    def client(c: int) -> None:
        for r in range(requests):
            got = request(netloc, seed0 + c * requests + r, frames)
            with lock:
                results.append(got)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    audio = sum(r[2] for r in results) / 2 / SAMPLE_RATE
    return {"first": [r[0] for r in results], "last": [r[1] for r in results], "audio": audio, "wall": wall,
            "batched": max(r[3] for r in results)}


def p95(values: list[float]) -> float:
    return sorted(values)[min(len(values) - 1, int(round(0.95 * (len(values) - 1))))]


def start_server(code: Path, args: argparse.Namespace, voices: str) -> tuple[subprocess.Popen, str]:
    """`qwen3tts serve` on the code of the folder `code`; (the process, its host:port)."""
    env = dict(os.environ, PYTHONPATH=str(code))
    server = subprocess.Popen([sys.executable, "-m", "qwen3tts_cli", "serve", "--model", str(args.model),
                               "--port", "0", "--threads", str(args.threads), "--voices", voices,
                               "--decoder-precision", args.decoder_precision,
                               "--max-waiting", "64"], cwd=code, env=env, stderr=subprocess.PIPE, text=True)
    line = server.stderr.readline() if server.stderr else ""
    match = re.search(r"at http://([\d.]+:\d+)/v1", line)
    if not match:
        server.terminate()
        raise SystemExit(f"the server did not start: {line.strip()}")
    request(match.group(1), 0, min(args.frames, 8))  # warm-up: first calls allocate
    return server, match.group(1)


def commit_of(code: Path) -> str:
    out = subprocess.run(["git", "-C", str(code), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return out.stdout.strip() or "?"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument("--clients", default="1,2,4,8")
    ap.add_argument("--requests", type=int, default=3, help="requests per client, one after another")
    ap.add_argument("--frames", type=int, default=50, help="frames per request (80 ms each)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--decoder-precision", default="fp32", help="the server's speech decoder (fp32: exact)")
    ap.add_argument("--code", action="append", default=[], metavar="NAME=FOLDER",
                    help="a version of this program to serve from (repeat to compare; default: this checkout)")
    args = ap.parse_args()
    counts = [int(c) for c in args.clients.split(",")]
    codes: dict[str, Path] = {}
    for item in args.code or [f"this={ROOT}"]:
        name, sep, folder = item.partition("=")
        if not sep or not name or not (Path(folder) / "qwen3tts_cli").is_dir():
            raise SystemExit(f"--code wants NAME=FOLDER with a checkout of this program in FOLDER, not {item!r}")
        codes[name] = Path(folder).resolve()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stopped: the server below is stopped too
    with tempfile.TemporaryDirectory(prefix="server-load-") as voices:
        ctx = multiprocessing.get_context("spawn")
        maker = ctx.Process(target=_make_voice, args=(str(args.model), voices))
        maker.start()
        maker.join()
        servers: dict[str, tuple[subprocess.Popen, str]] = {}
        try:
            for name, code in codes.items():
                servers[name] = start_server(code, args, voices)
            print(f"# {cpu_model()}, {os.cpu_count()} CPUs, server threads {args.threads}, decoder "
                  f"{args.decoder_precision}, load average before "
                  f"{load_average()}; {args.requests} requests per client, {args.frames} frames "
                  f"({args.frames * 0.08:.1f} s of audio) each, streamed pcm; code: "
                  + ", ".join(f"{name} {commit_of(code)}" for name, code in codes.items()))
            print("| round | code | clients | first byte median / p95 s | last byte median / p95 s | audio s per s | "
                  "vs 1 client | CPU s per audio s | side by side | server RSS / peak MB | load |")
            print("|---|---|---|---|---|---|---|---|---|---|---|")
            for round_ in range(1, args.rounds + 1):
                for name, (server, netloc) in servers.items():
                    base: float | None = None  # this round's first level (1 client): the load of its own round
                    for n in counts:
                        cpu = cpu_seconds(server.pid)
                        r = level(netloc, n, args.requests, args.frames, seed0=1000 * n + 100 * round_)
                        cpu = cpu_seconds(server.pid) - cpu
                        rate = r["audio"] / r["wall"]
                        if base is None:
                            base = rate
                        rss, peak = memory_mb(server.pid)
                        print(f"| {round_} | {name} | {n} | {statistics.median(r['first']):.2f} / "
                              f"{p95(r['first']):.2f} | {statistics.median(r['last']):.2f} / {p95(r['last']):.2f} | "
                              f"{rate:.2f} | {rate / base:.2f}x | {cpu / r['audio']:.2f} | {r['batched']} | "
                              f"{rss:.0f} / {peak:.0f} | "
                              f"{load_average().split()[0]} |", flush=True)
            print(f"# load average after {load_average()}")
        finally:
            for server, _ in servers.values():
                server.terminate()
                server.wait(30)


if __name__ == "__main__":
    main()
