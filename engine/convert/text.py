"""Converter part "text": tokenizer files, the projected text table and every prompt id.

text_rows (V, H) = linear_fc2(silu(linear_fc1(text_embedding))) row by row: the projection MLP is per token, so
precomputing it is exact and saves the 2048-wide embedding table and two matmuls per prompt row at run time.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from ..errors import ConvertError
from ..io.json_file import read_json_object
from ..runtime.manifest_parts import CODEC_IDS, TEXT_IDS, TextPart
from ..text.tokenizer import TOKENIZER_FILES, split_pattern_for
from .checkpoint import Checkpoint

PREFIX = "talker."
BLOCK_ROWS = 4096  # rows per matmul block: bounded memory (4096 x 2048 fp32 = 32 MB per block)


def project_rows(emb: np.ndarray, w1: np.ndarray, b1: np.ndarray | None, w2: np.ndarray,
                 b2: np.ndarray | None) -> np.ndarray:
    """linear_fc2(silu(linear_fc1(emb))) in float32 for a block of rows."""
    h = emb.astype(np.float32, copy=False) @ w1.T
    if b1 is not None:
        h += b1
    h = h / (np.float32(1.0) + np.exp(-h))  # silu, computed as torch does: x * sigmoid(x)
    out = h @ w2.T
    if b2 is not None:
        out += b2
    return out.astype(np.float32, copy=False)


def model_fingerprint(ckpt: Checkpoint) -> str:
    """Hash of the speaker-encoder and speech-encoder weights (the two networks a Voice depends on).

    Values are hashed as float32 so fp32/fp16/bf16 bundles of one checkpoint share the id."""
    h = hashlib.sha256(b"qwen3tts-voice-model-v1")
    groups = [
        (ckpt.main, sorted(k for k in ckpt.main.keys() if k.startswith("speaker_encoder."))),
        (ckpt.speech, sorted(k for k in ckpt.speech.keys() if k.startswith("encoder."))),
    ]
    for f, names in groups:
        for name in names:
            arr = np.ascontiguousarray(f.get(name, np.float32))
            h.update(name.encode())
            h.update(str(arr.shape).encode())
            h.update(arr.tobytes())
    return h.hexdigest()[:32]


def _rows(ckpt: Checkpoint, name: str, start: int, stop: int) -> np.ndarray:
    """Rows [start, stop) of a 2-D tensor as float32 without reading the whole (1.2 GB) table."""
    return ckpt.main.get_rows(name, start, stop)


def _get_optional(ckpt: Checkpoint, name: str) -> np.ndarray | None:
    return ckpt.main.get(name) if name in ckpt.main else None


def convert(ckpt: Checkpoint, writer, options) -> None:
    cfg = ckpt.config
    tcfg = cfg.get("talker_config") or {}
    for rel in TOKENIZER_FILES:
        src = ckpt.path / rel
        if not src.is_file():
            raise ConvertError(f"{ckpt.path} is incomplete: missing {rel}")
        writer.copy_file(src, f"tokenizer/{rel}")
    vocab = read_json_object(ckpt.path / "vocab.json", ConvertError)

    options.report(0.0, "text table")
    emb_name = PREFIX + "model.text_embedding.weight"
    w1 = ckpt.main.get(PREFIX + "text_projection.linear_fc1.weight")
    b1 = _get_optional(ckpt, PREFIX + "text_projection.linear_fc1.bias")
    w2 = ckpt.main.get(PREFIX + "text_projection.linear_fc2.weight")
    b2 = _get_optional(ckpt, PREFIX + "text_projection.linear_fc2.bias")
    v, text_hidden = ckpt.main.shape(emb_name)
    hidden = w2.shape[0]
    if w1.shape[1] != text_hidden or w2.shape[1] != w1.shape[0]:
        raise ConvertError("text projection weights do not fit the text embedding; is this a Qwen3-TTS checkpoint?")
    table_dtype = np.float32 if options.precision == "fp32" else np.float16
    # streamed with plain writes, not a memory map: a full disk is then an OSError, not a SIGBUS that kills the app
    with open(writer.path("text_rows.npy"), "wb") as f:
        np.lib.format.write_array_header_1_0(
            f, {"descr": np.lib.format.dtype_to_descr(np.dtype(table_dtype)), "fortran_order": False,
                "shape": (int(v), int(hidden))})
        for start in range(0, v, BLOCK_ROWS):
            stop = min(v, start + BLOCK_ROWS)
            rows = _rows(ckpt, emb_name, start, stop)
            f.write(np.ascontiguousarray(project_rows(rows, w1, b1, w2, b2).astype(table_dtype)).data)
            options.report(0.9 * stop / v, f"text table {stop}/{v} rows")

    options.report(0.92, "model fingerprint")
    writer.manifest["model_id"] = model_fingerprint(ckpt)

    cp_cfg = tcfg.get("code_predictor_config") or {}
    for key in ("im_start_token_id", "im_end_token_id", "tts_pad_token_id", "tts_bos_token_id", "tts_eos_token_id"):
        if key not in cfg:
            raise ConvertError(f"config.json has no {key}; is this a Qwen3-TTS checkpoint?")
    for key in CODEC_IDS:
        if key not in tcfg:
            raise ConvertError(f"config.json talker_config has no {key}; is this a Qwen3-TTS checkpoint?")
    part = TextPart(
        table="text_rows", text_vocab=int(v), hidden=int(hidden), split_regex=split_pattern_for(cfg, len(vocab)),
        newline_id=vocab.get("\u010a"),  # byte-level "\n"
        tts_model_type=cfg.get("tts_model_type", "base"), tts_model_size=cfg.get("tts_model_size", ""),
        codec_vocab=int(tcfg.get("vocab_size", 0)), codebook_size=int(cp_cfg.get("vocab_size", 0)),
        num_code_groups=int(tcfg.get("num_code_groups", 16)),
        codec_language_id={str(k): int(x) for k, x in (tcfg.get("codec_language_id") or {}).items()},
        spk_id={str(k): _as_int(x) for k, x in (tcfg.get("spk_id") or {}).items()},
        spk_is_dialect=dict(tcfg.get("spk_is_dialect") or {}),
        max_position_embeddings=int(tcfg.get("max_position_embeddings", 32768)),
        text_ids={key: int(cfg[key]) for key in TEXT_IDS if key in cfg},
        codec_ids={key: int(tcfg[key]) for key in CODEC_IDS},
    )
    writer.write_record(part)
    options.report(1.0, "done")


def _as_int(x: Any) -> int:
    """CustomVoice configs store speaker ids as ints or one-element lists."""
    if isinstance(x, (list, tuple)):
        x = x[0]
    return int(x)
