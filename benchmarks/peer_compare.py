"""This engine against qwentts.cpp (a C++/GGML port of Qwen3-TTS), alternating, with each run's foreign CPU use.

    python benchmarks/peer_compare.py run --peer DIR --xvec FILE --q8 BUNDLE --fp32 BUNDLE --out DIR [--rounds 6]
    python benchmarks/peer_compare.py table --out DIR [--max-foreign 0.03]

`run` times, round after round, qwentts.cpp with its Q8_0 and Q4_K_M talkers on 2 and 1 threads and `qwen3tts bench`
on the q8 and fp32 bundles with the thread counts tuned for this computer and with `--threads 2` (60 frames, an
x-vector clone, the same text). The order rotates by one place each round so no contender always follows the same
one. Each run's output goes to DIR/rN-NAME.log and one JSON line to DIR/results.jsonl: the load average, and the
share of all CPU time other processes used while it ran (/proc/stat busy time minus the run's own CPU time), so
runs disturbed by other programs can be left out. `table` prints the Markdown table of the runs under --max-foreign.

The peer, built once from its checkout (https://github.com/ServeurpersoCom/qwentts.cpp; a Python venv with torch, gguf,
safetensors and numpy for its converter; CKPT is the checkpoint both sides use, e.g. from
`benchmarks/make_checkpoint.py --preset 0.6b`):

    cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON && cmake --build build -j 2 --target qwen-tts quantize
    mkdir checkpoints && ln -s $CKPT checkpoints/Qwen3-TTS-12Hz-0.6B-Base
    ln -s $CKPT/speech_tokenizer checkpoints/Qwen3-TTS-Tokenizer-12Hz
    python convert.py
    build/quantize models/qwen-talker-0.6b-base-F32.gguf models/qwen-talker-0.6b-base-Q8_0.gguf Q8_0   # and Q4_K_M
    build/quantize models/qwen-tokenizer-12hz-F32.gguf models/qwen-tokenizer-12hz-Q8_0.gguf Q8_0

Its command line has no thread option (it uses half the logical CPUs); this script sets QWENTTS_THREADS, which needs
one added line at the top of backend_cpu_n_threads() in src/backend.h:

    if (const char * e = std::getenv("QWENTTS_THREADS")) { int t = atoi(e); if (t > 0) return t; }

The x-vector file for --xvec: `numpy.random.default_rng(0).standard_normal(1024).astype(numpy.float32).tofile(F)`.
Run `qwen3tts bench --model BUNDLE --tune --frames 8` on a quiet machine first, so the tuned counts are quiet ones.

--pypi-python PY adds the CPU build of the same engine that anyone gets with pip, `realtimetts-qwen-native-cpu`
(0.4.2: an AVX2/FMA baseline, no -march=native; import name qwentts_cpp_cpu), on the same GGUF files in DIR/models,
as contenders "pypi Q8_0 2t" and "pypi Q4_K_M 2t". PY is a Python with that package installed, kept apart from
this project (it is not one of its dependencies):

    python -m venv /tmp/pypi-peer && /tmp/pypi-peer/bin/pip install realtimetts-qwen-native-cpu==0.4.2
    python benchmarks/peer_compare.py run ... --pypi-python /tmp/pypi-peer/bin/python

Each such run is this script's `pypi-one` in PY: the package's QwenTTS with cpu_threads, streaming (stream()), the
same text, x-vector, seed and frame cap as the peer's command; it prints the native library's [Perf] lines and the
time to the first audio chunk.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEXT = "The quick brown fox jumps over the lazy dog, and then it runs far away."
FRAMES = 60

PEER_TOTAL = r"Total ([\d.]+) ms \((\d+) frames, ([\d.]+) ms/frame AR, audio ([\d.]+) s, RTF ([\d.]+)\)"
PYPI_RUN = r"^\[pypi\] first audio ([\d.]+) s, wall ([\d.]+) ms, audio ([\d.]+) s, RTF ([\d.]+)"
PEER_PARTS = {"talker_ms": r"TalkerDecode .*?([\d.]+) ms/frame", "cp_ms": r"CodePredictor .*?\(([\d.]+) ms/frame",
              "codec_ms": r"CodecDecode ([\d.]+) ms", "prefill_ms": r"Prefill ([\d.]+) ms"}
OURS_PARTS = {"gen_ms": r"^generation +([\d.]+) ms/frame median", "gen_mean_ms": r"median, ([\d.]+) ms/frame mean",
              "talker_ms": r"^talker step +([\d.]+)", "cp_ms": r"^code pred\. +([\d.]+)",
              "rtf": r"^end to end +RTF ([\d.]+)", "gb_frame": r"^weights +([\d.]+) GB",
              "first_audio_s": r"^first audio +([\d.]+) s"}


def contenders(args: argparse.Namespace) -> dict[str, tuple[list[str], dict[str, str]]]:
    """Name -> (command, extra environment)."""
    peer = args.peer.resolve()

    def peer_cmd(quant: str) -> list[str]:
        return [str(peer / "build/qwen-tts"), "--model", str(peer / f"models/qwen-talker-0.6b-base-{quant}.gguf"),
                "--codec", str(peer / "models/qwen-tokenizer-12hz-Q8_0.gguf"), "--ref-spk", str(args.xvec),
                "--lang", "English", "--max-new", str(FRAMES), "--seed", "0", "-o", str(args.out / "peer.wav")]

    ours = [sys.executable, "-m", "qwen3tts_cli", "bench", "--frames", str(FRAMES), "--text", TEXT]

    def pypi_cmd(quant: str, threads: int) -> list[str]:
        return [str(args.pypi_python), str(Path(__file__).resolve()), "pypi-one",
                "--talker", str(peer / f"models/qwen-talker-0.6b-base-{quant}.gguf"),
                "--codec", str(peer / "models/qwen-tokenizer-12hz-Q8_0.gguf"), "--xvec", str(args.xvec),
                "--threads", str(threads)]

    # its own Python and packages: the module path as the caller set it, not this checkout's
    same_path = {"PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    pypi = ({f"pypi {quant} 2t": (pypi_cmd(quant, 2), same_path) for quant in ("Q8_0", "Q4_K_M")}
            if args.pypi_python else {})
    return {**pypi,
        "peer Q8_0 2t": (peer_cmd("Q8_0"), {"QWENTTS_THREADS": "2"}),
        "peer Q4_K_M 2t": (peer_cmd("Q4_K_M"), {"QWENTTS_THREADS": "2"}),
        "ours q8 tuned": (ours + ["--model", str(args.q8)], {}),
        "ours fp32 tuned": (ours + ["--model", str(args.fp32)], {}),
        "peer Q8_0 1t": (peer_cmd("Q8_0"), {"QWENTTS_THREADS": "1"}),
        "peer Q4_K_M 1t": (peer_cmd("Q4_K_M"), {"QWENTTS_THREADS": "1"}),
        "ours q8 2t": (ours + ["--threads", "2", "--model", str(args.q8)], {}),
        "ours fp32 2t": (ours + ["--threads", "2", "--model", str(args.fp32)], {}),
    }


def cpu_seconds() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine since boot; idle and iowait are not busy."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    tick = os.sysconf("SC_CLK_TCK")
    return (sum(fields) - fields[3] - fields[4]) / tick, sum(fields) / tick


def parse(name: str, text: str) -> dict[str, float | None]:
    found: dict[str, float | None] = {}
    if name.startswith(("peer", "pypi")):
        m = re.search(PEER_TOTAL, text)
        if m:
            found.update(gen_ms=float(m[3]), rtf=float(m[5]))
        run = re.search(PYPI_RUN, text, re.M)
        if run:  # the wall clock around the streamed synthesis, and its first chunk
            found.update(first_audio_s=float(run[1]), rtf=float(run[4]))
        parts = PEER_PARTS
    else:
        parts = OURS_PARTS
    for key, pattern in parts.items():
        m = re.search(pattern, text, re.M)
        found[key] = float(m[1]) if m else None
    return found


def time_one(name: str, cmd: list[str], extra_env: dict[str, str]) -> tuple[dict, str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT), **extra_env}
    load_before = os.getloadavg()[0]
    busy0, total0 = cpu_seconds()
    own0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.time()
    proc = subprocess.run(cmd, env=env, input=TEXT if name.startswith(("peer", "pypi")) else "", capture_output=True,
                          text=True,
                          cwd=ROOT)  # python -m puts the working folder first on the path: this checkout's engine
    wall = time.time() - start
    busy1, total1 = cpu_seconds()
    own1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    own = (own1.ru_utime + own1.ru_stime) - (own0.ru_utime + own0.ru_stime)
    foreign = max(0.0, (busy1 - busy0) - own) / max(total1 - total0, 1e-9)
    record = {"name": name, "rc": proc.returncode, "wall_s": round(wall, 1), "load_before": load_before,
              "load_after": os.getloadavg()[0], "foreign_cpu": round(foreign, 3), "own_cpu_s": round(own, 1),
              "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(start))}
    output = proc.stdout + proc.stderr
    record.update(parse(name, output))
    return record, " ".join(cmd) + "\n" + output


def run(args: argparse.Namespace) -> int:
    args.out.mkdir(parents=True, exist_ok=True)
    table = contenders(args)
    names = [n for n in table if not args.only or n in args.only.split(",")]
    with open(args.out / "results.jsonl", "a") as results:
        for r in range(args.first, args.first + args.rounds):
            shift = r % len(names)
            for name in names[shift:] + names[:shift]:
                record, output = time_one(name, *table[name])
                record["round"] = r
                (args.out / f"r{r}-{name.replace(' ', '_')}.log").write_text(output)
                print(json.dumps(record), flush=True)
                results.write(json.dumps(record) + "\n")
                results.flush()
    return 0


def pypi_one(args: argparse.Namespace) -> int:
    """In the PyPI build's Python: one streamed synthesis, its native [Perf] lines and our own timing line."""
    import numpy as np
    import qwentts_cpp_cpu

    text = sys.stdin.read().strip() or TEXT
    tts = qwentts_cpp_cpu.QwenTTS(args.talker, args.codec, cpu_threads=args.threads)
    tts.set_log_callback(lambda level, message: print(message.rstrip(), flush=True))
    xvec = np.fromfile(args.xvec, dtype=np.float32)
    start, first, samples = time.perf_counter(), None, 0
    for chunk, _rate in tts.stream(text=text, lang="english", ref_spk_emb=xvec, seed=0, max_new_tokens=FRAMES):
        first = time.perf_counter() - start if first is None else first
        samples += len(chunk)
    wall = time.perf_counter() - start
    audio = samples / 24000
    print(f"[pypi] first audio {first or 0.0:.3f} s, wall {wall * 1000:.1f} ms, audio {audio:.2f} s, "
          f"RTF {wall / audio if audio else 0.0:.3f}", flush=True)
    tts.close()
    return 0


def mean_range(values: list[float]) -> str:
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.1f}"
    return f"{sum(values) / len(values):.1f} ({min(values):.1f}-{max(values):.1f})"


def table(args: argparse.Namespace) -> int:
    records = [json.loads(line) for line in (args.out / "results.jsonl").read_text().splitlines() if line.strip()]
    # the peer's "ms/frame AR" is a mean over all frames; ours prints a median and a mean, the mean compares
    print("| | runs kept / dropped | generation ms/frame, mean | (ours: median) | talker / code predictor ms/frame "
          "| RTF end to end | first audio s | load average | foreign CPU (kept) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in dict.fromkeys(r["name"] for r in records):
        runs = [r for r in records if r["name"] == name and r["rc"] == 0 and r.get("gen_ms") is not None]
        kept = [r for r in runs if r["foreign_cpu"] < args.max_foreign]
        dropped = len([r for r in records if r["name"] == name]) - len(kept)
        if not kept:
            print(f"| {name} | 0 / {dropped} | - | - | - | - | - | - | - |")
            continue

        def col(key: str, rows: list[dict] = kept) -> str:
            return mean_range([r[key] for r in rows if r.get(key) is not None])

        loads = [r["load_before"] for r in kept] + [r["load_after"] for r in kept]
        shares = [r["foreign_cpu"] for r in kept]
        peer = name.startswith(("peer", "pypi"))
        mean = "gen_ms" if peer else "gen_mean_ms"
        median = "-" if peer else col("gen_ms")
        print(f"| {name} | {len(kept)} / {dropped} | {col(mean)} | {median} | {col('talker_ms')} / {col('cp_ms')} "
              f"| {col('rtf')} | {col('first_audio_s')} | {min(loads):.2f}-{max(loads):.2f} "
              f"| {min(shares):.1%}-{max(shares):.1%} |")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("--peer", type=Path, required=True, help="qwentts.cpp checkout with build/ and models/")
    r.add_argument("--xvec", type=Path, required=True, help="1024 float32 values (the peer's --ref-spk)")
    r.add_argument("--q8", type=Path, required=True)
    r.add_argument("--fp32", type=Path, required=True)
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--rounds", type=int, default=6)
    r.add_argument("--first", type=int, default=0, help="number of the first round (to continue a series)")
    r.add_argument("--only", default="", help="comma-separated contender names (default: all)")
    r.add_argument("--pypi-python", type=Path, help="a Python with realtimetts-qwen-native-cpu installed: adds the "
                                                   "PyPI build on the same GGUF files")
    one = sub.add_parser("pypi-one", help=argparse.SUPPRESS)
    one.add_argument("--talker", type=Path, required=True)
    one.add_argument("--codec", type=Path, required=True)
    one.add_argument("--xvec", type=Path, required=True)
    one.add_argument("--threads", type=int, default=2)
    t = sub.add_parser("table")
    t.add_argument("--out", type=Path, required=True)
    t.add_argument("--max-foreign", type=float, default=0.03, help="keep runs where others used less than this share")
    args = ap.parse_args()
    return {"run": run, "table": table, "pypi-one": pypi_one}[args.command](args)


if __name__ == "__main__":
    raise SystemExit(main())
