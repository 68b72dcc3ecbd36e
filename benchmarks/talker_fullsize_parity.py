"""Full-size talker + code predictor parity against the official implementation (teacher-forced greedy).

    flock /tmp/fullsize.lock .venv-ref/bin/python benchmarks/talker_fullsize_parity.py ref CKPT OUT.npz [--frames 16]
    flock /tmp/fullsize.lock .venv/bin/python benchmarks/talker_fullsize_parity.py ours OUT.npz BUNDLE [BUNDLE ...]

`ref` (torch + qwen-tts) runs the official talker generate (greedy, repetition penalty 1.05, EOS masked for two
steps, top-1024 suppression) on random prompt rows and records codes and raw logits. `ours` (ncnn + numpy) feeds
the same rows to each bundle's Talker/CodePredictor, teacher-forced on the official frames, and prints code
mismatches and the talker logit error per bundle (an fp32 bundle also runs with its weights widened to fp32).
The checkpoint can be made with tools.random_checkpoint.write_random_checkpoint(dest, "0.6b") (benchmarks/talker_speed.py does).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def ref(ckpt: Path, out: Path, frames: int) -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import _official  # noqa: F401  (torchaudio stub before qwen_tts)
    import torch
    from qwen_tts.core.models import Qwen3TTSForConditionalGeneration

    torch.set_num_threads(2)
    model = Qwen3TTSForConditionalGeneration.from_pretrained(str(ckpt), dtype=torch.float32,
                                                             attn_implementation="sdpa").eval()
    tk = model.talker
    cfg = tk.config
    vocab, eos = cfg.vocab_size, cfg.codec_eos_token_id
    rng = np.random.default_rng(0)
    pre = torch.from_numpy(rng.standard_normal((1, 14, cfg.hidden_size)).astype(np.float32) * 0.3)
    trail = torch.from_numpy(rng.standard_normal((1, 6, cfg.hidden_size)).astype(np.float32) * 0.3)
    pad = torch.from_numpy(rng.standard_normal((1, 1, cfg.hidden_size)).astype(np.float32) * 0.3)
    logits: list[np.ndarray] = []
    tk.register_forward_hook(lambda _m, _a, o: logits.append(o.logits[0, -1].float().numpy().copy()))
    with torch.inference_mode():
        r = tk.generate(
            inputs_embeds=pre, attention_mask=torch.ones(1, pre.shape[1], dtype=torch.long),
            trailing_text_hidden=trail, tts_pad_embed=pad, max_new_tokens=frames, min_new_tokens=2,
            do_sample=False, subtalker_dosample=False, eos_token_id=eos, repetition_penalty=1.05,
            suppress_tokens=[i for i in range(vocab - 1024, vocab) if i != eos],
            output_hidden_states=True, return_dict_in_generate=True,
        )
    codes = torch.stack([h[-1] for h in r.hidden_states if h[-1] is not None], 1)[0].numpy()
    np.savez(out, prefill=pre[0].numpy(), trailing=trail[0].numpy(), tpad=pad[0, 0].numpy(), codes=codes,
             sampled=r.sequences[0].numpy(), logits=np.stack(logits))
    print(f"official: {codes.shape[0]} frames -> {out}")


def ours(ref_file: Path, bundles: list[Path]) -> None:
    sys.path.insert(0, str(ROOT))
    from engine.nets.code_predictor import CodePredictor
    from engine.nets.talker import Talker
    from engine.runtime.bundle import Bundle
    from tests.test_talker import official_processors, rel_err

    z = np.load(ref_file)
    codes = z["codes"]
    for path in bundles:
        bundle = Bundle.open(path)
        cfg = bundle.config["talker_config"]
        eos, vocab = int(cfg["codec_eos_token_id"]), int(cfg["vocab_size"])
        variants = [True, False] if bundle.precision == "fp32" else [True]
        for compact in variants:
            talker = Talker(bundle, 2, compact_weights=compact)
            cp = CodePredictor(bundle, 2, compact_weights=compact)
            seq, hidden, logits = talker.start(z["prefill"])
            errs = [rel_err(logits, z["logits"][0])]
            got = np.zeros_like(codes)
            history: list[int] = []
            for k in range(len(codes)):
                got[k, 0] = int(np.argmax(official_processors(logits, history, k, eos=eos, vocab=vocab,
                                                              penalty=1.05)))
                history.append(int(codes[k, 0]))
                got[k, 1:] = cp.predict(hidden, int(codes[k, 0]), lambda lg, _g: int(np.argmax(lg)))
                text = z["trailing"][k] if k < len(z["trailing"]) else z["tpad"]
                hidden, logits = talker.step(seq, cp.feedback(codes[k]) + text)
                if k + 1 < len(z["logits"]):
                    errs.append(rel_err(logits, z["logits"][k + 1]))
            name = f"{path.name}{'' if compact else ' (weights widened)'}"
            print(f"{name}: {int((got != codes).sum())} of {codes.size} codes differ over {len(codes)} frames; "
                  f"talker logits max err {max(errs):.2e} of scale")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("ref")
    r.add_argument("ckpt", type=Path)
    r.add_argument("out", type=Path)
    r.add_argument("--frames", type=int, default=16)
    o = sub.add_parser("ours")
    o.add_argument("ref", type=Path)
    o.add_argument("bundles", type=Path, nargs="+")
    args = ap.parse_args()
    if args.cmd == "ref":
        ref(args.ckpt, args.out, args.frames)
    else:
        ours(args.ref, args.bundles)


if __name__ == "__main__":
    main()
