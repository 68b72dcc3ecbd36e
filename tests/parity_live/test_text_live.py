"""engine.text against the official processor (AutoProcessor + fix_mistral_regex=True, as qwen-tts loads it).

Covers the two split rules transformers 4.57.3 can end up with: the plain Qwen2 regex (small vocabularies, or
config.json from transformers <= 4.57.2) and the substituted "Mistral fix" regex (vocabulary > 100000 and
config.json transformers_version 4.57.3, which is what the real 0.6B/1.7B checkpoints declare).
"""

import json
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.reference

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reference"))

import oracle  # noqa: E402  (installs the torchaudio stub before qwen_tts; missing packages fail, never skip)
from transformers import AutoConfig, AutoProcessor  # noqa: E402

from engine.text.tokenizer import TextTokenizer, split_pattern_for, target_template  # noqa: E402

EXTRA = [
    "xoWy HelloWorld camelCaseText URLs/path/to/x a//b", "IT'S DON'T we'LL", "x\u0301e\u0301 A\u030a",
    "  lots   of\n\n\n spaces\t\t", "🙂‍↔️👨‍👩‍👧 1234567", "<|im_start|>user\nhi<|im_end|>",
    "<tts_pad>text<tts_text_bos>", "ＡＢＣ１２３", "", " ", "مرحبا بالعالم", "ĠĊ weird", "e\u0301",
]


def _folder(tmp: Path, pad_to: int, version: str) -> Path:
    tok, _ = oracle.build_text_tokenizer()
    out = tmp / f"tok_{pad_to}_{version}"
    out.mkdir()
    oracle.Qwen3TTSProcessor(tokenizer=tok).save_pretrained(str(out))
    for extra in ("tokenizer.json", "special_tokens_map.json", "added_tokens.json", "chat_template.jinja"):
        (out / extra).unlink(missing_ok=True)
    vocab = json.loads((out / "vocab.json").read_text())
    n0 = len(vocab)
    # a low-priority merge that only the Qwen2 split can reach ("xoWy" is one piece there, two for the fix)
    vocab["oW"] = n0
    merges = (out / "merges.txt").read_text().rstrip("\n") + "\no W\n"
    (out / "merges.txt").write_text(merges)
    pad = max(0, pad_to - len(vocab))
    base = len(vocab)
    for i in range(pad):
        vocab[f"zzq{i}"] = base + i
    shift = len(vocab) - n0
    (out / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False))
    cfg = json.loads((out / "tokenizer_config.json").read_text())
    cfg["added_tokens_decoder"] = {str(int(k) + shift): v for k, v in cfg["added_tokens_decoder"].items()}
    (out / "tokenizer_config.json").write_text(json.dumps(cfg, ensure_ascii=False))
    (out / "config.json").write_text(json.dumps({"model_type": "qwen3_tts", "transformers_version": version}))
    return out


@pytest.mark.parametrize("pad_to,version,rule", [(0, "4.57.3", "qwen2"), (100010, "4.57.3", "mistral_fix"),
                                                 (100010, "4.57.1", "qwen2")])
def test_ids_identical_to_official_processor(tmp_path, pad_to, version, rule):
    from qwen_tts.core.models import Qwen3TTSConfig, Qwen3TTSProcessor

    AutoConfig.register("qwen3_tts", Qwen3TTSConfig, exist_ok=True)
    AutoProcessor.register(Qwen3TTSConfig, Qwen3TTSProcessor, exist_ok=True)
    folder = _folder(tmp_path, pad_to, version)
    proc = AutoProcessor.from_pretrained(str(folder), fix_mistral_regex=True)
    config = json.loads((folder / "config.json").read_text())
    n_vocab = len(json.loads((folder / "vocab.json").read_text()))
    assert split_pattern_for(config, n_vocab) == rule
    ours = TextTokenizer(folder, split=rule)
    texts = oracle.CORPUS + EXTRA
    for t in texts + [target_template(t) for t in texts]:
        assert ours.encode(t) == proc(text=t)["input_ids"][0], repr(t)
    # the probe text really tells the two rules apart
    other = TextTokenizer(folder, split="qwen2" if rule == "mistral_fix" else "mistral_fix")
    assert other.encode(EXTRA[0]) != ours.encode(EXTRA[0])
