"""Official speech-tokenizer encoder at full size: random weights, timings, reference codes (venv-ref only).

    flock /tmp/fullsize.lock .venv-ref/bin/python benchmarks/codec_encoder_official.py WORK_DIR
        [--seconds 3,10,30] [--threads 2] [--repeat 2]
    ... codec_encoder_official.py WORK_DIR --serve [--threads N]   (used by codec_encoder_speed.py --compare)

Builds the Mimi encoder with the real 12 Hz shapes (ENCODER_CONFIG below) and non-degenerate random weights
(tests/reference/oracle.randomise; codebook scale matched to the projected latents), saves it as
WORK_DIR/speech_tokenizer/{config.json,model.safetensors} (encoder tensors only) and times the official encode
(MimiModel.encode, first encoder_valid_num_quantizers codes, as Qwen3TTSTokenizerV2Model.encode) on speech
audio of each length. Writes WORK_DIR/official.npz: audio_<s>, codes_<s>, time_<s> (best of --repeat, seconds).
benchmarks/codec_encoder_speed.py then runs the ncnn encoder on the same weights and inputs.
--serve loads the saved encoder and answers lines "SECONDS" on stdin with one JSON line {"wall", "cpu"} (one
encode of official.npz's audio_<SECONDS>), so a driver can alternate it with the ncnn encoder on a busy machine.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "reference"))
import numpy as np  # noqa: E402
import oracle  # noqa: E402  (torchaudio stub, qwen_tts, randomise)
import soundfile as sf  # noqa: E402
import soxr  # noqa: E402
import torch  # noqa: E402
from qwen_tts.core.tokenizer_12hz.modeling_qwen3_tts_tokenizer_v2 import (  # noqa: E402
    Qwen3TTSTokenizerV2Encoder,
)
from safetensors.torch import save_file  # noqa: E402
from transformers import MimiConfig  # noqa: E402

# speech_tokenizer/config.json "encoder_config" of the real 12 Hz tokenizer
ENCODER_CONFIG = dict(
    sampling_rate=24000, frame_rate=12.5, audio_channels=1, hidden_size=512, num_filters=64,
    num_residual_layers=1, upsampling_ratios=[8, 6, 5, 4], kernel_size=7, last_kernel_size=3,
    residual_kernel_size=3, dilation_growth_rate=2, use_causal_conv=True, pad_mode="constant", compress=2,
    trim_right_ratio=1.0, codebook_size=2048, codebook_dim=256, num_quantizers=32, use_conv_shortcut=False,
    vector_quantization_hidden_dimension=256, num_semantic_quantizers=1, upsample_groups=512,
    num_hidden_layers=8, intermediate_size=2048, num_attention_heads=8, num_key_value_heads=8, head_dim=64,
    hidden_act="gelu", max_position_embeddings=8000, norm_eps=1e-5, use_cache=False, use_streaming=False,
    rope_theta=10000.0, sliding_window=250, attention_dropout=0.0, layer_scale_initial_scale=0.01,
    attention_bias=False, normalize=False,
)
VALID_QUANTIZERS = 16


def speech_audio(seconds: float) -> np.ndarray:
    """Fixture speech at 24 kHz (soxr HQ, channel mean), tiled to the length."""
    x, sr = sf.read(ROOT / "tests/fixtures/audio/en_48k_stereo_12s.flac", dtype="float32", always_2d=True)
    y = soxr.resample(x.mean(axis=1), sr, 24000, quality="HQ").astype(np.float32)
    n = int(round(seconds * 24000))
    return np.tile(y, -(-n // len(y)))[:n].copy()


def build(work: Path, attn: str) -> Qwen3TTSTokenizerV2Encoder:
    cfg = MimiConfig(**ENCODER_CONFIG)
    cfg._attn_implementation = attn
    torch.manual_seed(0)
    enc = Qwen3TTSTokenizerV2Encoder(cfg).float().eval()
    oracle.randomise(enc, 7)
    # match the codebook scale to the projected latents so every level is used
    lat = {}
    h = enc.quantizer.semantic_residual_vector_quantizer.input_proj.register_forward_hook(
        lambda m, i, o: lat.__setitem__("z", o))
    with torch.inference_mode():
        enc.encode(torch.from_numpy(speech_audio(2.0))[None, None], return_dict=True)
    h.remove()
    oracle.randomise(enc, 7, enc_cb_std=float(lat["z"].std()))
    sd = work / "speech_tokenizer"
    sd.mkdir(parents=True, exist_ok=True)
    tensors = {f"encoder.{k}": v.contiguous() for k, v in enc.state_dict().items()}
    save_file(tensors, str(sd / "model.safetensors"))
    config = dict(model_type="qwen3_tts_tokenizer_12hz", encoder_config=cfg.to_dict(),
                  encoder_valid_num_quantizers=VALID_QUANTIZERS, input_sample_rate=24000,
                  output_sample_rate=24000, encode_downsample_rate=1920, decode_upsample_rate=1920)
    (sd / "config.json").write_text(json.dumps(config, indent=1), encoding="utf-8")
    return enc


def load(work: Path, attn: str) -> Qwen3TTSTokenizerV2Encoder:
    from safetensors.torch import load_file

    config = json.loads((work / "speech_tokenizer" / "config.json").read_text(encoding="utf-8"))
    cfg = MimiConfig(**{k: v for k, v in config["encoder_config"].items() if k != "model_type"})
    cfg._attn_implementation = attn
    enc = Qwen3TTSTokenizerV2Encoder(cfg).float().eval()
    state = {k[len("encoder."):]: v for k, v in load_file(str(work / "speech_tokenizer" / "model.safetensors")).items()}
    enc.load_state_dict(state, strict=True)
    for m in enc.modules():  # cached codebook rows were computed from the random init
        if hasattr(m, "_embed"):
            m._embed = None
    return enc


def serve(work: Path, attn: str) -> None:
    enc = load(work, attn)
    ref = np.load(work / "official.npz")
    print("ready", flush=True)
    for line in sys.stdin:
        key = line.strip()
        audio = torch.from_numpy(ref[f"audio_{key}"])[None, None]
        w, c = time.perf_counter(), time.process_time()
        with torch.inference_mode():
            codes = enc.encode(audio, return_dict=True).audio_codes
        wall, cpu = time.perf_counter() - w, time.process_time() - c
        codes = codes[0, :VALID_QUANTIZERS, : -(-audio.shape[-1] // 1920)].T.numpy()
        same = bool(np.array_equal(codes, ref[f"codes_{key}"]))  # the reloaded encoder is the one that made them
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # process peak so far (MB)
        print(json.dumps({"wall": wall, "cpu": cpu, "same": same, "peak_mb": peak}), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("work", type=Path)
    ap.add_argument("--seconds", default="3,10,30")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--attn", default="sdpa", choices=["sdpa", "eager"])
    ap.add_argument("--serve", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    if args.serve:
        serve(args.work, args.attn)
        return
    t0 = time.perf_counter()
    enc = build(args.work, args.attn)
    print(f"built full-size encoder in {time.perf_counter() - t0:.1f} s "
          f"({sum(p.numel() for p in enc.parameters()) / 1e6:.1f} M parameters)")
    out: dict[str, np.ndarray] = {}
    for s in (float(v) for v in args.seconds.split(",")):
        audio = speech_audio(s)
        best = float("inf")
        for _ in range(args.repeat):
            t = time.perf_counter()
            with torch.inference_mode():
                codes = enc.encode(torch.from_numpy(audio)[None, None], return_dict=True).audio_codes
            best = min(best, time.perf_counter() - t)
        codes = codes[0, :VALID_QUANTIZERS, : -(-len(audio) // 1920)].T.numpy().astype(np.int64)
        key = f"{s:g}"
        out.update({f"audio_{key}": audio, f"codes_{key}": codes, f"time_{key}": np.float64(best)})
        print(f"official {s:5g} s: {best * 1000:8.0f} ms ({codes.shape[0]} frames), "
              f"process peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
    np.savez(args.work / "official.npz", **out)


if __name__ == "__main__":
    main()
