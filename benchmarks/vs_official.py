"""Speed and greedy parity of our engine against the official qwen-tts, on one full-size random 0.6B checkpoint.

    flock /tmp/fullsize.lock python benchmarks/vs_official.py [--ckpt DIR] [--frames 50] [--threads 2]
                                                              [--precision fp32 q8 [fp16 ...]] [--skip-ours]
                                                              [--decoder-precision fp32 [bf16]]

Both sides run in their own subprocess (official: the reference environment with torch + qwen-tts; ours: the
runtime environment, ncnn + numpy), on the same checkpoint, text, reference audio (x-vector clone), greedy
decoding (argmax for the talker and the code predictor; repetition penalty 1.05 from generation_config.json, as
the official greedy run applies it) and the same number of frames, on the same number of threads. Neither side
may stop early: ours masks EOS (bench mode), and the official talker's EOS row of codec_head is zeroed in memory
so EOS can never be the argmax (the file is untouched). Prints both sets of figures, the ratios, and whether the
greedy codes are identical frame for frame. Both sides decode the codes twice: the first call (what the first
utterance after loading costs, one-time allocations included) and a second call on the same codes (steady state).
--decoder-precision bf16 adds a run of ours per bundle with the bf16 speech decoder (column "<precision>+bf16dec");
its audio's SNR against the official fp32 decoder's audio is printed when the codes are identical.

Both sides also get the memory floor `qwen3tts bench` prints: the bytes of weights one frame reads (ours counted
from the bundle's graphs, Synthesizer.frame_weights; the official side's fp32 weights counted from the
checkpoint), the floor in ms/frame at the machine's read bandwidth (measured before and after the runs, the best
seen) and the share of it each side reached.

Missing pieces are made on first use and cached: the checkpoint (benchmarks/make_checkpoint.py, 0.6b, seed 0)
and our bundle per precision (<ckpt>.bundle-<precision>, via `qwen3tts convert`).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
import wave
from pathlib import Path

from bench_env import OUR_PYTHON, REF_PYTHON, ROOT, WORK_DIR

DEFAULT_CKPT = WORK_DIR / "random-0.6b"
TEXT = ("The quick brown fox jumps over the lazy dog, and then it runs back home across the wide green field "
        "before the evening rain begins to fall.")
FRAME_SECONDS = 0.08


# ------------------------------------------------------------------------------------------------ plumbing


def write_reference(path: Path, seconds: float = 4.0, seed: int = 0) -> None:
    """A deterministic speech-like reference: voiced harmonics with a wandering pitch, plus a little noise."""
    import numpy as np

    sr = 24000
    t = np.arange(int(seconds * sr)) / sr
    rng = np.random.default_rng(seed)
    f0 = 140 + 30 * np.sin(2 * np.pi * 0.7 * t) + 15 * np.sin(2 * np.pi * 2.3 * t)
    phase = 2 * np.pi * np.cumsum(f0) / sr
    voiced = sum(np.sin(k * phase) / k for k in range(1, 12))
    env = 0.5 + 0.5 * np.sin(2 * np.pi * 3.1 * t) ** 2
    y = 0.25 * voiced * env + 0.01 * rng.standard_normal(t.size)
    pcm = np.clip(np.round(y / np.abs(y).max() * 0.6 * 32767), -32768, 32767).astype("<i2")
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(sr)
        w.writeframes(pcm.tobytes())


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_worker(python: str, args: list[str]) -> dict:
    cmd = [python, str(Path(__file__).resolve()), *args]
    print("$", " ".join(cmd), file=sys.stderr, flush=True)
    proc = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"error": f"exit code {proc.returncode}; see the messages above"}
    return json.loads(lines[-1])


def official_frame_bytes(ckpt: Path) -> int:
    """The weight bytes one official frame reads, in fp32 (the official side loads the checkpoint as float32): the
    talker step reads its decoder layers, final norm and codec head once; the code predictor's generate makes 15
    forward calls (a two-row prefill, then 14 single rows), each reading all its layers, its norm and the
    projection from the talker's width where there is one, plus one of the 15 heads (each head once per frame).
    Embedding lookups read one row and are left out, as on our side."""
    import math

    from safetensors import safe_open

    talker = code_predictor = heads = 0
    with safe_open(str(ckpt / "model.safetensors"), "np") as f:
        for name in f.keys():
            size = 4 * math.prod(f.get_slice(name).get_shape())
            if name.startswith(("talker.model.layers.", "talker.model.norm.", "talker.codec_head.")):
                talker += size
            elif name.startswith(("talker.code_predictor.model.layers.", "talker.code_predictor.model.norm.",
                                  "talker.code_predictor.small_to_mtp_projection.")):
                code_predictor += size
            elif name.startswith("talker.code_predictor.lm_head."):
                heads += size
    calls = 15
    return talker + calls * code_predictor + heads


# ------------------------------------------------------------------------------------------------ workers


def official_worker(a: argparse.Namespace) -> dict:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import _official  # noqa: F401  (torchaudio stub before qwen_tts)
    import numpy as np
    import torch

    torch.set_num_threads(a.threads)
    from qwen_tts import Qwen3TTSModel

    t0 = time.perf_counter()
    tts = Qwen3TTSModel.from_pretrained(str(a.ckpt), dtype=torch.float32, attn_implementation=a.attn,
                                        local_files_only=True)
    load = time.perf_counter() - t0
    model = tts.model
    talker = model.talker
    eos = model.config.talker_config.codec_eos_token_id
    with torch.no_grad():
        talker.codec_head.weight[eos].zero_()  # EOS never wins: exactly the requested number of frames

    t0 = time.perf_counter()
    items = tts.create_voice_clone_prompt(ref_audio=str(a.ref), x_vector_only_mode=True)
    voice_s = time.perf_counter() - t0

    backbone: list[float] = []
    cp: list[float] = []
    stamps: dict[str, float] = {}

    def pre(_m, _a):
        stamps["bb"] = time.perf_counter()

    def post(_m, _a, _o):
        backbone.append(time.perf_counter() - stamps["bb"])

    h1 = talker.model.register_forward_pre_hook(pre)
    h2 = talker.model.register_forward_hook(post)
    head: list[float] = []
    h3 = talker.codec_head.register_forward_pre_hook(lambda _m, _a: stamps.__setitem__("hd", time.perf_counter()))
    h4 = talker.codec_head.register_forward_hook(lambda _m, _a, _o: head.append(time.perf_counter() - stamps["hd"]))
    cp_generate = talker.code_predictor.generate

    def timed_cp(*args, **kw):
        t = time.perf_counter()
        out = cp_generate(*args, **kw)
        cp.append(time.perf_counter() - t)
        return out

    talker.code_predictor.generate = timed_cp
    st_decode = model.speech_tokenizer.decode
    captured: dict = {}

    def timed_decode(encoded):
        captured["codes"] = encoded[0]["audio_codes"].detach().cpu().numpy().copy()
        t = time.perf_counter()
        out = st_decode(encoded)
        captured["decode"] = time.perf_counter() - t
        captured["encoded"] = encoded
        return out

    model.speech_tokenizer.decode = timed_decode
    t0 = time.perf_counter()
    wavs, sr = tts.generate_voice_clone(
        text=a.text, language="English", voice_clone_prompt=items, do_sample=False, subtalker_dosample=False,
        max_new_tokens=a.frames + 1)  # max_new_tokens = N + 1 gives N frames
    total = time.perf_counter() - t0
    for h in (h1, h2, h3, h4):
        h.remove()
    # the same codes again: the decoder's steady state (the first call above pays one-time allocations)
    t = time.perf_counter()
    st_decode(captured["encoded"])
    decode_warm = time.perf_counter() - t
    codes = captured["codes"]
    np.save(a.out / "official_codes.npy", codes.astype(np.int64))
    np.save(a.out / "official_wav.npy", np.asarray(wavs[0], np.float32))
    n = codes.shape[0]
    decode = captured["decode"]
    generate = total - decode
    prefill = backbone[0] + head[0]
    steps = [b + h for b, h in zip(backbone[1:], head[1:], strict=False)]
    return {
        "side": "official", "frames": int(n), "threads": a.threads, "load_s": load, "voice_s": voice_s,
        "prefill_ms": prefill * 1000,
        "talker_ms": sum(steps[:n]) / n * 1000,
        "code_predictor_ms": sum(cp[:n]) / n * 1000,
        "per_frame_ms": generate / n * 1000,
        "overhead_ms": (generate - prefill - sum(steps) - sum(cp)) / n * 1000,
        "decoder_ms": decode / n * 1000,
        "decoder_warm_ms": decode_warm / n * 1000,
        "generate_s": generate, "decode_s": decode,
        "rtf": total / (n * FRAME_SECONDS),
        "peak_rss_mb": peak_rss_mb(),
        "audio_samples": int(len(wavs[0])),
    }


def our_worker(a: argparse.Namespace) -> dict:
    sys.path.insert(0, str(ROOT))
    import numpy as np

    from engine import GenerationSettings, Synthesizer, run_synthesis

    t0 = time.perf_counter()
    synth = Synthesizer(a.bundle, threads=a.threads, decoder_precision=a.decoder_precision[0])
    load = time.perf_counter() - t0
    t0 = time.perf_counter()
    voice = synth.create_voice(str(a.ref))
    voice_s = time.perf_counter() - t0
    # the bench path: greedy, EOS masked so the frame count is exact, codes only (decoded below, in one go,
    # as the official non-streaming path does)
    settings = GenerationSettings(greedy=True, seed=0, max_frames=a.frames, ignore_eos=True, codes_only=True)
    t0 = time.perf_counter()
    result = run_synthesis(synth.synthesize(a.text, voice, "english", settings))
    generate = time.perf_counter() - t0
    codes = np.asarray(result.codes, np.int64)
    tag = synth.precision + ("" if synth.decoder_precision == "fp32" else f"+{synth.decoder_precision}dec")
    np.save(a.out / f"ours_{tag}_codes.npy", codes)
    t0 = time.perf_counter()
    wav = synth.decode(codes)
    np.save(a.out / f"ours_{tag}_wav.npy", np.asarray(wav, np.float32))
    decode = time.perf_counter() - t0
    t0 = time.perf_counter()
    synth.decode(codes)  # steady state, as the official side's second call
    decode_warm = time.perf_counter() - t0
    n = codes.shape[0]
    tm = result.timings
    return {
        "side": f"ours {tag}", "frames": int(n), "threads": a.threads, "load_s": load,
        "voice_s": voice_s, "prefill_ms": tm.prefill * 1000,
        "talker_ms": tm.talker / n * 1000,
        "code_predictor_ms": tm.code_predictor / n * 1000,
        "per_frame_ms": generate / n * 1000,
        "overhead_ms": (generate - tm.prefill - tm.talker - tm.code_predictor) / n * 1000,
        "decoder_ms": decode / n * 1000,
        "decoder_warm_ms": decode_warm / n * 1000,
        "generate_s": generate, "decode_s": decode,
        "rtf": (generate + decode) / (n * FRAME_SECONDS),
        "peak_rss_mb": peak_rss_mb(),
        "audio_samples": int(len(wav)),
        "weight_bytes": synth.frame_weights().total,
    }


# ------------------------------------------------------------------------------------------------ driver

ROWS = [
    ("load_s", "load", "s"), ("voice_s", "voice prompt (x-vector)", "s"), ("prefill_ms", "prefill", "ms"),
    ("talker_ms", "talker step", "ms/frame"), ("code_predictor_ms", "code predictor (15)", "ms/frame"),
    ("overhead_ms", "other per frame", "ms/frame"), ("per_frame_ms", "per frame total", "ms/frame"),
    ("decoder_ms", "decoder (first call)", "ms/frame"), ("decoder_warm_ms", "decoder (second call)", "ms/frame"),
    ("rtf", "RTF (generate+decode)", ""), ("peak_rss_mb", "peak RSS", "MB"),
]


def report(results: list[dict], out: Path, bandwidth: float, readers: int) -> None:
    import numpy as np

    ok = [r for r in results if "error" not in r]
    head = f"{'':32}" + "".join(f"{r['side']:>19}" for r in ok)
    official = next((r for r in ok if r["side"] == "official"), None)
    ours = [r for r in ok if r["side"] != "official"]
    if official:
        head += "".join(f"{'x (' + r['side'][5:] + ')':>19}" for r in ours)
    print(head)
    for key, label, unit in ROWS:
        line = f"{label + (' [' + unit + ']' if unit else ''):32}"
        line += "".join(f"{r[key]:19.3f}" if key == "rtf" else f"{r[key]:19.1f}" for r in ok)
        if official:
            for r in ours:
                ratio = official[key] / r[key] if r[key] else float("nan")
                line += f"{ratio:19.2f}"
        print(line)
    frames = {r["frames"] for r in ok}
    print(f"frames: {sorted(frames)}; ratio column = official / ours (above 1: ours is faster or smaller)")
    if bandwidth > 0:
        floor_rows = {"weight GB read per frame": ("{:19.3f}", lambda r: r["weight_bytes"] / 1e9),
                      f"floor at {bandwidth / 1e9:.1f} GB/s [ms/frame]": (
                          "{:19.1f}", lambda r: r["weight_bytes"] / bandwidth * 1000),
                      "share of the bandwidth reached": (
                          "{:19.0%}", lambda r: r["weight_bytes"] / bandwidth * 1000 / r["per_frame_ms"])}
        for label, (fmt, value) in floor_rows.items():
            print(f"{label:32}" + "".join(fmt.format(value(r)) if r.get("weight_bytes") else f"{'-':>19}"
                                          for r in ok))
        print(f"read bandwidth: {bandwidth / 1e9:.1f} GB/s, the best of one reader and {readers} readers before and "
              "after the runs (numpy max(), as `qwen3tts bench`); the floor is the weight bytes read at that rate")
    for r in results:
        if "error" in r:
            print(f"{r.get('side', '?')}: not measured ({r['error']})")
    ref = out / "official_codes.npy"
    if ref.exists():
        a = np.load(ref)
        for f in sorted(out.glob("ours_*_codes.npy")):
            b = np.load(f)
            n = min(len(a), len(b))
            same = np.all(a[:n] == b[:n], axis=1)
            first = int(np.argmin(same)) if not same.all() else None
            verdict = ("IDENTICAL" if first is None and len(a) == len(b) else
                       f"differ from frame {first}" if first is not None else f"lengths differ {len(a)} vs {len(b)}")
            print(f"greedy codes, official vs {f.stem[5:-6]}: {verdict} ({int(same.sum())}/{n} frames equal, "
                  f"code-0 equal {int((a[:n, 0] == b[:n, 0]).sum())}/{n})")
            ours_wav, official_wav = f.with_name(f.name.replace("_codes", "_wav")), out / "official_wav.npy"
            if verdict == "IDENTICAL" and ours_wav.exists() and official_wav.exists():
                x, y = np.load(official_wav).astype(np.float64), np.load(ours_wav).astype(np.float64)
                if len(x) == len(y):  # same codes: the difference is the speech decoder's alone
                    err = float(np.sum((x - y) ** 2))
                    snr = 10 * np.log10(np.sum(x ** 2) / err) if err else float("inf")
                    print(f"  audio from the same codes, official vs {f.stem[5:-6]}: SNR {snr:.1f} dB, "
                          f"max |difference| {np.abs(x - y).max():.2e}")


def ensure_checkpoint(ckpt: Path) -> None:
    if (ckpt / "model.safetensors").is_file():
        return
    subprocess.run([OUR_PYTHON, str(ROOT / "benchmarks" / "make_checkpoint.py"), str(ckpt), "--preset", "0.6b"],
                   check=True, cwd=ROOT)


def ensure_bundle(ckpt: Path, precision: str) -> Path:
    bundle = ckpt.with_name(f"{ckpt.name}.bundle-{precision}")
    if not (bundle / "manifest.json").is_file():
        subprocess.run([OUR_PYTHON, "-m", "qwen3tts_cli", "convert", str(ckpt), str(bundle), "--precision", precision,
                        "--force"], check=True, cwd=ROOT)
    return bundle


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ckpt", type=Path, default=DEFAULT_CKPT)
    ap.add_argument("--frames", type=int, default=50)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--text", default=TEXT)
    ap.add_argument("--precision", nargs="+", default=["fp32", "q8"], choices=["fp32", "fp16", "bf16", "q8"])
    ap.add_argument("--decoder-precision", nargs="+", default=["fp32"], choices=["fp32", "bf16"],
                    help="our speech decoder's precisions: one run of ours per bundle precision and decoder precision")
    ap.add_argument("--attn", default="sdpa", help="official attention implementation (sdpa or eager)")
    ap.add_argument("--skip-ours", action="store_true")
    ap.add_argument("--skip-official", action="store_true")
    ap.add_argument("--worker", choices=["official", "ours"], help=argparse.SUPPRESS)
    ap.add_argument("--bundle", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--ref", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.frames < 50:
        print("vs_official: use at least 50 frames", file=sys.stderr)
    if a.worker:
        res = official_worker(a) if a.worker == "official" else our_worker(a)
        print(json.dumps(res))
        return 0

    ensure_checkpoint(a.ckpt)
    sys.path.insert(0, str(ROOT))
    from engine import measure_read_bandwidth

    before = measure_read_bandwidth(a.threads)  # before any model: their pages do not compete for memory
    load_before = " ".join(f"{x:.2f}" for x in os.getloadavg())
    out = a.ckpt.with_name(f"{a.ckpt.name}.vs_official")
    out.mkdir(parents=True, exist_ok=True)
    for f in [*out.glob("*_codes.npy"), *out.glob("*_wav.npy")]:
        f.unlink()
    ref = out / "reference_24k.wav"
    write_reference(ref)
    common = ["--ckpt", str(a.ckpt), "--frames", str(a.frames), "--threads", str(a.threads), "--text", a.text,
              "--ref", str(ref), "--out", str(out)]
    results = []
    if not a.skip_official:
        results.append(run_worker(REF_PYTHON, ["--worker", "official", "--attn", a.attn, *common]))
        results[-1].setdefault("side", "official")
    if not a.skip_ours:
        for prec in a.precision:
            try:
                bundle = ensure_bundle(a.ckpt, prec)
            except subprocess.CalledProcessError as e:
                results.append({"side": f"ours {prec}", "error": f"conversion failed ({e.returncode})"})
                continue
            for dec in a.decoder_precision:
                results.append(run_worker(OUR_PYTHON, ["--worker", "ours", "--bundle", str(bundle),
                                                       "--decoder-precision", dec, *common]))
                results[-1].setdefault("side", f"ours {prec}" + ("" if dec == "fp32" else f"+{dec}dec"))
    after = measure_read_bandwidth(a.threads)  # other programs may have held the memory bus the first time
    bandwidth = max(before.one_reader, before.all_readers, after.one_reader, after.all_readers)
    if not a.skip_official:
        for r in results:
            if r["side"] == "official" and "error" not in r:
                r["weight_bytes"] = official_frame_bytes(a.ckpt)
    print()
    cfg = json.loads((a.ckpt / "config.json").read_text())
    tc = cfg["talker_config"]
    print(f"checkpoint {a.ckpt} ({cfg.get('tts_model_size')}, talker {tc['num_hidden_layers']}x{tc['hidden_size']}), "
          f"{a.frames} frames, {a.threads} threads, greedy, text "
          f"{len(a.text)} chars, x-vector clone of a 4 s reference")
    report(results, out, bandwidth, a.threads)
    print(f"load average {load_before} before, {' '.join(f'{x:.2f}' for x in os.getloadavg())} after")
    (out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    return 0 if all("error" not in r for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
