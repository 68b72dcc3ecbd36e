"""Random-weight Qwen3-TTS 12 Hz Base checkpoints in the hub layout, written with numpy only (a development tool:
the app ships the demo checkpoint this writes, engine/demo_checkpoint/, and converts it at run time).

Presets: "demo" (tiny, every code path: GQA, head_dim != hidden/heads, talker wider than the code predictor,
16 code groups, 12.5 Hz frames, sliding windows), "0.6b" and "1.7b" (the real shapes and tensor names, for speed
runs and full-size parity checks). Tensors are streamed to the safetensors file, so full-size checkpoints need
little RAM. Values are seeded per tensor name: the same (preset, seed) always gives the same bytes.

Modules, from the bottom up: presets.py (the shapes and shared constants), text_tokenizer.py and configs.py (the
small files), tensor_specs.py (the talker, code predictor and speaker encoder tensors) and speech_tensors.py (the
speech tokenizer's), weights_file.py (values and the safetensors writer), checkpoint.py (the entry points) and
cli.py (`python -m tools.random_checkpoint [DEST]` regenerates the demo checkpoint).
"""

from __future__ import annotations

from .checkpoint import CheckpointLayout, Progress, checkpoint_layout, write_random_checkpoint
from .cli import main
from .configs import (
    ROOT_PREPROCESSOR_CONFIG,
    SPEECH_PREPROCESSOR_CONFIG,
    codec_ids,
    main_config,
    speech_config,
)
from .json_files import write_json, write_text
from .presets import (
    CODEC_OFFSETS,
    DEMO_CHECKPOINT,
    DEMO_SEED,
    GENERATION_CONFIG,
    LANGUAGE_OFFSETS,
    PRESETS,
    SPK_DEFAULTS,
    TRANSFORMERS_VERSION,
    ModelShape,
    Preset,
    get_preset,
)
from .speech_tensors import codec_decoder_tensors, mimi_encoder_tensors, speech_tensors
from .tensor_specs import TensorSpec, main_tensors, speaker_tensors
from .text_tokenizer import (
    CHAT_TEMPLATE,
    CORPUS,
    QWEN2_SPLIT,
    REAL_VOCAB_BASE,
    REAL_WORD_IDS,
    SPECIAL_TOKENS,
    TextTokenizerFiles,
    build_text_tokenizer,
    bytes_to_unicode,
)
from .weights_file import ST_DTYPES, safetensors_header, tensor_chunks, tensor_values, write_safetensors

__all__ = [
    "CHAT_TEMPLATE",
    "CODEC_OFFSETS",
    "CORPUS",
    "CheckpointLayout",
    "DEMO_CHECKPOINT",
    "DEMO_SEED",
    "GENERATION_CONFIG",
    "LANGUAGE_OFFSETS",
    "ModelShape",
    "PRESETS",
    "Preset",
    "Progress",
    "QWEN2_SPLIT",
    "REAL_VOCAB_BASE",
    "REAL_WORD_IDS",
    "ROOT_PREPROCESSOR_CONFIG",
    "SPECIAL_TOKENS",
    "SPEECH_PREPROCESSOR_CONFIG",
    "SPK_DEFAULTS",
    "ST_DTYPES",
    "TRANSFORMERS_VERSION",
    "TensorSpec",
    "TextTokenizerFiles",
    "build_text_tokenizer",
    "bytes_to_unicode",
    "checkpoint_layout",
    "codec_decoder_tensors",
    "codec_ids",
    "get_preset",
    "main",
    "main_config",
    "main_tensors",
    "mimi_encoder_tensors",
    "safetensors_header",
    "speaker_tensors",
    "speech_config",
    "speech_tensors",
    "tensor_chunks",
    "tensor_values",
    "write_json",
    "write_random_checkpoint",
    "write_safetensors",
    "write_text",
]
