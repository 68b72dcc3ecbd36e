"""`qwen3tts bench`: the speed of each stage on this machine (ms per frame, real-time factor, time to first
audio, peak memory). Figures only; nothing is asserted."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from engine import DECODER_PRECISIONS, DEFAULT_DECODER_PRECISION, EngineError

from .common import DECODER_PRECISION_HELP, THREADS_HELP, UsageError, add_device_options


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
        floor_and_share,
        load_average,
        measure_read_bandwidth,
        openmp_settings,
        physical_cores,
        run_synthesis,
        scan_gpus,
        usable_cpus,
    )

    if args.frames < 2:
        raise UsageError("--frames must be at least 2")
    if args.under_load and getattr(sys, "frozen", False):
        raise UsageError("--under-load starts busy Python processes; run it from a source checkout.")
    def out(line: str) -> None:
        print(line, flush=True)  # each line as it happens, also through a pipe: the warm-up alone can take minutes

    out(f"cpu           {cpu_model()}, {physical_cores()} cores ({usable_cpus()} logical); {openmp_settings()}")
    load_before = load_average()
    out(f"load average  {load_before} (before)")
    bw = measure_read_bandwidth(usable_cpus())  # before the model: its pages do not compete for memory
    bandwidth = max(bw.one_reader, bw.all_readers)
    out(f"memory        read bandwidth {bw.one_reader / 1e9:.1f} GB/s from one reader, {bw.all_readers / 1e9:.1f} GB/s "
        f"from {bw.readers} (numpy max() over {bw.array_bytes >> 20} MiB, best of 3)")
    out(f"load          loading {args.model}...")
    t0 = time.perf_counter()
    synth = Synthesizer(args.model, threads=args.threads, decoder_precision=args.decoder_precision,
                        device=args.device, gpu_precision=args.gpu_precision)
    out(f"load          {time.perf_counter() - t0:.2f} s (talker, code predictor and decoder)")
    scan = scan_gpus()  # what ncnn's Vulkan backend sees, whatever --device chose
    out("gpus          " + ("; ".join(g.describe() for g in scan.gpus) or f"none: {scan.reason}"))
    out(f"device        {synth.device.describe()}" + (f" ({synth.device.note})" if synth.device.note else ""))
    if synth.tuning_note:
        out(f"tuning        {synth.tuning_note}")
    if args.tune or synth.tuning_needed:
        out("tuning        timing the candidate settings on this computer (once per model; up to ~15 s)...")
        record = synth.tune()
        for f in record.figures:
            figure = f"{f.median_ms:8.1f} ms" + (f"  ({f.samples} samples)" if f.samples else "")
            out(f"  {f.setting:23s} {f.value:49s} {f.part:26s} {figure if f.median_ms else ''}"
                + ("  chosen" if f.chosen else ""))
    if synth.tuning is not None:
        out(f"tuning        {synth.tuning.summary()} (measured {synth.tuning.measured}, load {synth.tuning.load_average})"
            + ("; the thread counts of --threads apply" if args.threads else ""))
    talker_threads, cp_threads = synth.thread_counts
    out(f"bundle        {args.model} ({synth.precision}; weight layers on {talker_threads} (talker) and {cp_threads} "
        f"(code predictor) threads; speech decoder {synth.decoder_precision} on {synth.decoder_threads}, "
        f"{'beside generation' if synth.overlap_decode else 'after each frame'}"
        + (f"; generation on {synth.streaming_threads} while audio streams" if synth.streaming_threads else "") + ")")
    weights = synth.frame_weights()
    out(f"weights       {weights.total / 1e9:.3f} GB read per frame: talker {weights.talker / 1e9:.3f} GB, code "
        f"predictor {weights.code_predictor_calls} calls of {weights.code_predictor_layers / 1e9:.3f} GB and its "
        f"{weights.code_predictor_heads / 1e9:.3f} GB of heads = {weights.code_predictor / 1e9:.3f} GB")
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
    again = measure_read_bandwidth(usable_cpus())  # other programs may have held the memory bus the first time
    bandwidth = max(bandwidth, again.one_reader, again.all_readers)
    out(f"memory        read bandwidth again {again.one_reader / 1e9:.1f} / {again.all_readers / 1e9:.1f} GB/s; the "
        f"floor below uses the best seen, {bandwidth / 1e9:.1f} GB/s")
    shares = {}
    for label, size, seconds in (("talker", weights.talker, tm.talker / n),
                                 ("code predictor", weights.code_predictor, tm.code_predictor / n),
                                 ("generation", weights.total, quiet)):
        floor, shares[label] = floor_and_share(size, seconds, bandwidth)
        out(f"floor         {label:15s} {floor * 1000:6.1f} ms/frame at {bandwidth / 1e9:.1f} GB/s; measured "
            f"{seconds * 1000:6.1f}: {shares[label]:.0%} of the read bandwidth")
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
    load_after = load_average()
    out(f"load average  {load_after} (after)")
    rtf = f"RTF {tm.rtf:.2f}" if full is not None else "no decoder"
    out(f"summary       {cpu_model()}, {physical_cores()} cores, load {load_before.split()[0]}-{load_after.split()[0]} | "
        f"{Path(args.model).name} {synth.precision}, {weights.total / 1e9:.2f} GB/frame | {_device_label(synth)} | threads "
        f"{talker_threads}/{cp_threads}/{synth.decoder_threads}{' overlap' if synth.overlap_decode else ''} | "
        f"generation {quiet * 1000:.1f} ms/frame, {shares['generation']:.0%} of {bandwidth / 1e9:.1f} GB/s | {rtf} | "
        f"{_source_version()}")
    return 0


def _source_version() -> str:
    """The commit of a source checkout, else the installed version."""
    import subprocess

    root = Path(__file__).resolve().parents[1]
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = ""
    if commit:
        return f"commit {commit}"
    try:
        from importlib.metadata import version

        return f"version {version('qwen3tts-studio')}"
    except Exception:  # not installed: a frozen app or a copied folder
        return "version unknown"


def _device_label(synth) -> str:
    """The device for the summary line: "CPU", or the GPU's name, driver and precision."""
    gpu = synth.device.gpu
    return "CPU" if gpu is None else f"GPU {gpu.name} ({gpu.driver}, {synth.device.precision})"


def add_parser(sub) -> None:
    b = sub.add_parser("bench", help="measure speed: ms per frame, real-time factor, time to first audio")
    b.add_argument("--model", type=Path, required=True)
    b.add_argument("--frames", type=int, default=50)
    b.add_argument("--threads", type=int, default=None, help=THREADS_HELP)
    add_device_options(b)
    b.add_argument("--tune", action="store_true",
                   help="measure the settings for this computer again (thread counts, decoding beside generation, "
                        "decoder precision under auto) and print every candidate's figures")
    b.add_argument("--decoder-precision", choices=DECODER_PRECISIONS, default=DEFAULT_DECODER_PRECISION,
                   help=DECODER_PRECISION_HELP)
    b.add_argument("--under-load", action="store_true",
                   help="also time generation with one busy process per CPU competing (started and stopped here)")
    b.add_argument("--text", default="The quick brown fox jumps over the lazy dog, and then it runs far away.")
    b.add_argument("--language", default="english")
    b.set_defaults(func=cmd_bench)
