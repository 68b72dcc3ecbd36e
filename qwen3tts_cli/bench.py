"""`qwen3tts bench`: the speed of each stage on this machine (ms per frame, real-time factor, time to first
audio, peak memory). Figures only; nothing is asserted."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from engine import DECODER_PRECISIONS, DEFAULT_DECODER_PRECISION, EngineError, physical_cores

from .common import DECODER_PRECISION_HELP, THREADS_HELP, UsageError


def cmd_bench(args: argparse.Namespace) -> int:
    """Speed of each stage on this machine. Figures only; nothing is asserted."""
    import resource

    import numpy as np

    from engine import (
        FRAME_RATE,
        SAMPLE_RATE,
        GenerationSettings,
        Synthesizer,
        Voice,
        busy_processes,
        cpu_model,
        load_average,
        openmp_settings,
        physical_cores,
        run_synthesis,
        usable_cpus,
    )

    if args.frames < 2:
        raise UsageError("--frames must be at least 2")
    if args.under_load and getattr(sys, "frozen", False):
        raise UsageError("--under-load starts busy Python processes; run it from a source checkout.")
    def out(line: str) -> None:
        print(line, flush=True)  # each line as it happens, also through a pipe: the warm-up alone can take minutes

    out(f"cpu           {cpu_model()}, {physical_cores()} cores ({usable_cpus()} logical); {openmp_settings()}")
    out(f"load average  {load_average()} (before)")
    out(f"load          loading {args.model}...")
    t0 = time.perf_counter()
    synth = Synthesizer(args.model, threads=args.threads, decoder_precision=args.decoder_precision)
    talker_threads, cp_threads = synth.thread_counts
    out(f"bundle        {args.model} ({synth.precision}, {args.threads} threads; weight layers on {talker_threads} "
        f"(talker) and {cp_threads} (code predictor); speech decoder {synth.decoder_precision})")
    out(f"load          {time.perf_counter() - t0:.2f} s (talker, code predictor and decoder)")
    # a fixed pseudo-random x-vector: the voice front end is timed on its own below
    rng = np.random.default_rng(0)
    voice = Voice(xvector=rng.standard_normal(synth.hidden_size).astype(np.float32), model_id=synth.model_id)

    def run(frames: int, **options):
        # EOS ignored so the frame count is exact
        settings = GenerationSettings(seed=0, max_frames=frames, ignore_eos=True, **options)
        return run_synthesis(synth.synthesize(args.text, voice, args.language, settings), on_frame=on_frame)

    # warm-up: the first calls page the weights in and let ncnn pick its kernels
    frame_times: list[float] = []
    t = time.perf_counter()
    out("warm-up       3 frames first (the first calls load the weights into memory and let ncnn pick its "
        "kernels)...")

    def on_frame(ev) -> None:
        frame_times.append(ev.frame_seconds)
        if warming_up:
            out(f"warm-up       frame {ev.index + 1} of 3 done after {time.perf_counter() - t:.1f} s")

    warming_up = True
    run(3, codes_only=True)
    warming_up = False
    out(f"warm-up       {time.perf_counter() - t:.2f} s (3 frames)")

    # 1. generation only
    frame_times.clear()
    result = run(args.frames, codes_only=True)
    codes, tm = result.codes, result.timings
    n = codes.shape[0]
    steady = frame_times[2:] or frame_times
    out(f"frames        {n} ({n / FRAME_RATE:.2f} s of audio)")
    out(f"prefill       {tm.prefill * 1000:.1f} ms")
    out(f"talker step   {tm.talker / n * 1000:.1f} ms/frame")
    out(f"code pred.    {tm.code_predictor / n * 1000:.1f} ms/frame (15 steps)")
    quiet = float(np.median(steady))
    out(f"generation    {quiet * 1000:.1f} ms/frame median, {tm.total / n * 1000:.1f} ms/frame mean "
        f"(RTF {tm.total / (n / FRAME_RATE):.3f} without audio)")
    if args.under_load:  # the same run with one busy process per logical CPU competing for the cores
        busy = usable_cpus()
        with busy_processes(busy):
            frame_times.clear()
            run(args.frames, codes_only=True)
        loaded = float(np.median(frame_times[2:] or frame_times))
        out(f"under load    {loaded * 1000:.1f} ms/frame median with {busy} busy processes, {loaded / quiet:.2f}x the "
            f"figure above; threads now talker {synth.thread_counts[0]}, "
            f"code predictor {synth.thread_counts[1]}")

    # 2. decoder alone (whole utterance)
    try:
        t = time.perf_counter()
        synth.decode(codes)
        full = time.perf_counter() - t
        out(f"decoder       {full / n * 1000:.1f} ms/frame whole")
    except EngineError as e:
        out(f"decoder       failed: {e}")
        full = None

    # 3. end to end with streaming audio: real-time factor, time to first audio, streaming decode per frame
    if full is not None:
        result = run(args.frames, stream_audio=True)
        tm = result.timings
        out(f"streaming     {tm.decode / n * 1000:.1f} ms/frame decode (frame by frame)")
        out(f"end to end    RTF {tm.rtf:.3f} ({tm.total:.2f} s for {tm.audio_seconds:.2f} s of audio, "
            "streaming decode)")
        out(f"first audio   {tm.first_audio:.3f} s after the call")

    # 4. voice front end on a 3 s synthetic reference: x-vector alone, then with the reference codes as well
    ref = (np.sin(np.arange(3 * SAMPLE_RATE) * 0.05) * 0.3).astype(np.float32)
    ref += (rng.standard_normal(ref.shape) * 0.05).astype(np.float32)
    for label, ref_text in (("x-vector", None), ("+ ref codes", "A short reference transcript.")):
        try:
            t = time.perf_counter()
            synth.create_voice((ref, SAMPLE_RATE), ref_text=ref_text)
            out(f"{label:13s} {(time.perf_counter() - t) * 1000:.1f} ms (3 s reference)")
        except EngineError as e:
            out(f"{label:13s} not timed: {e}")
    out(f"peak RSS      {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
    out(f"load average  {load_average()} (after)")
    return 0


def add_parser(sub) -> None:
    b = sub.add_parser("bench", help="measure speed: ms per frame, real-time factor, time to first audio")
    b.add_argument("--model", type=Path, required=True)
    b.add_argument("--frames", type=int, default=50)
    b.add_argument("--threads", type=int, default=physical_cores(), help=THREADS_HELP)
    b.add_argument("--decoder-precision", choices=DECODER_PRECISIONS, default=DEFAULT_DECODER_PRECISION,
                   help=DECODER_PRECISION_HELP)
    b.add_argument("--under-load", action="store_true",
                   help="also time generation with one busy process per CPU competing (started and stopped here)")
    b.add_argument("--text", default="The quick brown fox jumps over the lazy dog, and then it runs far away.")
    b.add_argument("--language", default="english")
    b.set_defaults(func=cmd_bench)
