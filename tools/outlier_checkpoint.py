"""Outlier stress checkpoints: a copy of a Qwen3-TTS checkpoint whose Linear layers see a few activation channels
much larger than the rest, as real LLM activations do (LLM.int8(), SmoothQuant, "Massive Activations in Large
Language Models") and random weights do not. They test 8-bit formats, which round each activation row with one
scale set by its largest value.

    python -m tools.outlier_checkpoint SRC DEST --mode preserve --factor 32 [--channels 4] [--seed 0]

Modes (`Stress`), applied to every decoder layer of the talker and of the code predictor:
- "preserve": the same function with outlier activations. A power-of-two factor F is moved between a few
  channels of a producer and the matching input columns of the next Linear: input_layernorm gain x F and the
  q/k/v_proj columns / F; post_attention_layernorm gain x F and the gate/up_proj columns / F; up_proj rows x F and
  the down_proj columns / F (the SwiGLU product is linear in up); v_proj rows x F and the o_proj columns of every
  query head reading that kv channel / F (attention output is linear in v). A multiply by a power of two is exact
  in floating point (bf16 included), so every product of the original network is reproduced bit for bit.
- "channels": a few channels per layer scaled by F without compensation (the norm gains of the attention and MLP
  inputs, up_proj and v_proj rows, as "preserve" does), the shape of the systematic outlier dimensions of the
  published measurements (10x-100x); a different function, so the reference is its own fp32 run.
- "massive": the talker's codec-embedding rows of the control tokens that open every prompt get one residual
  channel set to F times the row's mean magnitude ("massive activations" on the first positions, ~100-1000x in
  published models); the code predictor is unchanged (its first position is the talker's output).
Channels are drawn from `seed`; hidden-size channels are the same in every layer of a stack (outlier dimensions
are systematic in real models). Other files are hard-linked (copied across file systems): only model.safetensors
is rewritten, tensor by tensor in its stored dtype, so full-size checkpoints need little RAM.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import struct
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.convert.checkpoint import Checkpoint, SafetensorsFile
from engine.errors import EngineError

MODES = ("preserve", "channels", "massive")
STACKS = (("talker.model.", None), ("talker.code_predictor.model.", "code_predictor_config"))
CONTROL_OFFSETS = range(12)  # codebook + 0..11: the stand-in prompt of benchmarks/talker_speed.py
CONTROL_KEYS = ("codec_think_id", "codec_nothink_id", "codec_think_bos_id", "codec_think_eos_id")


@dataclass(frozen=True)
class Stress:
    mode: str
    factor: float
    channels: int = 4
    seed: int = 0

    def __post_init__(self):
        if self.mode not in MODES:
            raise EngineError(f"unknown stress mode {self.mode!r}; choose one of {', '.join(MODES)}")
        if not self.factor > 0 or self.channels < 1:
            raise EngineError("the stress factor must be positive and at least one channel chosen")
        if self.mode == "preserve" and not float(np.log2(self.factor)).is_integer():
            raise EngineError(f"a function-preserving factor must be a power of two (exact in floating point), "
                              f"not {self.factor:g}")

    @property
    def label(self) -> str:
        return f"{self.mode}{self.factor:g}"


@dataclass
class _Scale:
    """Per-tensor edits: rows and columns scaled by vectors, single entries set."""

    rows: np.ndarray | None = None
    cols: np.ndarray | None = None
    entries: list[tuple[int, int, float]] | None = None

    def row(self, n: int) -> np.ndarray:
        if self.rows is None:
            self.rows = np.ones(n, np.float64)
        return self.rows

    def col(self, n: int) -> np.ndarray:
        if self.cols is None:
            self.cols = np.ones(n, np.float64)
        return self.cols

    def apply(self, w: np.ndarray) -> np.ndarray:
        w = w.astype(np.float32)
        if self.rows is not None:
            w = w * self.rows.astype(np.float32).reshape((-1,) + (1,) * (w.ndim - 1))
        if self.cols is not None:
            w = w * self.cols.astype(np.float32)
        for r, c, scale in self.entries or []:
            w[r, c] = np.float32(scale * float(np.mean(np.abs(w[r]))))
        return w


def stress_edits(ckpt: Checkpoint, stress: Stress) -> dict[str, _Scale]:
    """Which tensors change and how (see the module docstring)."""
    edits: dict[str, _Scale] = {}

    def edit(name: str) -> _Scale:
        if name not in ckpt.main:
            raise EngineError(f"{ckpt.path} has no tensor {name}; is this a Qwen3-TTS checkpoint?")
        return edits.setdefault(name, _Scale())

    f, n = float(stress.factor), stress.channels
    tcfg = ckpt.talker_config
    if stress.mode == "massive":
        rng = np.random.default_rng([stress.seed, 99])
        table = "talker.model.codec_embedding.weight"
        rows, width = ckpt.main.shape(table)
        codebook = int(tcfg["code_predictor_config"]["vocab_size"])
        ids = {codebook + i for i in CONTROL_OFFSETS} | {int(tcfg[k]) for k in CONTROL_KEYS if k in tcfg}
        channel = int(rng.integers(width))
        edit(table).entries = [(i, channel, f) for i in sorted(ids) if i < rows]
        return edits
    for si, (prefix, sub) in enumerate(STACKS):
        cfg = tcfg[sub] if sub else tcfg
        hidden, inter, layers = int(cfg["hidden_size"]), int(cfg["intermediate_size"]), int(cfg["num_hidden_layers"])
        heads = int(cfg["num_attention_heads"])
        kv = int(cfg.get("num_key_value_heads") or heads)
        hd = int(cfg.get("head_dim") or hidden // heads)
        rng = np.random.default_rng([stress.seed, si])
        hid = rng.choice(hidden, min(n, hidden), replace=False)
        for i in range(layers):
            p = f"{prefix}layers.{i}."
            a, m = p + "self_attn.", p + "mlp."
            up = rng.choice(inter, min(n, inter), replace=False)
            vch = rng.choice(kv * hd, min(n, kv * hd), replace=False)
            edit(p + "input_layernorm.weight").row(hidden)[hid] *= f
            edit(p + "post_attention_layernorm.weight").row(hidden)[hid] *= f
            edit(m + "up_proj.weight").row(inter)[up] *= f
            edit(a + "v_proj.weight").row(kv * hd)[vch] *= f
            if a + "v_proj.bias" in ckpt.main:
                edit(a + "v_proj.bias").row(kv * hd)[vch] *= f
            if stress.mode != "preserve":
                continue
            for lin in ("q_proj", "k_proj", "v_proj"):
                edit(f"{a}{lin}.weight").col(hidden)[hid] /= f
            for lin in ("gate_proj", "up_proj"):
                edit(f"{m}{lin}.weight").col(hidden)[hid] /= f
            edit(m + "down_proj.weight").col(inter)[up] /= f
            o_cols = [h * hd + int(c) % hd for c in vch for h in range(heads) if h // (heads // kv) == int(c) // hd]
            edit(a + "o_proj.weight").col(heads * hd)[o_cols] /= f
    return edits


_BF16 = np.dtype("<u2")


def _to_bf16(v: np.ndarray) -> np.ndarray:
    u = np.ascontiguousarray(v, np.float32).view(np.uint32)
    return ((u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)).astype(np.uint16)


def _rewrite(src: SafetensorsFile, dest: Path, edits: dict[str, _Scale]) -> None:
    """model.safetensors with the same header (dtypes, shapes, offsets) and the edited tensors' bytes replaced."""
    with open(src.path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    with open(src.path, "rb") as fin, open(dest, "wb") as out:
        out.write(struct.pack("<Q", n))
        fin.seek(8)
        out.write(fin.read(n))
        base = 8 + n
        entries = sorted((info["data_offsets"][0], name, info) for name, info in header.items()
                         if name != "__metadata__")
        for start, name, info in entries:
            if out.tell() != base + start:
                raise EngineError(f"{src.path}: tensors are not stored back to back; cannot rewrite it")
            if name not in edits:
                fin.seek(base + start)
                left = info["data_offsets"][1] - start
                while left:
                    chunk = fin.read(min(left, 1 << 24))
                    out.write(chunk)
                    left -= len(chunk)
                continue
            w = edits[name].apply(src.get(name))
            if info["dtype"] == "BF16":
                out.write(_to_bf16(w).tobytes())
            elif info["dtype"] == "F32":
                out.write(w.astype("<f4").tobytes())
            elif info["dtype"] == "F16":
                out.write(w.astype("<f2").tobytes())
            else:
                raise EngineError(f"{src.path}: tensor {name} has dtype {info['dtype']}, not a float")
        out.flush()
        os.fsync(out.fileno())


def write_stress_checkpoint(src: str | os.PathLike, dest: str | os.PathLike, stress: Stress,
                            progress: Callable[[str], None] | None = None) -> Path:
    """Write the stressed copy of checkpoint `src` to `dest` (a new folder, appearing only when complete)."""
    return write_edited_checkpoint(src, dest, lambda ckpt: stress_edits(ckpt, stress), progress)


def scale_columns(n: int, columns: list[int], factor: float) -> _Scale:
    """An edit multiplying the given input columns of a [out, n] weight by `factor` (tests inject one bad layer)."""
    edit = _Scale()
    edit.col(n)[columns] *= factor
    return edit


def write_edited_checkpoint(src: str | os.PathLike, dest: str | os.PathLike,
                            edits_of: Callable[[Checkpoint], dict[str, _Scale]],
                            progress: Callable[[str], None] | None = None) -> Path:
    """A copy of checkpoint `src` at `dest` with the tensors edits_of(checkpoint) names edited."""
    src, dest = Path(src), Path(dest)
    if dest.exists():
        raise EngineError(f"{dest} already exists; choose a new folder or remove it")
    ckpt = Checkpoint.open(src)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        edits = edits_of(ckpt)
        for path in sorted(src.rglob("*")):
            rel = path.relative_to(src)
            if path.is_dir():
                (tmp / rel).mkdir(parents=True, exist_ok=True)
            elif rel != Path("model.safetensors"):
                (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
                try:
                    os.link(path, tmp / rel)
                except OSError:
                    shutil.copy2(path, tmp / rel)
        if progress:
            progress(f"rewriting {len(edits)} tensors of model.safetensors")
        if not isinstance(ckpt.main, SafetensorsFile):
            raise EngineError("the checkpoint's weights are not one model.safetensors file; cannot rewrite them")
        _rewrite(ckpt.main, tmp / "model.safetensors", edits)
        os.chmod(tmp, 0o755)
        os.replace(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        ckpt.close()
    return dest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src", type=Path)
    ap.add_argument("dest", type=Path)
    ap.add_argument("--mode", choices=MODES, default="preserve")
    ap.add_argument("--factor", type=float, default=32.0)
    ap.add_argument("--channels", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    try:
        out = write_stress_checkpoint(a.src, a.dest, Stress(a.mode, a.factor, a.channels, a.seed), print)
    except EngineError as e:
        print(f"outlier_checkpoint: {e}")
        return 2
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
