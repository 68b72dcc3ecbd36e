"""ncnn speech-tokenizer encoder at full size: time, peak memory and codes against the official run.

    flock /tmp/fullsize.lock /work/venv-ref/bin/python benchmarks/codec_encoder_official.py WORK
    flock /tmp/fullsize.lock /work/venv/bin/python benchmarks/codec_encoder_speed.py WORK
        [--precisions fp32,fp16,bf16] [--threads 2] [--repeat 2] [--chunk-frames N]

WORK holds speech_tokenizer/ and official.npz from the official script. Each precision is converted once
(codec_encoder part only) into WORK/bundle_<precision>. Every (precision, length) runs in a fresh process so
its peak RSS is its own; memory is reported as the peak minus the RSS right after loading the encoder.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.bundle import Bundle, BundleWriter  # noqa: E402
from engine.codec_encoder import DEFAULT_CHUNK_FRAMES, CodecEncoder  # noqa: E402
from engine.convert import ConvertOptions  # noqa: E402
from engine.convert import codec_encoder as encoder_convert  # noqa: E402
from engine.convert.checkpoint import Checkpoint, SafetensorsFile  # noqa: E402


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


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


def run_one(bundle: Path, audio: np.ndarray, threads: int, repeat: int, chunk: int) -> dict:
    enc = CodecEncoder(Bundle.open(bundle), threads=threads, chunk_frames=chunk)
    enc.encode(audio[:1920])  # warm up (first-run allocations)
    base = rss_mb()
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        codes = enc.encode(audio)
        best = min(best, time.perf_counter() - t)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"time": best, "base_mb": base, "peak_mb": peak, "codes": codes.tolist()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("work", type=Path)
    ap.add_argument("--precisions", default="fp32,fp16,bf16")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--chunk-frames", type=int, default=DEFAULT_CHUNK_FRAMES)
    ap.add_argument("--one", nargs=2, metavar=("PRECISION", "SECONDS"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    ref = np.load(args.work / "official.npz")
    lengths = sorted((k[len("audio_"):] for k in ref.files if k.startswith("audio_")), key=float)
    if args.one:
        prec, key = args.one
        res = run_one(args.work / f"bundle_{prec}", ref[f"audio_{key}"], args.threads, args.repeat,
                      args.chunk_frames)
        print(json.dumps(res))
        return
    print(f"threads {args.threads}, chunk {args.chunk_frames} frames at 25 Hz; official = transformers/torch "
          f"{args.threads} threads, best of its run")
    print(f"{'precision':9s} {'audio':>6s} {'ncnn ms':>8s} {'official':>9s} {'speedup':>7s} "
          f"{'load MB':>8s} {'peak+MB':>8s} {'codes = official':>18s}")
    for prec in args.precisions.split(","):
        t = time.perf_counter()
        encoder_bundle(args.work, prec)
        print(f"# {prec} bundle ready ({time.perf_counter() - t:.1f} s)", flush=True)
        for key in lengths:
            cmd = [sys.executable, __file__, str(args.work), "--one", prec, key, "--threads", str(args.threads),
                   "--repeat", str(args.repeat), "--chunk-frames", str(args.chunk_frames)]
            out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
            res = json.loads(out.strip().splitlines()[-1])
            codes = np.array(res["codes"], dtype=np.int64)
            want = ref[f"codes_{key}"]
            same = int((codes == want).sum()) if codes.shape == want.shape else 0
            official = float(ref[f"time_{key}"])
            print(f"{prec:9s} {key + ' s':>6s} {res['time'] * 1000:8.0f} {official * 1000:9.0f} "
                  f"{official / res['time']:6.1f}x {res['base_mb']:8.0f} {res['peak_mb'] - res['base_mb']:8.0f} "
                  f"{same:>8d}/{want.size:<8d}", flush=True)


if __name__ == "__main__":
    main()
