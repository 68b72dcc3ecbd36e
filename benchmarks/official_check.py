"""Check a checkpoint folder against the official qwen-tts loader (reference environment: .venv-ref).

    python benchmarks/official_check.py names DIR [-o names.json]   official tensor names + shapes for DIR's configs
                                                                    (built on the meta device: no weights, no RAM)
    python benchmarks/official_check.py load DIR [--generate]       load with Qwen3TTSModel.from_pretrained, report
                                                                    missing/unexpected/mismatched tensors and load
                                                                    warnings, the prompt token ids, decoder/encoder
                                                                    output statistics (and a short sampled run)

Full-size checkpoints: wrap in `flock /tmp/fullsize.lock ...`.
"""

from __future__ import annotations

import argparse
import json
import logging
import resource
import struct
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _official  # noqa: E402, F401  (torchaudio stub before qwen_tts)
import numpy as np  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(2)

from qwen_tts import Qwen3TTSModel  # noqa: E402
from qwen_tts.core.models import Qwen3TTSConfig, Qwen3TTSForConditionalGeneration  # noqa: E402
from qwen_tts.core.tokenizer_12hz.configuration_qwen3_tts_tokenizer_v2 import (  # noqa: E402
    Qwen3TTSTokenizerV2Config,
)
from qwen_tts.core.tokenizer_12hz.modeling_qwen3_tts_tokenizer_v2 import Qwen3TTSTokenizerV2Model  # noqa: E402

FILES = ("model.safetensors", "speech_tokenizer/model.safetensors")


def official_names(ckpt: Path) -> dict[str, dict[str, list[int]]]:
    """{file: {tensor name: shape}} that the official modules expect for this folder's config files."""
    cfg = Qwen3TTSConfig.from_pretrained(str(ckpt))
    scfg = Qwen3TTSTokenizerV2Config.from_pretrained(str(ckpt / "speech_tokenizer"))
    with torch.device("meta"):
        main = Qwen3TTSForConditionalGeneration(cfg)
        speech = Qwen3TTSTokenizerV2Model(scfg)
    return {
        FILES[0]: {k: list(v.shape) for k, v in main.state_dict().items()},
        FILES[1]: {k: list(v.shape) for k, v in speech.state_dict().items()},
    }


def file_names(path: Path) -> dict[str, tuple[str, list[int]]]:
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    header.pop("__metadata__", None)
    return {k: (v["dtype"], v["shape"]) for k, v in header.items()}


def compare(ckpt: Path) -> bool:
    ok = True
    expected = official_names(ckpt)
    for rel in FILES:
        want = expected[rel]
        have = file_names(ckpt / rel)
        missing = sorted(set(want) - set(have))
        unexpected = sorted(set(have) - set(want))
        wrong = sorted(k for k in set(want) & set(have) if list(want[k]) != list(have[k][1]))
        dtypes = sorted({d for d, _ in have.values()})
        print(f"{rel}: {len(have)} tensors ({', '.join(dtypes)}), official expects {len(want)}; "
              f"missing {len(missing)}, unexpected {len(unexpected)}, wrong shape {len(wrong)}")
        for k in missing[:10]:
            print(f"  missing    {k} {want[k]}")
        for k in unexpected[:10]:
            print(f"  unexpected {k} {have[k][1]}")
        for k in wrong[:10]:
            print(f"  shape      {k} file {have[k][1]} official {want[k]}")
        ok &= not (missing or unexpected or wrong)
    return ok


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record.getMessage())


def load(ckpt: Path, generate: bool, dtype: str) -> bool:
    from transformers.utils import logging as hf_logging

    ok = compare(ckpt)
    cap = _Capture()
    hf_logging.get_logger().addHandler(cap)
    t0 = time.monotonic()
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        tts = Qwen3TTSModel.from_pretrained(str(ckpt), dtype=getattr(torch, dtype), local_files_only=True)
    load_s = time.monotonic() - t0
    hf_logging.get_logger().removeHandler(cap)
    msgs = cap.records + [f"{w.category.__name__}: {w.message}" for w in warned]
    print(f"loaded in {load_s:.1f} s, peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6:.2f} GB; "
          f"{len(msgs)} load warnings")
    for m in msgs:
        print("  warning:", str(m).replace("\n", " ")[:300])
        low = str(m).lower()
        if "newly initialized" in low or "were not used" in low or "mismatch" in low:
            ok = False

    m = tts.model
    cfg = m.config
    print(f"model: type={m.tts_model_type} size={m.tts_model_size} talker hidden {cfg.talker_config.hidden_size}, "
          f"cp hidden {cfg.talker_config.code_predictor_config.hidden_size}, languages {m.get_supported_languages()}")
    print("generate defaults:", tts.generate_defaults)

    # prompt layout: qwen-tts slices at fixed token positions
    text = "Hello world, 你好！"
    ids = tts.processor(text=f"<|im_start|>assistant\n{text}<|im_end|>\n<|im_start|>assistant\n")["input_ids"][0]
    tok = tts.processor.tokenizer
    head_ok = ids[:3] == [cfg.im_start_token_id, tok.convert_tokens_to_ids("assistant"), tok.convert_tokens_to_ids("Ċ")]
    tail_ok = ids[-5:] == [cfg.im_end_token_id, ids[2], cfg.im_start_token_id, ids[1], ids[2]]
    specials = {s: tok.convert_tokens_to_ids(s) for s in ("<tts_pad>", "<tts_text_bos>", "<tts_text_eod>")}
    spec_ok = [specials["<tts_pad>"], specials["<tts_text_bos>"], specials["<tts_text_eod>"]] == [
        cfg.tts_pad_token_id, cfg.tts_bos_token_id, cfg.tts_eos_token_id]
    print(f"prompt ids {ids[:3]}...{ids[-5:]} ({len(ids)} tokens): role head {'ok' if head_ok else 'WRONG'}, "
          f"tail {'ok' if tail_ok else 'WRONG'}; tts specials {specials} {'ok' if spec_ok else 'WRONG'}; "
          f"decode round trip {'ok' if tok.decode(ids[3:-5]) == text else 'WRONG: ' + tok.decode(ids[3:-5])}")
    ok &= head_ok and tail_ok and spec_ok

    # decoder: random codes -> audible noise, not silence or clipping
    st = m.speech_tokenizer.model
    cb = st.config.decoder_config.codebook_size
    g = torch.Generator().manual_seed(0)
    codes = torch.randint(0, cb, (1, 16, 40), generator=g)
    pre: dict[str, torch.Tensor] = {}
    h = st.decoder.decoder[-1].register_forward_hook(lambda _m, _i, o: pre.__setitem__("y", o))
    t0 = time.monotonic()
    with torch.inference_mode():
        wav = st.decoder.chunked_decode(codes).float().flatten().numpy()
    dec_s = time.monotonic() - t0
    h.remove()
    y = pre["y"].float().flatten().numpy()
    clip = float(np.mean(np.abs(wav) >= 0.999))
    rms = float(np.sqrt(np.mean((wav - wav.mean()) ** 2)))
    print(f"decoder: 40 frames -> {wav.size} samples in {dec_s:.2f} s; pre-clamp std {y.std():.4f}, "
          f"out rms {rms:.4f}, dc {wav.mean():+.4f}, peak {np.abs(wav).max():.3f}, clipped {clip * 100:.2f}%")
    ok &= bool(np.isfinite(wav).all()) and rms > 0.01 and clip < 0.05

    # encoder: a chirp -> codes that vary
    t = np.arange(24000 * 2) / 24000
    chirp = (0.3 * np.sin(2 * np.pi * (100 + 900 * t) * t)).astype(np.float32)
    enc = m.speech_tokenizer.encode(chirp, sr=24000)
    c = enc.audio_codes[0].cpu().numpy()
    uniq = [len(np.unique(c[:, i])) for i in range(c.shape[1])]
    print(f"encoder: 2 s chirp -> codes {c.shape}, distinct per group {uniq}")
    spk = m.extract_speaker_embedding(chirp, sr=24000)
    print(f"speaker encoder: x-vector {tuple(spk.shape)} std {float(spk.float().std()):.4f} "
          f"finite {bool(torch.isfinite(spk).all())}")
    ok &= bool(torch.isfinite(spk).all())

    if generate:
        noise = np.random.default_rng(0).standard_normal(24000 * 3).astype(np.float32) * 0.1
        t0 = time.monotonic()
        wavs, sr = tts.generate_voice_clone(
            text="The quick brown fox jumps over the lazy dog.", language="English", ref_audio=(noise, 24000),
            x_vector_only_mode=True, max_new_tokens=200)
        w = wavs[0]
        print(f"generate (sampled, cap 200): {w.size / 1920:.0f} frames in {time.monotonic() - t0:.1f} s, "
              f"rms {float(np.sqrt(np.mean(w ** 2))):.4f}, peak {float(np.abs(w).max()):.3f}")
    print("RESULT:", "ok" if ok else "PROBLEMS")
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    n = sub.add_parser("names")
    n.add_argument("ckpt", type=Path)
    n.add_argument("-o", "--output", type=Path)
    n.add_argument("--tag", default="", help="label stored in the output (e.g. the preset)")
    ld = sub.add_parser("load")
    ld.add_argument("ckpt", type=Path)
    ld.add_argument("--generate", action="store_true")
    ld.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    a = ap.parse_args()
    if a.cmd == "names":
        names = official_names(a.ckpt)
        out = {"generated_by": "benchmarks/official_check.py names (official qwen-tts modules, meta device)",
               "preset": a.tag, "files": names}
        text = json.dumps(out, indent=0, sort_keys=False)
        if a.output:
            a.output.write_text(text + "\n", encoding="utf-8")
            print(f"wrote {a.output}: {', '.join(f'{k} {len(v)}' for k, v in names.items())}")
        else:
            print(text)
        return 0
    return 0 if load(a.ckpt, a.generate, a.dtype) else 1


if __name__ == "__main__":
    sys.exit(main())
