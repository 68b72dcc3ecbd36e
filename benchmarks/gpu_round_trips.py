"""What keeping the KV caches in host memory costs a GPU run: bytes per step, and the time of one talker step's
attention with its caches going up to the GPU and back, at several cache lengths.

ncnn's Python API has no VkMat or VkCompute (ncnn 1.0.20261020: Extractor.input/extract take and give host Mats
only), so a net on the GPU uploads every input Mat and downloads every extracted blob at each call: the talker's
KV caches travel both ways at every step, and the speech decoder's streaming state (its attention caches and
convolution tails) at every push. This measures that traffic with the talker's attention layers alone (one SDPA
per layer, KV-cache mode, the shapes of the bundle given with --model or of the real 0.6B), no weights needed.

    python benchmarks/gpu_round_trips.py [--model BUNDLE] [--positions 100 500 2000] [--device gpu:0]

On lavapipe (a Vulkan driver that runs on the CPU) "device memory" is host memory, so the times measure the
copies ncnn makes, not a bus; on a discrete GPU add bytes / bus bandwidth (PCIe 4.0 x16: ~25 GB/s in practice).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import ncnn  # noqa: E402

import engine  # noqa: E402,F401  (sets the OpenMP environment before ncnn loads)

# The real 0.6B / 1.7B talker (tools/random_checkpoint/presets.py presets) and the 12 Hz speech decoder's state.
REAL_TALKER = {"layers": 28, "heads": 16, "kv_heads": 8, "head_dim": 128}
REAL_DECODER = {"layers": 8, "kv_heads": 16, "head_dim": 64, "past": 71, "conv_state_values": 135232}


def shapes(model: str | None) -> tuple[dict, dict]:
    if model is None:
        return REAL_TALKER, REAL_DECODER
    from engine.runtime.manifest_parts import CodecDecoderPart, TalkerPart

    parts = json.loads((Path(model) / "manifest.json").read_text(encoding="utf-8"))["parts"]  # no checksums read
    t = TalkerPart.from_manifest(parts["talker"]).talker
    d = CodecDecoderPart.from_manifest(parts["codec_decoder"])
    dec = {"layers": d.layers, "kv_heads": d.kv_heads, "head_dim": d.head_dim, "past": d.past,
           "conv_state_values": sum(s.channels * s.width for s in d.states)}
    return {"layers": t.layers, "heads": t.heads, "kv_heads": t.kv_heads, "head_dim": t.head_dim}, dec


def attention_net(spec: dict, gpu: int | None) -> ncnn.Net:
    """spec["layers"] SDPA layers in KV-cache mode, each with its own inputs and outputs."""
    lines = []
    for i in range(spec["layers"]):
        names = [f"{x}{i}" for x in ("q", "k", "v", "k_in_", "v_in_")]
        lines += [f"Input {n} 0 1 {n}" for n in names]
        scale = 1.0 / float(np.sqrt(spec["head_dim"]))
        lines.append(f"SDPA sdpa{i} 5 3 {' '.join(names)} att{i} k_out_{i} v_out_{i} 5=0 6={scale!r} 7=1")
    blobs = spec["layers"] * 8
    net = ncnn.Net()
    opt = net.opt
    opt.num_threads = 2
    opt.use_vulkan_compute = gpu is not None
    for name in ("use_fp16_storage", "use_fp16_packed", "use_fp16_arithmetic", "use_bf16_storage",
                 "use_int8_inference", "use_int8_storage", "use_int8_packed", "use_int8_arithmetic"):
        setattr(opt, name, False)
    if gpu is not None:
        net.set_vulkan_device(gpu)
    net.load_param_mem("\n".join(["7767517", f"{len(lines)} {blobs}", *lines]) + "\n")
    net.load_model(ncnn.DataReaderFromEmpty())
    return net


def step(net: ncnn.Net, spec: dict, caches: list[ncnn.Mat] | None, rows: int = 1) -> list[ncnn.Mat]:
    """One call of the attention layers: `rows` new positions over `caches` (k, v per layer, as extracted from an
    earlier call: SDPA's cache blobs are opaque, a cache made in numpy is not one); returns the grown caches."""
    hd = spec["head_dim"]
    rng = np.random.default_rng(0)

    def mat(heads: int) -> ncnn.Mat:
        arr = rng.standard_normal((heads, rows, hd), dtype=np.float32)  # alive until clone() copied it
        return ncnn.Mat(arr).clone()

    ex = net.create_extractor()
    for i in range(spec["layers"]):
        ex.input(f"q{i}", mat(spec["heads"]))
        ex.input(f"k{i}", mat(spec["kv_heads"]))
        ex.input(f"v{i}", mat(spec["kv_heads"]))
        if caches is not None:
            ex.input(f"k_in_{i}", caches[2 * i])
            ex.input(f"v_in_{i}", caches[2 * i + 1])
    out = []
    for i in range(spec["layers"]):
        ret, _ = ex.extract(f"att{i}")
        for name in (f"k_out_{i}", f"v_out_{i}"):
            ret2, cache = ex.extract(name, 1)
            if ret or ret2:
                raise SystemExit(f"ncnn failed in layer {i} ({ret}, {ret2})")
            out.append(cache)
    return out


def squeeze_net(squeeze: bool, gpu: int, width: int) -> ncnn.Net:
    """Linear -> Reshape -> Squeeze (ncnn has no Vulkan Squeeze: it runs on the CPU) or Noop -> Linear, weights 0."""
    mid = "Squeeze sq 1 1 r s 1=1" if squeeze else "Noop sq 1 1 r s"
    text = "\n".join(["7767517", "5 5", "Input in0 0 1 in0", f"InnerProduct a 1 1 in0 a 0={width} 1=0 2={width * width}",
                      "Reshape rs 1 1 a r 0=128 1=-1", mid, f"InnerProduct b 1 1 s out 0={width} 1=0 2={width * width}"])
    net = ncnn.Net()
    net.opt.use_vulkan_compute = True
    for name in ("use_fp16_storage", "use_fp16_packed", "use_fp16_arithmetic", "use_bf16_storage"):
        setattr(net.opt, name, False)
    net.set_vulkan_device(gpu)
    net.load_param_mem(text + "\n")
    net.load_model(ncnn.DataReaderFromEmpty())
    return net


def fallback_cost(gpu: int, reps: int, width: int = 2048) -> tuple[float, float]:
    """Median ms per call of squeeze_net with the Squeeze (on the CPU) and with a Noop (all on the GPU)."""
    nets = {True: squeeze_net(True, gpu, width), False: squeeze_net(False, gpu, width)}
    times: dict[bool, list[float]] = {True: [], False: []}
    x = np.zeros((1, width), np.float32)
    for _ in range(max(reps, 5)):
        for sq, net in nets.items():
            t = time.perf_counter()
            ex = net.create_extractor()
            ex.input("in0", ncnn.Mat(x).clone())
            ex.extract("out")
            times[sq].append(1000 * (time.perf_counter() - t))
    return float(np.median(times[True])), float(np.median(times[False]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", help="a bundle whose talker and decoder shapes to use (default: the real 0.6B)")
    ap.add_argument("--positions", type=int, nargs="+", default=[100, 500, 2000])
    ap.add_argument("--device", default="gpu:0", help="gpu:N to compare with the CPU (default gpu:0)")
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    talker, dec = shapes(args.model)
    gpu: int | None = int(args.device.split(":", 1)[1]) if ":" in args.device else 0
    seen = ncnn.get_gpu_count()
    name = ncnn.get_gpu_info(gpu).device_name() if gpu < seen else f"none (ncnn sees {seen} GPUs): bytes and CPU only"
    if gpu >= seen:
        gpu = None
    per_position = 2 * talker["layers"] * talker["kv_heads"] * talker["head_dim"] * 4
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}; "
          f"GPU {args.device}: {name}")
    print(f"# talker: {talker['layers']} layers x k,v of {talker['kv_heads']} x {talker['head_dim']} fp32 = "
          f"{per_position / 1024:.0f} KiB per cached position")
    print("positions | cache bytes up + down per step | CPU ms/step | GPU ms/step (median of "
          f"{args.reps}, attention only)")
    nets = {"cpu": attention_net(talker, None)}
    if gpu is not None:
        nets["gpu"] = attention_net(talker, gpu)
    for p in args.positions:
        times: dict[str, list[float]] = {k: [] for k in nets}
        for _ in range(args.reps):
            for which, net in nets.items():  # alternating
                caches = step(net, talker, None, rows=p)  # a prefill of p positions makes the caches
                t = time.perf_counter()
                step(net, talker, caches)
                times[which].append(1000 * (time.perf_counter() - t))
        moved = per_position * p + per_position * (p + 1)
        on_gpu = f"{np.median(times['gpu']):8.1f}" if "gpu" in times else "       -"
        print(f"{p:9d} | {moved / 2**20:9.1f} MiB | {np.median(times['cpu']):8.1f} | {on_gpu}")
    if gpu is not None:
        with_cpu, without = fallback_cost(gpu, args.reps)
        print(f"# one layer ncnn runs on the CPU between two GPU layers (Squeeze, 1 x 2048 values): {with_cpu:.2f} "
              f"ms per call with it, {without:.2f} ms with a Noop in its place")
    kv = 2 * dec["layers"] * dec["kv_heads"] * dec["past"] * dec["head_dim"] * 4
    conv = dec["conv_state_values"] * 4
    print(f"# speech decoder state per push (each way): attention caches {kv / 2**20:.2f} MiB + convolution tails "
          f"{conv / 2**20:.2f} MiB = {(kv + conv) / 2**20:.2f} MiB, whatever the length")
    return 0


if __name__ == "__main__":
    sys.exit(main())
