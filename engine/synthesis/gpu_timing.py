"""The self-tuner's GPU candidate: generation timed on each GPU ncnn sees, so that the device choice's "auto" uses
a GPU only where it measured faster than the CPU on this machine (engine/runtime/device.py faster_gpu).

A GPU is timed on the talker and the code predictor only (generation is what the device changes most), with a
warm-up frame (the first call builds the GPU pipelines) and then a few frames. Not timed: q8 models (ncnn's int8
Gemm shader does not compile in this ncnn, so they stay on the CPU) and software GPUs such as lavapipe (they run
on the CPU they would be compared with: 10-30x slower than the CPU path here). A GPU that fails to load or run is
not faster; its failure is kept as the candidate's note.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ..errors import EngineError
from ..nets.code_predictor import CodePredictor
from ..nets.talker import Talker
from ..runtime.bundle import Bundle
from ..runtime.device import DEFAULT_GPU_PRECISION, gpu_failures, resolve_device, scan_gpus
from ..runtime.tuning import CandidateFigure, median
from .placement import check_weights_fit

GPU_FRAMES = 2  # after the warm-up: the budget allows little more at full size, and one GPU is rarely close


def time_gpus(bundle: Bundle, frame_source: Callable[[Talker, CodePredictor], Any],
              timing: Callable[[str, Any, float], float], include_software: bool = False,
              cancel: Callable[[], bool] | None = None) -> tuple[dict[str, float], list[CandidateFigure]]:
    """(generation ms per frame by "gpu:N" for the GPUs timed, a figure per GPU seen). frame_source(talker,
    code_predictor) makes frames whose next() returns {"talker": s, "code predictor": s}."""
    if bundle.precision == "q8" or bundle.device.on_gpu:
        return {}, []
    measured: dict[str, float] = {}
    figures: list[CandidateFigure] = []
    for gpu in scan_gpus().gpus:
        name = f"gpu:{gpu.index}"
        label = f"{name} ({gpu.name})"
        if gpu.software and not include_software:
            figures.append(CandidateFigure("device", label, "not timed: a software GPU runs on the CPU", 0.0, 0, False))
            continue
        if cancel is not None and cancel():
            break
        try:
            device = resolve_device(name, DEFAULT_GPU_PRECISION)
            on_gpu = bundle.on(device)
            with gpu_failures(device):
                check_weights_fit(on_gpu)
                frames = frame_source(Talker(on_gpu, 1, adaptive_threads=False),
                                      CodePredictor(on_gpu, 1, adaptive_threads=False))
                frames.next()  # builds the pipelines
                times = []
                for _ in range(GPU_FRAMES):
                    t = time.perf_counter()
                    frames.next()
                    times.append(timing("gpu", name, time.perf_counter() - t))
        except EngineError as e:  # GpuError included: this GPU cannot run the model
            figures.append(CandidateFigure("device", label, f"failed: {str(e)[:80]}", 0.0, 0, False))
            continue
        measured[name] = round(median(times) * 1000, 2)
        figures.append(CandidateFigure("device", label, "generation, frame", measured[name], len(times), False))
    return measured, figures
