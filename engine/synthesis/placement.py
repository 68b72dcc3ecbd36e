"""Where a synthesizer's networks run, and what a GPU failure does: never a crash, one line that says why.

- Loading: a GPU that cannot hold the weights or build a network's pipeline raises GpuError for "gpu"/"gpu:N";
  a device chosen by "auto" falls back to the CPU, its note saying why (`load_placed`).
- Running: ncnn reports a lost device or exhausted device memory as a failed extract, which the nets turn into an
  EngineError about the model graph; on the GPU that is a GpuError naming the GPU (`gpu_failures`). A synthesizer
  on an "auto" GPU then moves to the CPU for its next runs (Synthesizer._on_device).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from ..runtime.bundle import Bundle
from ..runtime.device import CPU, Device, GpuError, check_fits, gpu_failures
from ..runtime.manifest_parts import CodecDecoderPart, TalkerPart

T = TypeVar("T")
SYNTHESIS_NETS = ("talker", "code_predictor", "codec_decoder")
__all__ = ["check_weights_fit", "gpu_failures", "load_placed", "on_cpu_after", "weight_bytes"]


def load_placed(device: Device, load: Callable[[Device], T]) -> tuple[T, Device]:
    """load(device), or, when that fails on a GPU chosen by "auto", load(CPU) with a note saying why."""
    try:
        return load(device), device
    except GpuError as e:
        if not (device.on_gpu and device.fallback_to_cpu):
            raise
        return load(CPU), on_cpu_after(e)


def on_cpu_after(error: GpuError) -> Device:
    """The CPU, noting the GPU failure that sent a run there."""
    return Device(note=f"Running on the CPU: {str(error).rstrip('.')}.", fallback_to_cpu=True)


def weight_bytes(bundle: Bundle, graphs: tuple[str, ...]) -> int:
    """Bytes the graphs' weights take on a GPU: their .bin files, doubled where fp16-stored weights are widened to
    fp32 (fp16 bundles, and fp32 bundles of bf16 checkpoints, on an fp32 GPU)."""
    total = sum(bundle.listed_size(f"{g}.bin") or 0 for g in set(graphs))
    stored_fp16 = bundle.precision == "fp16" or bundle.record(TalkerPart).fp16_weight_layers > 0
    return total * 2 if stored_fp16 and bundle.device.precision == "fp32" else total


def check_weights_fit(bundle: Bundle) -> None:
    """GpuError before loading when the synthesis networks' weights alone exceed the GPU's memory budget."""
    if bundle.device.on_gpu:
        talker = bundle.record(TalkerPart)
        graphs = (talker.talker_graph, talker.cp_graph, bundle.record(CodecDecoderPart).graph)
        check_fits(bundle.device, weight_bytes(bundle, graphs))
