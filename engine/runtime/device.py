"""Where the networks run: the CPU, or a GPU through ncnn's Vulkan backend. Knows no model; imports no Qt.

    scan_gpus() -> GpuScan          the GPUs ncnn sees (name, kind, driver, memory), or why it sees none
    resolve_device(requested, precision, measured) -> Device
        requested: "cpu" | "gpu" (ncnn's default GPU: discrete first, then integrated) | "gpu:N" | "auto"
        "auto" runs on a GPU only where the self-tuning measured it faster than the CPU on this machine
        (`measured`: ms per frame by device name, faster_gpu() reads it); without a measurement, the CPU.
        "gpu" / "gpu:N" with no usable GPU raise GpuError in one line; "auto" falls back with a note.
    configure_gpu_net(net, device)  the ncnn options of a net on the GPU, every one set explicitly
    ncnn_messages()                 what ncnn prints while loading a net, kept (its only failure report)
    gpu_load(device, what)          around a net's loading: a failure ncnn reports on the GPU is a GpuError
    check_fits(device, bytes)       weights larger than the GPU's memory budget: a GpuError before loading
    gpu_failures(device)            around running: a failed extract on the GPU (lost, out of memory) is a GpuError

Why the care: ncnn reports a driver that cannot build a pipeline only by printing (its load_model still returns
0 and the net then computes garbage: measured with the int8 Gemm shader of ncnn 1.0.20261020 on lavapipe, whose
GLSL does not compile), and it creates its Vulkan instance once per process, at first use, reading the
VK_ICD_FILENAMES of that moment. So the scan is made once and kept, and GPU nets are loaded with ncnn's messages
captured and read.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import AudioError, Cancelled, CodesError, EngineError, TextError, VoiceError

DEVICE_CHOICES = ("auto", "cpu", "gpu")  # and "gpu:N"
DEFAULT_DEVICE = "auto"
GPU_PRECISIONS = ("fp32", "fp16")  # fp32: exact (storage and arithmetic); fp16: storage, packing and arithmetic
DEFAULT_GPU_PRECISION = "fp32"
_KINDS = {0: "discrete", 1: "integrated", 2: "virtual", 3: "software (runs on the CPU)"}
_NVIDIA, _INTEL = 0x10DE, 0x8086
# What ncnn prints when a pipeline, a shader or a device allocation fails while a net loads (src/gpu.cpp,
# pipeline.cpp, layer/vulkan/*.cpp); "not match" is its shader-reflection check after a failed compile.
_FAILURE = re.compile(r"failed|not supported|not match|out of (device |host )?memory", re.IGNORECASE)


class GpuError(EngineError):
    """The GPU cannot be used: no Vulkan loader or device, a pipeline it cannot build, lost, out of memory."""


_NOT_THE_DEVICE = (AudioError, Cancelled, CodesError, TextError, VoiceError, GpuError)  # bad input, or said already


@dataclass(frozen=True)
class GpuDevice:
    """One Vulkan device as ncnn sees it."""

    index: int
    name: str
    kind: str  # "discrete", "integrated", "virtual", "software (runs on the CPU)" or "other"
    vendor_id: int
    driver_version: int  # as the driver reports it (vendor-specific encoding: see `driver`)
    api_version: int
    memory_mb: int | None  # the device memory budget ncnn computes (heap budget), None when unknown

    @property
    def driver(self) -> str:
        """The driver version in its vendor's usual notation, and the Vulkan version."""
        v = self.driver_version
        if self.vendor_id == _NVIDIA:
            drv = f"{v >> 22}.{(v >> 14) & 0xFF}"
        elif self.vendor_id == _INTEL and sys.platform == "win32":
            drv = f"{v >> 14}.{v & 0x3FFF}"
        else:
            drv = f"{v >> 22}.{(v >> 12) & 0x3FF}.{v & 0xFFF}"
        a = self.api_version
        return f"driver {drv}, Vulkan {a >> 22}.{(a >> 12) & 0x3FF}.{a & 0xFFF}"

    @property
    def software(self) -> bool:
        """A Vulkan driver that runs on the CPU (lavapipe, SwiftShader): correct, never faster than the CPU."""
        return self.kind.startswith("software")

    def describe(self) -> str:
        memory = f", {self.memory_mb} MB" if self.memory_mb else ""
        return f"GPU {self.index}: {self.name}; {self.kind}, {self.driver}{memory}"


@dataclass(frozen=True)
class GpuScan:
    """The GPUs ncnn sees; `reason` says why there are none."""

    gpus: tuple[GpuDevice, ...]
    default_index: int | None = None  # ncnn's pick for "gpu": a discrete GPU first, then an integrated one
    reason: str = ""


@dataclass(frozen=True)
class Device:
    """Where a synthesizer's networks run: gpu None is the CPU. `note` says why auto chose it, or fell back."""

    gpu: GpuDevice | None = None
    precision: str = DEFAULT_GPU_PRECISION  # GPU storage and arithmetic; the CPU follows the bundle
    note: str = field(default="", compare=False)
    fallback_to_cpu: bool = field(default=False, compare=False)  # chosen by "auto": a GPU failure moves to the CPU
    noteworthy: bool = field(default=True, compare=False)  # False: the note says only what "auto" does by default

    @property
    def on_gpu(self) -> bool:
        return self.gpu is not None

    @property
    def name(self) -> str:
        """"cpu" or "gpu:N": what --device takes to choose it again."""
        return "cpu" if self.gpu is None else f"gpu:{self.gpu.index}"

    def describe(self) -> str:
        if self.gpu is None:
            return "CPU"
        return f"{self.gpu.describe()}, {self.precision}"


CPU = Device()

_scan: list[GpuScan] = []  # one per process: ncnn's Vulkan instance is created once, at first use


def scan_gpus() -> GpuScan:
    """The GPUs ncnn sees, scanned once per process (ncnn prints nothing to the terminal meanwhile)."""
    if not _scan:
        _scan.append(_scan_now())
    return _scan[0]


def list_gpus() -> list[GpuDevice]:
    return list(scan_gpus().gpus)


def _scan_now() -> GpuScan:
    try:
        import ncnn
    except ImportError as e:  # the engine needs ncnn anyway; here it only means: no GPU
        return GpuScan((), None, f"ncnn cannot be loaded ({e})")
    if not hasattr(ncnn, "get_gpu_count"):
        return GpuScan((), None, "this ncnn build has no Vulkan support")
    with ncnn_messages() as log:
        count = int(ncnn.get_gpu_count())
        gpus = tuple(g for g in (_gpu_info(ncnn, i) for i in range(count)) if g is not None)
        default = int(ncnn.get_default_gpu_index()) if gpus else -1
    if not gpus:
        return GpuScan((), None, _no_gpu_reason(log.lines))
    return GpuScan(gpus, default if 0 <= default < len(gpus) else 0)


def _gpu_info(ncnn, index: int) -> GpuDevice | None:
    info = ncnn.get_gpu_info(index)
    if info is None:
        return None
    try:
        memory = int(ncnn.get_gpu_device(index).get_heap_budget()) or None
    except Exception:  # a device that cannot be opened still shows, without its memory  # noqa: BLE001
        memory = None
    return GpuDevice(index=index, name=str(info.device_name()), kind=_KINDS.get(int(info.type()), "other"),
                     vendor_id=int(info.vendor_id()), driver_version=int(info.driver_version()),
                     api_version=int(info.api_version()), memory_mb=memory)


def _no_gpu_reason(lines: list[str]) -> str:
    text = " ".join(lines)
    if "dlopen failed" in text or "load vulkan driver failed" in text or "LoadLibrary" in text:
        return (f"no Vulkan loader ({_LOADER}) was found: install the Vulkan runtime and your GPU's driver "
                "(on Debian and Ubuntu: libvulkan1 and mesa-vulkan-drivers)")
    damaged = _damaged_driver_file()
    if damaged:
        return damaged
    failed = re.search(r"vkCreateInstance failed (-?\d+)", text)
    if failed and failed.group(1) == "-9":  # VK_ERROR_INCOMPATIBLE_DRIVER: the loader found no usable driver
        return "the Vulkan loader found no usable GPU driver (vkCreateInstance error -9)"
    if failed:
        return f"the Vulkan driver failed to start (vkCreateInstance error {failed.group(1)})"
    return "no Vulkan device was found (no GPU driver with Vulkan support is installed)"


# where the Vulkan loader looks for driver descriptions (ICD files) on Linux, unless VK_DRIVER_FILES or
# VK_ICD_FILENAMES names them
_ICD_FOLDERS = ("/etc/vulkan/icd.d", "/usr/local/share/vulkan/icd.d", "/usr/share/vulkan/icd.d")
MAX_ICD_BYTES = 1 << 20


def _damaged_driver_file() -> str | None:
    """Why the Vulkan loader could not use a driver description that is there (a file that is not JSON, or that
    names a driver library that does not exist), or None: said instead of "no GPU driver is installed"."""
    named = os.environ.get("VK_DRIVER_FILES") or os.environ.get("VK_ICD_FILENAMES")
    if named:
        files = [Path(p) for p in named.split(os.pathsep) if p]
    elif sys.platform.startswith("linux"):
        files = sorted(f for folder in _ICD_FOLDERS for f in Path(folder).glob("*.json"))
    else:
        return None
    for f in files:
        try:
            if not f.is_file():
                continue  # absent: the loader's own error says it
            with open(f, "rb") as fh:
                data = json.loads(fh.read(MAX_ICD_BYTES).decode("utf-8"))
            library = data["ICD"]["library_path"]
        except OSError as e:
            return f"the Vulkan driver description {f} cannot be read ({e.strerror or e}); reinstall the GPU driver"
        except (ValueError, UnicodeDecodeError, KeyError, TypeError, RecursionError):
            return f"the Vulkan driver description {f} is damaged (not a driver description); reinstall the GPU driver"
        if not isinstance(library, str) or os.path.isabs(library) and not os.path.exists(library):
            return (f"the Vulkan driver description {f} names the driver {str(library)[:120]}, which is not there; "
                    "reinstall the GPU driver")
    return None


_LOADER = {"win32": "vulkan-1.dll", "darwin": "libvulkan.1.dylib / MoltenVK"}.get(sys.platform, "libvulkan.so.1")


def parse_device(requested: str) -> tuple[str, int | None]:
    """("cpu" | "auto" | "gpu", index or None) for "cpu", "auto", "gpu", "gpu:N"; GpuError in one line."""
    text = str(requested).strip().lower()
    if text in DEVICE_CHOICES:
        return text, None
    m = re.fullmatch(r"gpu:(\d{1,3})", text)
    if m:
        return "gpu", int(m.group(1))
    raise GpuError(f"Unknown device {requested!r}; choose cpu, gpu, gpu:N (N from the list of GPUs) or auto.")


def check_gpu_precision(precision: str) -> str:
    if precision not in GPU_PRECISIONS:
        raise GpuError(f"Unknown GPU precision {precision!r}; choose {' or '.join(GPU_PRECISIONS)}.")
    return precision


def faster_gpu(measured: Mapping[str, float] | None) -> str | None:
    """The tuner's hook: given ms per frame by device name ("cpu", "gpu:0", ...) measured on this machine, the
    fastest GPU if it beat the CPU, else None. Without a CPU figure nothing is known to be faster."""
    if not measured or not isinstance(measured.get("cpu"), (int, float)):
        return None
    gpus = {k: float(v) for k, v in measured.items()
            if isinstance(k, str) and k.startswith("gpu:") and isinstance(v, (int, float)) and v > 0}
    if not gpus:
        return None
    best = min(gpus, key=gpus.__getitem__)
    return best if gpus[best] < float(measured["cpu"]) else None


def _timed(measured: Mapping[str, float] | None) -> bool:
    """Whether `measured` holds a CPU figure and at least one GPU figure."""
    def number(v) -> bool:
        return isinstance(v, (int, float)) and v > 0
    if not measured:
        return False
    return number(measured.get("cpu")) and any(
        isinstance(k, str) and k.startswith("gpu:") and number(v) for k, v in measured.items())


def resolve_device(requested: str = DEFAULT_DEVICE, precision: str = DEFAULT_GPU_PRECISION,
                   measured: Mapping[str, float] | None = None) -> Device:
    """The Device for a --device choice (see the module docstring). Never touches Vulkan for "cpu", nor for
    "auto" without a measurement saying a GPU is faster."""
    kind, index = parse_device(requested)
    check_gpu_precision(precision)
    if kind == "cpu":
        return CPU
    if kind == "auto":
        best = faster_gpu(measured)
        if best is None:
            timed = _timed(measured)
            why = ("the CPU measured faster than the GPUs on this machine" if timed
                   else "no GPU has been measured faster than the CPU on this machine")
            return Device(note=f"Running on the CPU: {why}.", fallback_to_cpu=True, noteworthy=timed)
        scan = scan_gpus()
        index = int(best.split(":", 1)[1])
        if not scan.gpus or index >= len(scan.gpus):
            why = scan.reason or f"GPU {index}, measured faster before, is gone"
            return Device(note=f"Running on the CPU: {why}.", fallback_to_cpu=True)
        gpu, ms = scan.gpus[index], measured or {}
        return Device(gpu, precision, note=f"Running on {gpu.describe()}: measured faster than the CPU on this "
                      f"machine ({ms[best]:.0f} against {ms['cpu']:.0f} ms per frame).", fallback_to_cpu=True)
    return _gpu_device(index, precision)


def _gpu_device(index: int | None, precision: str) -> Device:
    scan = scan_gpus()
    if not scan.gpus:
        raise GpuError(f"No GPU to run on: {scan.reason}.")
    if index is None:
        index = scan.default_index or 0
    if not 0 <= index < len(scan.gpus):
        seen = "; ".join(g.describe() for g in scan.gpus)
        raise GpuError(f"There is no GPU {index}: ncnn sees {len(scan.gpus)} ({seen}).")
    return Device(scan.gpus[index], precision)


def configure_gpu_net(net, device: Device) -> None:
    """Put a new ncnn net (before load_param) on device's GPU with every option set: fp32 storage and
    arithmetic unless the device's precision is fp16; no bf16, no int8 options (the int8 Gemm of q8 bundles
    reads its own parameters)."""
    if device.gpu is None:
        raise GpuError("configure_gpu_net needs a GPU device.")
    fp16 = device.precision == "fp16"
    opt = net.opt
    opt.use_vulkan_compute = True
    opt.use_fp16_storage = fp16
    opt.use_fp16_packed = fp16
    opt.use_fp16_arithmetic = fp16
    opt.use_bf16_storage = False
    opt.use_bf16_packed = False
    opt.use_int8_inference = False
    opt.use_int8_storage = False
    opt.use_int8_packed = False
    opt.use_int8_arithmetic = False
    opt.use_packing_layout = True
    net.set_vulkan_device(device.gpu.index)


@contextmanager
def gpu_load(device: Device, what: str) -> Iterator[None]:
    """Around loading a net: on a GPU, ncnn's messages are captured and a reported failure (a pipeline or shader
    the driver cannot build, device memory it cannot allocate) becomes a GpuError naming the net; on the CPU,
    nothing."""
    if device.gpu is None:
        yield
        return
    error: EngineError | None = None
    with ncnn_messages() as log:
        try:
            yield
        except EngineError as e:
            error = e
    failures = log.failures()
    if failures:
        raise GpuError(f"The GPU ({device.gpu.name}) cannot run the {what} network: ncnn reports "
                       f"\"{failures[0]}\".")
    if error is not None:
        raise error


@contextmanager
def gpu_failures(device: Device) -> Iterator[None]:
    """On a GPU, an ncnn failure inside the block (not bad input) becomes a GpuError naming the GPU."""
    if device.gpu is None:
        yield
        return
    try:
        yield
    except _NOT_THE_DEVICE:
        raise
    except EngineError as e:
        what = str(e).rstrip(".")
        what = what[:1].lower() + what[1:] if what[1:2].islower() else what
        raise GpuError(f"The GPU ({device.gpu.name}) stopped: {what}; it may have been reset or run out of memory. "
                       "Choose the CPU as the device to continue.") from None


def check_fits(device: Device, weight_bytes: int) -> None:
    """GpuError when the weights alone exceed the device memory budget ncnn computes for the GPU."""
    if device.gpu is None or not device.gpu.memory_mb:
        return
    need = weight_bytes / 2**20
    if need > device.gpu.memory_mb:
        raise GpuError(f"The model needs about {need:.0f} MB of GPU memory for its weights; {device.gpu.describe()} "
                       f"offers {device.gpu.memory_mb} MB.")


class _Log:
    lines: list[str]

    def __init__(self):
        self.lines = []

    def failures(self) -> list[str]:
        return [line for line in self.lines if _FAILURE.search(line)]


_STDERR_LOCK = threading.Lock()  # fd 2 is the process's: one capture at a time (the app loads nets on threads)


@contextmanager
def ncnn_messages() -> Iterator[_Log]:
    """Capture what native code prints to stderr (ncnn's NCNN_LOGE) inside the block; the lines are in the
    yielded log afterwards. Whatever other threads print meanwhile lands there too (a GPU net loads in well under
    a second). Falls back to not capturing where fd 2 cannot be redirected."""
    with _STDERR_LOCK:
        yield from _captured()


def _captured() -> Iterator[_Log]:
    log = _Log()
    try:
        saved = os.dup(2)
    except OSError:
        yield log
        return
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        try:
            sys.stderr.flush()
            os.dup2(tmp.fileno(), 2)
            yield log
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            text = tmp.read().decode("utf-8", "replace")
            log.lines = [line.strip() for line in text.splitlines() if line.strip()]
