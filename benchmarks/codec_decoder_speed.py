"""Codec decoder at full size: ncnn vs the official decoder, alternating in one run; speed and error.

    flock /tmp/fullsize.lock .venv/bin/python benchmarks/codec_decoder_speed.py CHECKPOINT WORK
        [--frames 50,330] [--threads 2] [--precisions fp32] [--decoder-precisions fp32,bf16] [--rounds 3]
        [--stream-frames 40] [--push 4] [--official-bf16]

CHECKPOINT: a hub-layout checkpoint (e.g. benchmarks/make_checkpoint.py --preset 0.6b). WORK: a working folder;
the codec_decoder part is converted into WORK/bundle_<precision> and random codes go to WORK/codes.npz. The
official decoder runs in the reference environment (bench_env.REF_PYTHON) as a worker process that decodes one
length per request, so each round times the official decoder and ours one after the other (the machine is
shared: alternating keeps both under the same load). Streaming: the first --stream-frames frames pushed one
frame at a time, and --push frames at a time (what the overlap thread does when generation runs ahead of the
decoder); the official code has no streaming decoder, so it compares with the official whole decode.
Times are the best of --rounds. Random weights often saturate the output at +-1, which hides errors; the error
columns are meaningful only when `clipped` is small. Rows are "bundle precision/decoder precision"; "SNR fp32" is
against our fp32 decoder on the same codes (the cost of bf16 convolutions), "SNR off." against the official fp32
decoder. --official-bf16 adds the official decoder loaded in bfloat16 (what the official demo does by default).
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


def official_worker(ckpt: Path, work: Path, threads: int, with_bf16: bool) -> None:
    """Reference environment: for each request read from stdin (a length, or bf16:<length>), decode it with
    qwen_tts (chunked_decode 300+25) in float32 (or bfloat16), save the waveform to WORK/official_<request>.npy and
    print 'wall cpu' seconds."""
    sys.path.insert(0, str(ROOT / "tests" / "reference"))
    import oracle  # noqa: F401  (torchaudio stub before qwen_tts)
    import torch
    from qwen_tts import Qwen3TTSTokenizer

    torch.set_num_threads(threads)
    toks = {"": Qwen3TTSTokenizer.from_pretrained(str(ckpt / "speech_tokenizer"), device_map="cpu")}
    if with_bf16:
        toks["bf16:"] = Qwen3TTSTokenizer.from_pretrained(str(ckpt / "speech_tokenizer"), device_map="cpu",
                                                          dtype=torch.bfloat16)
    codes = np.load(work / "codes.npz")
    for tok in toks.values():
        tok.decode({"audio_codes": torch.tensor(codes[codes.files[0]][:5])})  # warm-up
    print("ready", flush=True)
    for line in sys.stdin:
        key = line.strip()
        tag, length = ("bf16:", key[5:]) if key.startswith("bf16:") else ("", key)
        w, c = time.perf_counter(), time.process_time()
        wavs, _sr = toks[tag].decode({"audio_codes": torch.tensor(codes[length])})
        w, c = time.perf_counter() - w, time.process_time() - c
        np.save(work / f"official_{key}.npy", wavs[0].astype(np.float32))
        print(f"{w} {c}", flush=True)


def best(times: list[tuple[float, float]]) -> tuple[float, float]:
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkpoint", type=Path)
    ap.add_argument("work", type=Path)
    ap.add_argument("--frames", default="50,330")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--precisions", default="fp32", help="bundle precisions to convert and time")
    ap.add_argument("--decoder-precisions", default="fp32,bf16",
                    help="speech decoder precisions to time on each bundle (fp32 first: the SNR reference)")
    ap.add_argument("--official-bf16", action="store_true", help="also time the official decoder in bfloat16")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--stream-frames", type=int, default=40, help="frames of the streaming runs (0: none)")
    ap.add_argument("--push", type=int, default=4, help="frames per push of the multi-frame streaming run")
    ap.add_argument("--official", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--official-python", default=REF_PYTHON)
    a = ap.parse_args()
    if a.official:
        official_worker(a.checkpoint, a.work, a.threads, a.official_bf16)
        return

    sys.path.insert(0, str(ROOT))
    from engine import Bundle, convert_checkpoint, load_average
    from engine.nets.codec_decoder import CodecDecoder
    from engine.runtime.manifest_parts import CodecDecoderPart

    a.work.mkdir(parents=True, exist_ok=True)
    lengths = [int(x) for x in a.frames.split(",")]
    decoders = {}
    for p in a.precisions.split(","):
        dest = a.work / f"bundle_{p}"
        if not (dest / "manifest.json").is_file() or not Bundle.open(dest).record(CodecDecoderPart).bf16_layers:
            convert_checkpoint(a.checkpoint, dest, precision=p, parts=["codec_decoder"], overwrite=True)
        for dp in a.decoder_precisions.split(","):
            decoders[f"{p}/{dp}"] = CodecDecoder(Bundle.open(dest), threads=a.threads, precision=dp)
    precisions = list(decoders)
    cb = decoders[precisions[0]].codebook_sizes
    rng = np.random.default_rng(0)
    keys = [str(t) for t in lengths]
    codes = {k: rng.integers(0, cb, size=(int(k), len(cb))) for k in keys}
    np.savez(a.work / "codes.npz", **codes)
    worker = subprocess.Popen([a.official_python, __file__, str(a.checkpoint), str(a.work), "--official",
                               "--threads", str(a.threads)] + (["--official-bf16"] if a.official_bf16 else []),
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    for line in worker.stdout:  # the official packages may print notices first
        if line.strip() == "ready":
            break
    else:
        raise SystemExit("The official decoder did not start.")

    def official(key: str) -> tuple[float, float]:
        worker.stdin.write(key + "\n")
        worker.stdin.flush()
        while True:
            words = worker.stdout.readline().split()
            try:
                return float(words[0]), float(words[1])
            except (IndexError, ValueError):
                if worker.poll() is not None:
                    raise SystemExit("The official decoder stopped.") from None

    def timed(fn) -> tuple[tuple[float, float], np.ndarray]:
        w, c = time.perf_counter(), time.process_time()
        out = fn()
        return (time.perf_counter() - w, time.process_time() - c), out

    def streamed(dec, frames: np.ndarray, push: int) -> np.ndarray:
        s = dec.stream()
        return np.concatenate([s.push(frames[i:i + push]) for i in range(0, len(frames), push)])

    for dec in decoders.values():
        dec.decode(codes[keys[0]][:5])  # warm-up
    stream_codes = codes[keys[0]][:a.stream_frames]
    runs: dict[tuple[str, str], list] = {}
    wavs: dict[tuple[str, str], np.ndarray] = {}
    print(f"load average before: {load_average()}", flush=True)
    for _ in range(a.rounds):
        for key in keys:
            runs.setdefault(("official", key), []).append(official(key))
            if a.official_bf16:
                runs.setdefault(("official-bf16", key), []).append(official("bf16:" + key))
            for p, dec in decoders.items():
                t, wavs[(p, key)] = timed(lambda dec=dec, key=key: dec.decode(codes[key]))
                runs.setdefault((p, key), []).append(t)
        if a.stream_frames:
            for p, dec in decoders.items():
                for push in (1, a.push):
                    t, wavs[(p, f"push{push}")] = timed(lambda dec=dec, push=push: streamed(dec, stream_codes, push))
                    runs.setdefault((p, f"push{push}"), []).append(t)
    print(f"load average after: {load_average()}", flush=True)
    worker.stdin.close()
    worker.wait()

    print(f"\nthreads {a.threads}, best of {a.rounds} alternating rounds; ms per 80 ms frame, RTF = compute time / "
          "audio time; push N = streaming N frames per push (vs the official whole decode of the same codes)")
    print(f"{'':13s} {'run':>8s} {'frames':>6s} {'ms/frame':>9s} {'RTF':>6s} {'cpu ms/fr':>9s} {'vs official':>11s} "
          f"{'max err':>9s} {'SNR off.':>8s} {'SNR fp32':>8s} {'clipped':>8s}")

    def snr(got: np.ndarray, want: np.ndarray) -> float:
        return 10 * np.log10(float((want**2).sum()) / max(float(((got - want) ** 2).sum()), 1e-30))

    for key in keys:
        t = int(key)
        ow, oc = best(runs[("official", key)])
        print(f"{'official':13s} {'whole':>8s} {t:6d} {1000 * ow / t:9.1f} {ow / (t * FRAME_SECONDS):6.3f} "
              f"{1000 * oc / t:9.1f}")
        if a.official_bf16:
            bw, bc = best(runs[("official-bf16", key)])
            want = np.load(a.work / f"official_{key}.npy")
            got = np.load(a.work / f"official_bf16:{key}.npy")
            print(f"{'official bf16':13s} {'whole':>8s} {t:6d} {1000 * bw / t:9.1f} {bw / (t * FRAME_SECONDS):6.3f} "
                  f"{1000 * bc / t:9.1f} {ow / bw:10.2f}x {np.abs(got - want).max():9.2e} {snr(got, want):8.1f}")
    for p in precisions:
        rows = [(key, "whole", int(key)) for key in keys]
        if a.stream_frames:
            rows += [(f"push{n}", f"push {n}", len(stream_codes)) for n in (1, a.push)]
        for run, label, t in rows:
            w, c = best(runs[(p, run)])
            ref_key = run if run in keys else keys[0]
            want = np.load(a.work / f"official_{ref_key}.npy")[:t * 1920]
            ow = best(runs[("official", ref_key)])[0] / int(ref_key)  # official seconds per frame
            got = wavs[(p, run)]
            exact = wavs.get((p.split("/")[0] + "/fp32", run))
            vs_fp32 = f"{snr(got, exact):8.1f}" if exact is not None else f"{'':8s}"
            print(f"{p:13s} {label:>8s} {t:6d} {1000 * w / t:9.1f} {w / (t * FRAME_SECONDS):6.3f} "
                  f"{1000 * c / t:9.1f} {ow / (w / t):10.2f}x {np.abs(got - want).max():9.2e} {snr(got, want):8.1f} "
                  f"{vs_fp32} {np.mean(np.abs(want) >= 1):8.3f}")


if __name__ == "__main__":
    main()
