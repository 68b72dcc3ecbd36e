"""Whisper on ncnn against transformers: a 10 s clip per model size, front end, encoder and decoding timed apart,
peak memory, and whether the token ids agree; full-size random weights.

    flock /tmp/fullsize.lock .venv-ref/bin/python benchmarks/whisper_speed.py --make [--sizes tiny,base,small]
    flock /tmp/bench.lock .venv/bin/python benchmarks/whisper_speed.py [--sizes tiny,base,small] [--rounds 3]
        [--threads 2] [--tokens 40] [--cache DIR] [--checkpoint DIR]

--make builds the random checkpoints (transformers' WhisperForConditionalGeneration from the real models' shapes,
written by hand in engine/store/catalogue.py's table and SHAPES below; fp32 for tiny ... medium, fp16 for large-v3
and large-v3-turbo, as on the hub) into --cache (default /work/cache/whisper, else bench-out/whisper), with the
vocabulary of the test fixtures. The timing run converts each once (fp32 bundle) and then, per round and size,
runs ours and the reference alternately, each in a fresh process (so that peak RSS is its own): a warm-up
transcription, then the timed one. Random weights never end a transcript, so both decode exactly --tokens tokens
(max_new_tokens) after detecting the language; a real 10 s clip is about 30-40 tokens. --checkpoint DIR times one
checkpoint folder instead of the sizes (the smoke run uses the tiny test fixture).

The table: medians over the rounds of front end (16 kHz audio to log-mel), encoder, decoding (language detection
and the tokens), their total, the CPU time of the whole transcription (all threads: on a busy machine it says more
than the wall time), load time and peak RSS; the CPU model and load average are printed with it.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench_env import OUR_PYTHON, REF_PYTHON, ROOT, WORK_DIR

sys.path.insert(0, str(ROOT))

CLIP = ROOT / "tests" / "fixtures" / "whisper" / "audio" / "en_16k_10s.wav"
TOKENIZER = ROOT / "tests" / "fixtures" / "whisper" / "tokenizer"
# the real models' shapes (their config.json values): d_model, encoder layers, decoder layers, heads, mel bins,
# languages, checkpoint stored in fp16
SHAPES = {
    "tiny": (384, 4, 4, 6, 80, 99, False),
    "base": (512, 6, 6, 8, 80, 99, False),
    "small": (768, 12, 12, 12, 80, 99, False),
    "medium": (1024, 24, 24, 16, 80, 99, False),
    "large-v3": (1280, 32, 32, 20, 128, 100, True),
    "large-v3-turbo": (1280, 32, 4, 20, 128, 100, True),
}


def default_cache() -> Path:
    shared = Path("/work/cache/whisper")
    return shared if shared.parent.is_dir() else WORK_DIR / "whisper"


def peak_mb() -> float:
    """This process's peak RSS since it started its program (VmHWM: getrusage's maxrss would include the parent's
    size at the fork)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def make(cache: Path, sizes: list[str]) -> None:
    sys.path.insert(0, str(ROOT / "tests" / "reference"))
    from make_whisper_fixtures import build_checkpoint

    for i, size in enumerate(sizes):
        dest = cache / size
        if (dest / "model.safetensors").is_file():
            print(f"{size}: {dest} exists")
            continue
        d, enc, dec, heads, mels, langs, half = SHAPES[size]
        t0 = time.perf_counter()
        partial = cache / f".{size}.partial"
        build_checkpoint(partial, TOKENIZER, 5100 + i, mels, langs, d, enc, dec, heads, 4 * d, 0.02, 0.0, half)
        os.replace(partial, dest)
        print(f"{size}: wrote {dest} in {time.perf_counter() - t0:.0f} s")


def child_ours(bundle: Path, threads: int, tokens: int) -> dict:
    import engine

    t0 = time.perf_counter()
    transcriber = engine.Transcriber(bundle, threads=threads)
    load = time.perf_counter() - t0
    transcriber.transcribe(CLIP, max_new_tokens=tokens)  # warm-up
    cpu = time.process_time()
    result = transcriber.transcribe(CLIP, max_new_tokens=tokens)
    cpu = time.process_time() - cpu
    t = result.timings
    return {"load": load, "front_end": t.features, "encoder": t.encoder, "decoding": t.decoding, "cpu": cpu,
            "ids": list(result.token_ids), "peak_mb": peak_mb()}


def child_reference(checkpoint: Path, threads: int, tokens: int) -> dict:
    import librosa
    import soundfile as sf
    import torch
    from transformers import WhisperForConditionalGeneration, WhisperProcessor
    from transformers.modeling_outputs import BaseModelOutput

    torch.set_num_threads(threads)
    t0 = time.perf_counter()
    processor = WhisperProcessor.from_pretrained(checkpoint)
    model = WhisperForConditionalGeneration.from_pretrained(checkpoint, dtype=torch.float32).eval()
    load = time.perf_counter() - t0
    samples, rate = sf.read(str(CLIP), dtype="float32")

    def once() -> tuple[float, float, float, list[int]]:
        t0 = time.perf_counter()
        audio = samples if rate == 16000 else librosa.resample(samples, orig_sr=rate, target_sr=16000,
                                                                res_type="soxr_hq")
        features = processor(audio, sampling_rate=16000, return_tensors="pt").input_features
        t1 = time.perf_counter()
        with torch.no_grad():
            hidden = model.model.encoder(features).last_hidden_state
            t2 = time.perf_counter()
            ids = model.generate(encoder_outputs=BaseModelOutput(last_hidden_state=hidden), max_new_tokens=tokens,
                                 do_sample=False, num_beams=1, return_dict_in_generate=False)
        t3 = time.perf_counter()
        return t1 - t0, t2 - t1, t3 - t2, ids[0].tolist()

    once()
    cpu = time.process_time()
    front, enc, dec, ids = once()
    cpu = time.process_time() - cpu
    return {"load": load, "front_end": front, "encoder": enc, "decoding": dec, "cpu": cpu, "ids": ids,
            "peak_mb": peak_mb()}


def run_child(python: str, side: str, path: Path, threads: int, tokens: int) -> dict:
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONPATH=str(ROOT))
    proc = subprocess.run([python, __file__, "--child", side, str(path), "--threads", str(threads),
                           "--tokens", str(tokens)], capture_output=True, text=True, env=env, timeout=3600)
    if proc.returncode != 0:
        raise SystemExit(f"{side} child failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def bundle_for(checkpoint: Path, cache: Path) -> Path:
    import engine

    dest = cache / f"{checkpoint.name}-bundle-fp32"
    if not (dest / "manifest.json").is_file():
        t0 = time.perf_counter()
        engine.convert_checkpoint(checkpoint, dest, precision="fp32", overwrite=True)
        print(f"converted {checkpoint.name} in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return dest


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="tiny,base,small")
    ap.add_argument("--cache", type=Path, default=None)
    ap.add_argument("--checkpoint", type=Path, help="time this checkpoint folder instead of the sizes")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=40)
    ap.add_argument("--make", action="store_true", help="build the full-size random checkpoints (reference env)")
    ap.add_argument("--child", nargs=2, metavar=("SIDE", "PATH"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        side, path = args.child
        fn = child_ours if side == "ours" else child_reference
        print(json.dumps(fn(Path(path), args.threads, args.tokens)))
        return
    cache = args.cache or default_cache()
    sizes = [s for s in args.sizes.split(",") if s]
    if args.make:
        make(cache, sizes)
        return
    import engine

    checkpoints = [args.checkpoint] if args.checkpoint else [cache / s for s in sizes]
    missing = [str(c) for c in checkpoints if not (c / "model.safetensors").is_file()]
    if missing:
        raise SystemExit(f"no checkpoint at {', '.join(missing)}: build them with --make (see the docstring)")
    cache.mkdir(parents=True, exist_ok=True)
    bundles = {c: bundle_for(c, cache) for c in checkpoints}
    print(f"CPU: {engine.cpu_model()}; {args.threads} threads; load average before: "
          f"{engine.load_average()}")
    print(f"clip: {CLIP.name} (10 s), {args.tokens} tokens after language detection, {args.rounds} rounds, "
          "ours and transformers alternating, each in a fresh process")
    results: dict[tuple[str, str], list[dict]] = {}
    for _ in range(args.rounds):
        for c in checkpoints:
            results.setdefault((c.name, "ours"), []).append(run_child(OUR_PYTHON, "ours", bundles[c], args.threads,
                                                                      args.tokens))
            results.setdefault((c.name, "transformers"), []).append(
                run_child(REF_PYTHON, "reference", c, args.threads, args.tokens))
    print(f"{'model':<16}{'side':<14}{'front end':>10}{'encoder':>10}{'decoding':>10}{'total':>10}{'CPU':>9}"
          f"{'load':>8}{'peak RSS':>10}  bundle")
    for c in checkpoints:
        size_mb = sum(f.stat().st_size for f in bundles[c].rglob("*") if f.is_file()) / 1e6
        for side in ("ours", "transformers"):
            runs = results[(c.name, side)]

            def med(key: str, runs=runs) -> float:
                return statistics.median(r[key] for r in runs)

            total = med("front_end") + med("encoder") + med("decoding")
            print(f"{c.name:<16}{side:<14}{med('front_end'):>9.3f}s{med('encoder'):>9.3f}s{med('decoding'):>9.3f}s"
                  f"{total:>9.3f}s{med('cpu'):>8.2f}s{med('load'):>7.1f}s{med('peak_mb'):>8.0f}MB  "
                  + (f"{size_mb:.0f} MB" if side == "ours" else ""))
        same = all(a["ids"] == b["ids"] for a, b in zip(results[(c.name, "ours")], results[(c.name, "transformers")],
                                                        strict=True))
        print(f"{c.name}: token ids {'identical' if same else 'DIFFERENT'} (after the detected language: "
              f"{args.tokens} tokens)")
    print(f"load average after: {engine.load_average()}")


if __name__ == "__main__":
    main()
