"""Codec decoder at full size: ncnn vs the official decoder, speed (ms per frame, real-time factor) and error.

    flock /tmp/fullsize.lock .venv/bin/python benchmarks/codec_decoder_speed.py CHECKPOINT WORK
        [--frames 50,330] [--threads 2] [--precisions fp32,fp16,bf16] [--rounds 2]

CHECKPOINT: a hub-layout checkpoint (e.g. benchmarks/make_checkpoint.py --preset 0.6b). WORK: a scratch folder;
the codec_decoder part is converted into WORK/bundle_<precision>, random codes go to WORK/codes.npz, and the
official decoder (run in the reference environment, bench_env.REF_PYTHON, through `--official`) writes its waveforms and times to WORK/official.npz.
Times are the best of --rounds (the machine is shared). Random weights often saturate the output at +-1, which
hides errors; the error columns are meaningful only when `clipped` is small.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from bench_env import REF_PYTHON, ROOT  # noqa: E402

FRAME_SECONDS = 0.08


def official(ckpt: Path, work: Path, threads: int, rounds: int) -> None:
    """Reference environment: decode every length with qwen_tts (chunked_decode 300+25), save wav and best time."""
    sys.path.insert(0, str(ROOT / "tests" / "reference"))
    import oracle  # noqa: F401  (torchaudio stub before qwen_tts)
    import torch
    from qwen_tts import Qwen3TTSTokenizer

    torch.set_num_threads(threads)
    tok = Qwen3TTSTokenizer.from_pretrained(str(ckpt / "speech_tokenizer"), device_map="cpu")
    codes = np.load(work / "codes.npz")
    tok.decode({"audio_codes": torch.tensor(codes[codes.files[0]][:5])})  # warm-up
    out = {}
    for key in codes.files:
        best = (float("inf"), 0.0)
        for _ in range(rounds):
            w, c = time.perf_counter(), time.process_time()
            wavs, _sr = tok.decode({"audio_codes": torch.tensor(codes[key])})
            best = min(best, (time.perf_counter() - w, time.process_time() - c))
        out[f"wav_{key}"] = wavs[0].astype(np.float32)
        out[f"time_{key}"] = np.array(best)
        print(f"# official {key} frames: {best[0]:.2f} s", flush=True)
    np.savez(work / "official.npz", **out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkpoint", type=Path)
    ap.add_argument("work", type=Path)
    ap.add_argument("--frames", default="50,330")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--precisions", default="fp32,fp16,bf16")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--official", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--official-python", default=REF_PYTHON)
    a = ap.parse_args()
    if a.official:
        official(a.checkpoint, a.work, a.threads, a.rounds)
        return

    sys.path.insert(0, str(ROOT))
    from engine.bundle import Bundle
    from engine.codec_decoder import CodecDecoder
    from engine.convert import convert_checkpoint

    a.work.mkdir(parents=True, exist_ok=True)
    lengths = [int(x) for x in a.frames.split(",")]
    precisions = a.precisions.split(",")
    bundles = {}
    for p in precisions:
        dest = a.work / f"bundle_{p}"
        if not (dest / "manifest.json").is_file():
            convert_checkpoint(a.checkpoint, dest, precision=p, parts=["codec_decoder"], overwrite=True)
        bundles[p] = dest
    cb = CodecDecoder(Bundle.open(bundles[precisions[0]]), threads=1).codebook_sizes
    rng = np.random.default_rng(0)
    np.savez(a.work / "codes.npz", **{str(t): rng.integers(0, cb, size=(t, len(cb))) for t in lengths})
    subprocess.run([a.official_python, __file__, str(a.checkpoint), str(a.work), "--official",
                    "--threads", str(a.threads), "--rounds", str(a.rounds)], check=True)
    ref = np.load(a.work / "official.npz")
    codes = np.load(a.work / "codes.npz")

    print(f"\nthreads {a.threads}, best of {a.rounds}; ms per 80 ms frame, RTF = compute time / audio time")
    print(f"{'':9s} {'frames':>6s} {'ms/frame':>9s} {'RTF':>6s} {'cpu ms/fr':>9s} {'vs official':>11s} "
          f"{'max err':>9s} {'SNR dB':>7s} {'clipped':>8s}")
    for key in codes.files:
        t = int(key)
        ow, oc = ref[f"time_{key}"]
        print(f"{'official':9s} {t:6d} {1000 * ow / t:9.1f} {ow / (t * FRAME_SECONDS):6.3f} {1000 * oc / t:9.1f}")
    for p in precisions:
        dec = CodecDecoder(Bundle.open(bundles[p]), threads=a.threads)
        dec.decode(codes[codes.files[0]][:5])  # warm-up
        for key in codes.files:
            t = int(key)
            best = (float("inf"), 0.0)
            for _ in range(a.rounds):
                w, c = time.perf_counter(), time.process_time()
                wav = dec.decode(codes[key])
                best = min(best, (time.perf_counter() - w, time.process_time() - c))
            want = ref[f"wav_{key}"]
            err = wav - want
            snr = 10 * np.log10(float((want**2).sum()) / max(float((err**2).sum()), 1e-30))
            ow = float(ref[f"time_{key}"][0])
            print(f"{p:9s} {t:6d} {1000 * best[0] / t:9.1f} {best[0] / (t * FRAME_SECONDS):6.3f} "
                  f"{1000 * best[1] / t:9.1f} {ow / best[0]:10.2f}x {np.abs(err).max():9.2e} {snr:7.1f} "
                  f"{np.mean(np.abs(want) >= 1):8.3f}")


if __name__ == "__main__":
    main()
