"""x-vector extraction time on the full-size speaker encoder (random weights, real 0.6B shapes: enc_dim 1024).

    flock /tmp/fullsize.lock .venv/bin/python benchmarks/speaker_speed.py [--precisions fp32,fp16,bf16]
        [--seconds 3,10,30] [--threads 2] [--repeat 5] [--enc-dim 1024]
    flock /tmp/fullsize.lock .venv-ref/bin/python benchmarks/speaker_speed.py --official   # also torch

Weights are drawn with numpy (N(0, 1/fan_in), biases N(0, 0.05^2)), stored as a safetensors file and converted
with engine.convert.speaker. References are the 12 s fixture recording tiled to each length. Prints, per
precision and length: mel time, encoder time (best of --repeat, wall and CPU), and with --official the official
torch time on the same weights and the max abs x-vector difference.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from engine import load_audio  # noqa: E402
from engine.convert import ConvertOptions  # noqa: E402
from engine.convert import speaker as conv  # noqa: E402
from engine.convert.checkpoint import SafetensorsFile  # noqa: E402
from engine.io.audio import mel_spectrogram  # noqa: E402
from engine.nets.speaker_encoder import SpeakerEncoder  # noqa: E402
from engine.runtime.bundle import Bundle  # noqa: E402
from engine.runtime.bundle_writer import BundleWriter  # noqa: E402

AUDIO = REPO / "tests" / "fixtures" / "audio" / "en_48k_stereo_12s.flac"


def random_weights(spec: conv.SpeakerSpec, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out: dict[str, np.ndarray] = {}

    def conv_(name: str, cout: int, cin: int, k: int) -> None:
        out[f"{conv.PREFIX}{name}.weight"] = (rng.standard_normal((cout, cin, k)) / np.sqrt(cin * k)).astype(np.float32)
        out[f"{conv.PREFIX}{name}.bias"] = (0.05 * rng.standard_normal(cout)).astype(np.float32)

    ch, ks = spec.channels, spec.kernels
    conv_("blocks.0.conv", ch[0], spec.mel_dim, ks[0])
    for i in range(1, len(ch) - 1):
        c, sub = ch[i], ch[i] // spec.scale
        conv_(f"blocks.{i}.tdnn1.conv", c, ch[i - 1], 1)
        for j in range(spec.scale - 1):
            conv_(f"blocks.{i}.res2net_block.blocks.{j}.conv", sub, sub, ks[i])
        conv_(f"blocks.{i}.tdnn2.conv", c, c, 1)
        conv_(f"blocks.{i}.se_block.conv1", spec.se, c, 1)
        conv_(f"blocks.{i}.se_block.conv2", c, spec.se, 1)
    conv_("mfa.conv", ch[-1], ch[-1], ks[-1])
    conv_("asp.tdnn.conv", spec.attention, 3 * ch[-1], 1)
    conv_("asp.conv", ch[-1], spec.attention, 1)
    conv_("fc", spec.enc_dim, 2 * ch[-1], 1)
    return out


class _Ckpt:
    def __init__(self, path: Path, cfg: dict):
        self.main = SafetensorsFile(path)
        self.config = {"speaker_encoder_config": cfg, "tts_model_type": "base"}


def best(fn, repeat: int) -> tuple[float, float, object]:
    walls, cpus, res = [], [], None
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        res = fn()
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    return min(walls), min(cpus), res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--precisions", default="fp32,fp16,bf16")
    ap.add_argument("--seconds", default="3,10,30")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--enc-dim", type=int, default=1024)
    ap.add_argument("--bundle-arith", action="store_true",
                    help="run fp16/bf16 bundles with their own arithmetic (default: fp32 arithmetic, as the engine)")
    ap.add_argument("--official", action="store_true", help="also time the official torch encoder (venv-ref)")
    a = ap.parse_args(argv)

    cfg = {"enc_dim": a.enc_dim}
    spec = conv.SpeakerSpec.from_config({"speaker_encoder_config": cfg})
    weights = random_weights(spec)
    base = load_audio(AUDIO)
    refs = {}
    for s in (float(x) for x in a.seconds.split(",")):
        n = int(s * 24000)
        refs[s] = np.tile(base, -(-n // base.size))[:n].astype(np.float32)
    n_params = sum(w.size for w in weights.values())
    print(f"speaker encoder: {n_params / 1e6:.2f} M parameters, enc_dim {spec.enc_dim}, threads {a.threads}, "
          f"best of {a.repeat}")

    official = {}
    if a.official:
        import torch

        sys.path.insert(0, str(REPO / "tests" / "reference"))
        import oracle  # noqa: F401  (torchaudio stub)
        from qwen_tts.core.models.configuration_qwen3_tts import Qwen3TTSSpeakerEncoderConfig
        from qwen_tts.core.models.modeling_qwen3_tts import Qwen3TTSSpeakerEncoder
        from qwen_tts.core.models.modeling_qwen3_tts import mel_spectrogram as off_mel

        torch.set_num_threads(a.threads)
        model = Qwen3TTSSpeakerEncoder(Qwen3TTSSpeakerEncoderConfig(**cfg)).eval()
        model.load_state_dict({k[len(conv.PREFIX):]: torch.from_numpy(v) for k, v in weights.items()})
        for s, y in refs.items():
            def run(y=y):
                with torch.inference_mode():
                    mel = off_mel(torch.from_numpy(y).unsqueeze(0), n_fft=1024, num_mels=128, sampling_rate=24000,
                                  hop_size=256, win_size=1024, fmin=0, fmax=12000).transpose(1, 2)
                    return model(mel)[0].numpy()
            run()
            wall, cpu, x = best(run, a.repeat)
            official[s] = x
            print(f"official torch       {s:5.1f} s ref: mel+encoder {wall * 1000:8.1f} ms wall {cpu * 1000:8.1f} ms cpu")

    with tempfile.TemporaryDirectory(prefix="speaker-bench-") as tmp:
        st = Path(tmp) / "model.safetensors"
        save_file(weights, str(st))
        for prec in a.precisions.split(","):
            ckpt = _Ckpt(st, cfg)
            with BundleWriter(Path(tmp) / f"bundle_{prec}") as w:
                w.manifest["precision"] = prec
                conv.convert(ckpt, w, ConvertOptions(prec))
                path = w.finish()
            ckpt.main.close()
            t0 = time.perf_counter()
            bundle = Bundle.open(path)
            arith = bundle.runtime_precision if a.bundle_arith else "fp32"
            enc = SpeakerEncoder(bundle, threads=a.threads, precision=arith)
            load_ms = (time.perf_counter() - t0) * 1000
            for s, y in refs.items():
                enc.xvector(y)  # warm-up
                mw, mc, mel = best(lambda y=y: mel_spectrogram(y), a.repeat)
                ew, ec, x = best(lambda mel=mel, enc=enc: enc.xvector_from_mel(mel), a.repeat)
                line = (f"ours {prec:4s} bundle, {arith} arithmetic (load {load_ms:4.0f} ms) {s:5.1f} s ref ({mel.shape[0]} frames): "
                        f"mel {mw * 1000:6.1f} ms, encoder {ew * 1000:7.1f} ms wall {ec * 1000:7.1f} ms cpu, "
                        f"total {(mw + ew) * 1000:7.1f} ms")
                if s in official:
                    line += f", max|x - official| {np.abs(x - official[s]).max():.2e}"
                print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
