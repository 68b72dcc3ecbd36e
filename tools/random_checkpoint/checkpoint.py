"""The public entry points: a preset's layout without tensor data, and writing a whole checkpoint folder."""

from __future__ import annotations

import math
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.errors import EngineError
from engine.io.fileio import current_umask

from .configs import ROOT_PREPROCESSOR_CONFIG, SPEECH_PREPROCESSOR_CONFIG, main_config, speech_config
from .json_files import write_json
from .presets import GENERATION_CONFIG, Preset, get_preset
from .speech_tensors import speech_tensors
from .tensor_specs import TensorSpec, main_tensors
from .text_tokenizer import TextTokenizerFiles, build_text_tokenizer
from .weights_file import ST_DTYPES, safetensors_header, write_safetensors

Progress = Callable[[float, str], None]


@dataclass
class CheckpointLayout:
    """Everything a preset writes, without the tensor data (cheap even for full-size presets)."""

    preset: Preset
    tokenizer: TextTokenizerFiles
    config: dict[str, Any]
    speech_config: dict[str, Any]
    main: list[TensorSpec]
    speech: list[TensorSpec]
    main_dtype: str

    def headers(self) -> dict[str, bytes]:
        return {
            "model.safetensors": safetensors_header(self.main, self.main_dtype),
            "speech_tokenizer/model.safetensors": safetensors_header(self.speech, "fp32"),
        }


def checkpoint_layout(preset: str | Preset = "demo", dtype: str | None = None) -> CheckpointLayout:
    p = get_preset(preset)
    dtype = dtype or p.main_dtype
    if dtype not in ST_DTYPES:
        raise EngineError(f"unknown storage dtype {dtype!r}; choose fp32 or bf16")
    tok = build_text_tokenizer(p)
    text_vocab = p.text_vocab or int(math.ceil(tok.size / 64) * 64)
    if text_vocab < tok.size:
        raise EngineError(f"preset {p.name}: tokenizer has {tok.size} ids but the text table only {text_vocab}")
    assistant = tok.vocab.get("assistant")
    if assistant is None:
        raise EngineError("the demo tokenizer did not learn 'assistant' as one token")
    cfg = main_config(p, tok.special_ids, assistant, text_vocab, dtype)
    return CheckpointLayout(p, tok, cfg, speech_config(p), main_tensors(p, text_vocab), speech_tensors(p), dtype)


def write_random_checkpoint(
    dest: str | os.PathLike,
    preset: str | Preset = "demo",
    seed: int = 0,
    progress: Progress | None = None,
    dtype: str | None = None,
    overwrite: bool = False,
) -> Path:
    """Write a random-weight checkpoint folder in the hub layout; returns its path.

    dtype: storage of model.safetensors ("bf16" like the real files, default for full-size presets, or "fp32");
    the speech tokenizer is always fp32, like the real one. The folder appears only when complete.
    """
    dest = Path(dest)
    if dest.exists() and not overwrite and not (dest.is_dir() and not any(dest.iterdir())):
        raise EngineError(f"{dest} already exists; choose a new folder or remove it")
    layout = checkpoint_layout(preset, dtype)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    report = progress or (lambda _f, _m: None)
    try:
        report(0.0, "writing configs and tokenizer")
        write_json(tmp / "config.json", layout.config)
        write_json(tmp / "generation_config.json", GENERATION_CONFIG)
        write_json(tmp / "preprocessor_config.json", ROOT_PREPROCESSOR_CONFIG)
        layout.tokenizer.write(tmp)
        (tmp / "speech_tokenizer").mkdir()
        write_json(tmp / "speech_tokenizer/config.json", layout.speech_config)
        write_json(tmp / "speech_tokenizer/preprocessor_config.json", SPEECH_PREPROCESSOR_CONFIG)
        n_main = sum(s.numel for s in layout.main)
        n_all = n_main + sum(s.numel for s in layout.speech)
        write_safetensors(tmp / "model.safetensors", layout.main, layout.main_dtype, seed,
                          lambda f: report(0.01 + 0.99 * f * n_main / n_all, "writing model.safetensors"))
        write_safetensors(tmp / "speech_tokenizer/model.safetensors", layout.speech, "fp32", seed + 1,
                          lambda f: report(0.01 + 0.99 * (n_main + f * (n_all - n_main)) / n_all,
                                           "writing speech_tokenizer/model.safetensors"))
        os.chmod(tmp, 0o777 & ~current_umask())  # mkdtemp makes it 0700; an ordinary folder is wanted
        if dest.exists():
            shutil.rmtree(dest)
        os.replace(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    report(1.0, "done")
    return dest
