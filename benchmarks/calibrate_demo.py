"""Find the constants tools/random_checkpoint/presets.py presets use so random voices are audible and demo runs end on their own.

Dev tool, reference environment (.venv-ref). The constants are then written into tools/random_checkpoint/presets.py PRESETS.

    python benchmarks/calibrate_demo.py decoder demo|0.6b     decoder output gain and bias (target std 0.2, no DC)
    python benchmarks/calibrate_demo.py eos [--frames 120]     demo talker EOS-row gain for a median sampled run
                                                               of about 50 frames (4 s)

Full-size presets: wrap in `flock /tmp/fullsize.lock ...`.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))
import _official  # noqa: E402, F401
import numpy as np  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(2)

from qwen_tts import Qwen3TTSModel  # noqa: E402
from qwen_tts.core.tokenizer_12hz.configuration_qwen3_tts_tokenizer_v2 import (  # noqa: E402
    Qwen3TTSTokenizerV2Config,
)
from qwen_tts.core.tokenizer_12hz.modeling_qwen3_tts_tokenizer_v2 import Qwen3TTSTokenizerV2Model  # noqa: E402

from tools import random_checkpoint as demo  # noqa: E402

TARGET_STD = 0.2


def calibrate_decoder(name: str, frames: int = 40) -> None:
    p = dataclasses.replace(demo.get_preset(name), out_gain=1.0, out_bias=0.0)
    cfg = {k: v for k, v in demo.speech_config(p).items()
           if k not in ("architectures", "model_type", "transformers_version", "dtype")}
    model = Qwen3TTSTokenizerV2Model(Qwen3TTSTokenizerV2Config(**cfg)).eval()
    # the writer seeds the speech tokenizer file with seed + 1
    sd = {s.name[len("decoder."):]: torch.from_numpy(demo.tensor_values(s, 1))
          for s in demo.codec_decoder_tensors(p)}
    sd["decoder.6.conv.bias"] = torch.zeros(1)
    model.decoder.load_state_dict(sd, strict=True)
    pre: dict[str, torch.Tensor] = {}
    model.decoder.decoder[-1].register_forward_hook(lambda _m, _i, o: pre.__setitem__("y", o))
    codes = torch.randint(0, p.codebook, (1, 16, frames), generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        model.decoder(codes)
    y = pre["y"].flatten().numpy().astype(np.float64)
    gain = TARGET_STD / y.std()
    print(f"{name}: pre-clamp std {y.std():.5f} mean {y.mean():+.5f} with res_gain {p.res_gain}")
    print(f"  -> out_gain={gain:.5g}, out_bias={-gain * y.mean():.5g}")


def calibrate_eos(frames: int) -> None:
    p = dataclasses.replace(demo.get_preset("demo"), eos_gain=1.0)
    with tempfile.TemporaryDirectory() as tmp:
        ckpt = demo.write_random_checkpoint(Path(tmp) / "ck", p)
        tts = Qwen3TTSModel.from_pretrained(str(ckpt), dtype=torch.float32, local_files_only=True)
    talker = tts.model.talker
    tc = tts.model.config.talker_config
    logits: list[np.ndarray] = []
    # a forward hook, not a wrapper: HF generate validates kwargs against forward's signature
    hook = talker.register_forward_hook(
        lambda _m, _i, out: logits.append(out.logits[0, -1].detach().double().numpy().copy()))
    runs = []
    texts = ["Hello, this is the demo voice.", "今天天气很好。", "A somewhat longer sentence, to see how far it goes."]
    for i, text in enumerate(texts):
        torch.manual_seed(i)
        logits.clear()
        noise = np.random.default_rng(i).standard_normal(24000 * 2).astype(np.float32) * 0.1
        res = tts.generate_voice_clone(text=text, language="auto", ref_audio=(noise, 24000), x_vector_only_mode=True,
                                       max_new_tokens=frames + 1, eos_token_id=tc.codec_pad_id)
        del res
        runs.append(np.stack(logits))
        print(f"run {i}: {len(logits)} steps recorded")
    hook.remove()

    eos, cb, vocab = tc.codec_eos_token_id, p.codebook, tc.vocab_size
    for g in (1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0):
        medians = []
        for lg in runs:
            x = lg.copy()
            x[:, eos] *= g
            x[:, cb:vocab] = np.where(np.arange(cb, vocab) == eos, x[:, cb:vocab], -np.inf)
            x /= 0.9  # temperature; top-k 50 next
            kth = np.sort(x, axis=1)[:, -50][:, None]
            x = np.where(x >= kth, x, -np.inf)
            pr = np.exp(x - x.max(1, keepdims=True))
            pr /= pr.sum(1, keepdims=True)
            pe = pr[:, eos]
            pe[:2] = 0.0  # EOS masked for the first two steps
            survive = np.cumprod(1 - pe)
            medians.append(int(np.searchsorted(-survive, -0.5)) if survive[-1] < 0.5 else len(pe))
        print(f"eos_gain {g}: median frames per run {medians}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("decoder")
    d.add_argument("preset")
    e = sub.add_parser("eos")
    e.add_argument("--frames", type=int, default=120)
    a = ap.parse_args()
    if a.cmd == "decoder":
        calibrate_decoder(a.preset)
    else:
        calibrate_eos(a.frames)
    return 0


if __name__ == "__main__":
    sys.exit(main())
