"""The ncnn speaker encoder against the official Qwen3TTSSpeakerEncoder on configurations the fixture models do
not cover: even kernels (torch's asymmetric 'same' padding), Res2Net scale 1 and 2, a single SE-Res2Net block,
large dilations, the shortest legal input and a long one. Random weights, official mel from official audio.

Needs ncnn in the reference environment (tests/reference/requirements.txt installs it; fails without it).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.reference

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reference"))
import oracle  # noqa: E402, F401  (torchaudio stub before qwen_tts; a missing package fails, never skips)
import torch  # noqa: E402
from qwen_tts.core.models.configuration_qwen3_tts import Qwen3TTSSpeakerEncoderConfig  # noqa: E402
from qwen_tts.core.models.modeling_qwen3_tts import Qwen3TTSSpeakerEncoder, mel_spectrogram  # noqa: E402
from safetensors.numpy import save_file  # noqa: E402

from engine.convert import ConvertOptions  # noqa: E402
from engine.convert import speaker as conv  # noqa: E402
from engine.convert.checkpoint import SafetensorsFile  # noqa: E402
from engine.io.audio import load_audio  # noqa: E402
from engine.nets.speaker_encoder import SpeakerEncoder  # noqa: E402
from engine.runtime.bundle import Bundle  # noqa: E402
from engine.runtime.bundle_writer import BundleWriter  # noqa: E402

AUDIO = Path(__file__).resolve().parents[1] / "fixtures" / "audio"
CONFIGS = {
    "even_kernels": dict(enc_dim=40, enc_channels=[24, 24, 24, 48], enc_kernel_sizes=[4, 3, 2, 2],
                         enc_dilations=[1, 2, 3, 2], enc_attention_channels=12, enc_res2net_scale=3,
                         enc_se_channels=12),
    "scale1_one_block": dict(enc_dim=16, enc_channels=[20, 20, 20], enc_kernel_sizes=[3, 5, 1],
                             enc_dilations=[2, 3, 1], enc_attention_channels=8, enc_res2net_scale=1,
                             enc_se_channels=4),
    "scale2_wide_dilation": dict(enc_dim=32, enc_channels=[16, 16, 16, 16, 16, 64], enc_kernel_sizes=[5, 3, 3, 3, 3, 3],
                                 enc_dilations=[1, 2, 5, 7, 9, 2], enc_attention_channels=8, enc_res2net_scale=2,
                                 enc_se_channels=8),
}


class _Ckpt:
    def __init__(self, path: Path, cfg: dict):
        self.main = SafetensorsFile(path)
        self.config = {"speaker_encoder_config": cfg, "tts_model_type": "base"}


def _official(cfg: dict, seed: int) -> Qwen3TTSSpeakerEncoder:
    torch.manual_seed(seed)
    enc = Qwen3TTSSpeakerEncoder(Qwen3TTSSpeakerEncoderConfig(**cfg)).eval()
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for p in enc.parameters():
            scale = 1 / math.sqrt(p[0].numel()) if p.ndim > 1 else 0.05
            p.copy_(torch.randn(p.shape, generator=g) * scale)
    return enc


def _mel(a24: np.ndarray) -> torch.Tensor:
    return mel_spectrogram(torch.from_numpy(a24).unsqueeze(0), n_fft=1024, num_mels=128, sampling_rate=24000,
                           hop_size=256, win_size=1024, fmin=0, fmax=12000).transpose(1, 2)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_speaker_encoder_configs(name, tmp_path):
    cfg = CONFIGS[name]
    enc = _official(cfg, seed=len(name))
    st = tmp_path / "model.safetensors"
    save_file({conv.PREFIX + k: v.detach().numpy().copy() for k, v in enc.state_dict().items()}, str(st))
    ckpt = _Ckpt(st, cfg)
    with BundleWriter(tmp_path / "bundle") as w:
        w.manifest["precision"] = "fp32"
        conv.convert(ckpt, w, ConvertOptions("fp32"))
        ours = SpeakerEncoder(Bundle.open(w.finish()), threads=1)
    ckpt.main.close()
    audio = load_audio(AUDIO / "en_48k_stereo_12s.flac")
    mels = {"full": _mel(audio), "one_second": _mel(audio[:24000])}
    mels["shortest"] = mels["full"][:, 100 : 100 + ours.min_frames]
    for label, mel in mels.items():
        with torch.no_grad():
            want = enc(mel)[0].numpy()
        got = ours.xvector_from_mel(mel[0].numpy())
        err = float(np.abs(got - want).max())
        print(f"{name} {label} ({mel.shape[1]} frames): max abs error {err:.3g}")
        assert err <= 1e-4, (name, label, err)
