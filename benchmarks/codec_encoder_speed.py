"""ncnn speech-tokenizer encoder at full size: time, peak memory and codes against the official encoder.

    flock /tmp/fullsize.lock .venv-ref/bin/python benchmarks/codec_encoder_official.py WORK
    flock /tmp/fullsize.lock .venv/bin/python benchmarks/codec_encoder_speed.py WORK
        [--precisions fp32,fp16,bf16] [--threads 2] [--rounds 3] [--chunk-frames N] [--official-python PY]

WORK holds speech_tokenizer/ (random full-size Mimi encoder) and official.npz (inputs, official codes) from the
official script. Each precision is converted once (codec_encoder part only) into WORK/bundle_<precision>.

Speed: the machine is shared, so the official encoder (a --serve process in the reference environment) and
ours (a --serve process here) run alternately, length by length, for --rounds rounds; the table gives the
median wall time and median CPU time of each. Memory: every (precision, length) also runs once in a fresh
process; "load" is the RSS after loading, "peak+" the peak RSS of one encode above it.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from bench_env import REF_PYTHON, ROOT  # noqa: E402

sys.path.insert(0, str(ROOT))

from engine.convert import ConvertOptions  # noqa: E402
from engine.convert import codec_encoder as encoder_convert  # noqa: E402
from engine.convert.checkpoint import Checkpoint, SafetensorsFile  # noqa: E402
from engine.nets.codec_encoder import DEFAULT_CHUNK_FRAMES, CodecEncoder  # noqa: E402
from engine.runtime.bundle import Bundle  # noqa: E402
from engine.runtime.bundle_writer import BundleWriter  # noqa: E402


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def encoder_bundle(work: Path, precision: str) -> Path:
    dest = work / f"bundle_{precision}"
    if (dest / "manifest.json").is_file():
        return dest
    sd = work / "speech_tokenizer"
    speech = SafetensorsFile(sd / "model.safetensors")
    ckpt = Checkpoint(path=work, config={}, generation_config={},
                      speech_config=json.loads((sd / "config.json").read_text(encoding="utf-8")),
                      main=None, speech=speech)  # type: ignore[arg-type]  (the encoder reads only .speech)
    try:
        with BundleWriter(dest, overwrite=True) as writer:
            writer.manifest["precision"] = precision
            writer.manifest["speech_config"] = ckpt.speech_config
            encoder_convert.convert(ckpt, writer, ConvertOptions(precision))
            return writer.finish()
    finally:
        speech.close()


def memory_run(work: Path, precision: str, key: str, threads: int, chunk: int) -> dict:
    """One encode in this (fresh) process: RSS after load, peak above it, agreement with the official codes."""
    ref = np.load(work / "official.npz")
    audio = ref[f"audio_{key}"]
    enc = CodecEncoder(Bundle.open(work / f"bundle_{precision}"), threads=threads, chunk_frames=chunk)
    enc.encode(audio[:1920])  # build pipelines and first-use allocations
    base = rss_mb()
    codes = enc.encode(audio)
    want = ref[f"codes_{key}"]
    return {"load_mb": base, "peak_mb": peak_mb() - base,
            "same": int((codes == want).sum()) if codes.shape == want.shape else 0, "total": int(want.size),
            "level0": float(np.mean(codes[:, 0] == want[:, 0])) if codes.shape == want.shape else 0.0}


def serve(work: Path, precision: str, threads: int, chunk: int) -> None:
    ref = np.load(work / "official.npz")
    enc = CodecEncoder(Bundle.open(work / f"bundle_{precision}"), threads=threads, chunk_frames=chunk)
    enc.encode(ref[ref.files[0]][:1920])
    print("ready", flush=True)
    for line in sys.stdin:
        audio = ref[f"audio_{line.strip()}"]
        w, c = time.perf_counter(), time.process_time()
        enc.encode(audio)
        print(json.dumps({"wall": time.perf_counter() - w, "cpu": time.process_time() - c}), flush=True)


class Server:
    def __init__(self, cmd: list[str]):
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                  text=True)
        while (line := self.p.stdout.readline()) and line.strip() != "ready":
            pass
        if not line:
            raise RuntimeError(f"server did not start: {' '.join(cmd)}")

    def ask(self, key: str) -> dict:
        self.p.stdin.write(key + "\n")
        self.p.stdin.flush()
        return json.loads(self.p.stdout.readline())

    def close(self) -> None:
        self.p.stdin.close()
        self.p.wait()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("work", type=Path)
    ap.add_argument("--precisions", default="fp32,fp16,bf16")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--chunk-frames", type=int, default=DEFAULT_CHUNK_FRAMES)
    ap.add_argument("--official-python", default=REF_PYTHON)
    ap.add_argument("--memory", nargs=2, metavar=("PRECISION", "SECONDS"), help=argparse.SUPPRESS)
    ap.add_argument("--serve", metavar="PRECISION", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.memory:
        print(json.dumps(memory_run(args.work, *args.memory, args.threads, args.chunk_frames)))
        return
    if args.serve:
        serve(args.work, args.serve, args.threads, args.chunk_frames)
        return

    ref = np.load(args.work / "official.npz")
    keys = sorted((k[len("audio_"):] for k in ref.files if k.startswith("audio_")), key=float)
    precisions = args.precisions.split(",")
    common = ["--threads", str(args.threads), "--chunk-frames", str(args.chunk_frames)]
    mem: dict[tuple[str, str], dict] = {}
    for prec in precisions:
        t = time.perf_counter()
        encoder_bundle(args.work, prec)
        print(f"# {prec} bundle ready ({time.perf_counter() - t:.1f} s)", flush=True)
        for key in keys:
            out = subprocess.run([sys.executable, __file__, str(args.work), "--memory", prec, key, *common],
                                 check=True, capture_output=True, text=True).stdout
            mem[prec, key] = json.loads(out.strip().splitlines()[-1])

    official = Server([args.official_python, str(ROOT / "benchmarks" / "codec_encoder_official.py"),
                       str(args.work), "--serve", "--threads", str(args.threads)])
    ours = {p: Server([sys.executable, __file__, str(args.work), "--serve", p, *common]) for p in precisions}
    times: dict[tuple[str, str], list[dict]] = {}
    try:
        for r in range(args.rounds):
            for key in keys:
                times.setdefault(("official", key), []).append(official.ask(key))
                for p in precisions:
                    times.setdefault((p, key), []).append(ours[p].ask(key))
            print(f"# round {r + 1}/{args.rounds} done", flush=True)
    finally:
        official.close()
        for s in ours.values():
            s.close()

    def med(who: str, key: str, what: str) -> float:
        return statistics.median(x[what] for x in times[who, key])

    o_peak = {key: max(x["peak_mb"] for x in times["official", key]) for key in keys}
    o_same = all(x["same"] for k in keys for x in times["official", k])
    print(f"\nofficial: process peak RSS after each length {o_peak} MB (cumulative, includes load); "
          f"reloaded official codes = official.npz: {o_same}")
    print(f"threads {args.threads}, conv chunk {args.chunk_frames} frames at 25 Hz, median of {args.rounds} "
          f"alternating rounds")
    print(f"{'':9s} {'audio':>6s} {'wall ms':>8s} {'cpu ms':>8s} {'official wall':>13s} {'cpu':>7s} "
          f"{'speedup wall/cpu':>16s} {'load MB':>8s} {'peak+MB':>8s} {'codes = official':>18s} {'level 0':>8s}")
    for p in precisions:
        for key in keys:
            w, c = med(p, key, "wall"), med(p, key, "cpu")
            ow, oc = med("official", key, "wall"), med("official", key, "cpu")
            m = mem[p, key]
            print(f"{p:9s} {key + ' s':>6s} {w * 1000:8.0f} {c * 1000:8.0f} {ow * 1000:13.0f} {oc * 1000:7.0f} "
                  f"{ow / w:7.2f}x/{oc / c:5.2f}x {m['load_mb']:8.0f} {m['peak_mb']:8.0f} "
                  f"{m['same']:>8d}/{m['total']:<8d} {m['level0']:8.3f}")


if __name__ == "__main__":
    main()
