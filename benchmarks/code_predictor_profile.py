"""Where the code predictor's time goes: per layer type, per call, per frame, at each int8 thread count.

    python benchmarks/code_predictor_profile.py --model Q8_BUNDLE [--threads 1,2] [--rounds 30]

White-box (engine internals): loads the code predictor's q8 graph (attention inside, rows stacked as heads) once
per thread count and, at position 1 of a frame (one key in the cache, as most of a frame's calls):
- times every layer on its own: one extractor, each layer's output extracted in graph order (ncnn computes only
  what an extract needs, so each extract runs exactly one more layer), median over rounds; the time of an extract
  of a blob already computed is measured and subtracted;
- sums them per layer type, and for the weight layers (int8 Gemm) prints bytes and GB/s;
- times the whole call as the engine makes it (one extractor, the head's logits and the ten cache blobs) and a
  whole frame (predict(): 15 calls, positions 0 and 1 in one; sampling and the embedding rows), so per-call and per-frame overhead show,
  alternating with the same frame made with positions 0 and 1 in calls of their own (16 calls, the codes compared).
Prints the load average before and after; nothing is asserted.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.nets.code_predictor import CodePredictor  # noqa: E402
from engine.runtime.bandwidth import layer_weight_bytes  # noqa: E402
from engine.runtime.bundle import Bundle  # noqa: E402
from engine.runtime.cpu import cpu_model, load_average  # noqa: E402
from engine.runtime.manifest_parts import TalkerPart  # noqa: E402
from engine.runtime.ncnn_graph import parse_param  # noqa: E402
from engine.runtime.ncnn_mats import InputRow  # noqa: E402
from engine.runtime.stacked_graph import stacked_attention_param_text  # noqa: E402


def load(bundle: Bundle, threads: int) -> tuple[CodePredictor, str]:
    part = bundle.record(TalkerPart)
    text = stacked_attention_param_text(bundle.file(f"{part.cp_graph}.param").read_text(), part.code_predictor.heads,
                                        part.code_predictor.head_dim)
    cp = CodePredictor(bundle, threads, adaptive_threads=False, int8_threads=threads)
    return cp, text


def profile(cp: CodePredictor, text: str, rounds: int) -> None:
    rng = np.random.default_rng(0)
    hidden = rng.standard_normal((1, cp.hidden_size)).astype(np.float32)
    _, cache = cp.net.run(hidden, *cp.position_rope[0], None, None, ())
    x = np.asarray(cp.codec_embedding[5], np.float32)
    layers = [lay for lay in parse_param(text) if lay.type != "Input"]
    cache_inputs = [f"{kv}_in_{i}" for i in range(len(cache) // 2) for kv in ("k", "v")]  # the graph's cache blobs
    net = cp.net.net
    per_layer: dict[str, list[float]] = defaultdict(list)
    overhead: list[float] = []
    calls: list[float] = []
    for _ in range(rounds):
        ex = net.create_extractor()
        ex.input("in0", InputRow(x.shape).set(x))
        ex.input("cos", cp.position_rope[1][0])
        ex.input("sin", cp.position_rope[1][1])
        for name, mat in zip(cache_inputs, cache, strict=True):
            ex.input(name, mat)
        for lay in layers:
            t = time.perf_counter()
            ex.extract(lay.outputs[0], 1)
            per_layer[lay.name].append(time.perf_counter() - t)
        t = time.perf_counter()
        ex.extract(layers[-1].outputs[0], 1)
        overhead.append(time.perf_counter() - t)
        del ex
        t = time.perf_counter()
        cp.net.run(x, *cp.position_rope[1], None, cache, ("logits_0",))
        calls.append(time.perf_counter() - t)
    extract_cost = statistics.median(overhead)
    by_type: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    gemm_bytes = 0
    gemm_layer_bytes = {}
    for lay in layers:
        if lay.name.startswith("logits_") and lay.name != "logits_0_gemm":
            continue  # one head per call
        ms = max(0.0, statistics.median(per_layer[lay.name]) - extract_cost) * 1000
        kind = "Gemm (int8 weights)" if lay.type == "Gemm" else lay.type
        by_type[kind] += ms
        counts[kind] += 1
        if lay.type == "Gemm":
            b = layer_weight_bytes(lay, 4)
            gemm_bytes += b
            gemm_layer_bytes[lay.name] = (b, ms)
    total = sum(by_type.values())  # (a tiny model's layers can all time at zero once the extract cost is off)
    print(f"  one call at position 1, layer by layer (median of {rounds}; extract cost {extract_cost * 1e6:.1f} us "
          f"subtracted per layer): {total:.2f} ms in layers")
    for kind, ms in sorted(by_type.items(), key=lambda kv: -kv[1]):
        print(f"    {kind:24s} {counts[kind]:3d} layers {ms:7.3f} ms  {ms / max(total, 1e-9) * 100:5.1f} %")
    gemm_ms = by_type["Gemm (int8 weights)"]
    print(f"    int8 Gemms read {gemm_bytes / 1e6:.1f} MB in {gemm_ms:.2f} ms: {gemm_bytes / max(gemm_ms, 1e-6) / 1e6:.1f} GB/s")
    sizes = defaultdict(list)
    for b, ms in gemm_layer_bytes.values():
        sizes[b].append(ms)
    for b, ms_list in sorted(sizes.items()):
        med = statistics.median(ms_list)
        print(f"    Gemm of {b / 1e6:5.2f} MB x{len(ms_list):2d}: {med:6.3f} ms each, {b / max(med, 1e-6) / 1e6:5.1f} GB/s")
    call, fastest = statistics.median(calls) * 1000, min(calls) * 1000
    lowest = sum(max(0.0, min(v) - extract_cost) for k, v in per_layer.items()
                 if not k.startswith("logits_") or k == "logits_0_gemm") * 1000
    print(f"  whole call as the engine makes it (extractor, inputs, logits, ten cache blobs): median {call:.2f} ms "
          f"({call - total:+.2f} ms beside the layers' medians), fastest {fastest:.2f} ms ({fastest - lowest:+.2f} ms "
          f"beside the layers' fastest, {lowest:.2f} ms)")
    frames: list[float] = []
    apart: list[float] = []
    choose = lambda logits, g: int(np.argmax(logits))  # noqa: E731
    for _ in range(max(5, rounds // 3)):  # alternating: the engine's frame, then positions 0 and 1 in calls of their own
        t = time.perf_counter()
        codes = cp.predict(hidden[0], 5, choose)
        frames.append(time.perf_counter() - t)
        t = time.perf_counter()
        same = np.array_equal(codes, separate_start(cp, hidden, 5))
        apart.append(time.perf_counter() - t)
    frame = statistics.median(frames) * 1000
    print(f"  whole frame (predict: 15 calls, positions 0 and 1 in one, greedy choice, embedding rows): median "
          f"{frame:.1f} ms = 15 x {frame / 15:.2f} ms per call; fastest {min(frames) * 1000:.1f} ms")
    print(f"  the same frame with positions 0 and 1 in calls of their own (16 calls, alternating with the above): "
          f"median {statistics.median(apart) * 1000:.1f} ms; codes {'identical' if same else 'DIFFERENT'}")


def separate_start(cp: CodePredictor, hidden: np.ndarray, c0: int) -> np.ndarray:
    """A greedy frame as the engine made it before positions 0 and 1 shared a call: 16 calls of the stacked graph."""
    rope = cp.position_rope
    _, cache = cp.net.run(hidden, *rope[0], None, None, ())
    x = cp.codec_embedding[[c0]]
    codes = []
    for g in range(1, cp.groups):
        (logits,), cache = cp.net.run(x, *rope[g], None, cache, (f"logits_{g - 1}",))
        codes.append(int(np.argmax(logits)))
        if g < cp.groups - 1:
            x = cp.code_embeddings[g - 1][[codes[-1]]]
    return np.array(codes)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, required=True, help="a q8 bundle")
    ap.add_argument("--threads", default="1,2", help="int8 Gemm thread counts to profile, comma-separated")
    ap.add_argument("--rounds", type=int, default=30)
    a = ap.parse_args()
    bundle = Bundle.open(a.model)
    if bundle.precision != "q8":
        print("code_predictor_profile: needs a q8 bundle", file=sys.stderr)
        return 2
    print(f"{cpu_model()}; {a.model}; load average {load_average()}")
    loaded = {int(n): load(bundle, int(n)) for n in a.threads.split(",")}
    for threads, (cp, text) in loaded.items():
        print(f"int8 Gemm threads {threads}:")
        profile(cp, text, a.rounds)
    print(f"load average {load_average()} (after)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
