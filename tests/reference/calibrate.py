"""Print the statistics used to choose each TinySpec's out_gain / enc_cb_std / eos_gain.

Dev tool (not part of the fixture run): python tests/reference/calibrate.py [model ...]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import librosa  # noqa: E402
import numpy as np  # noqa: E402
import oracle  # noqa: E402
import torch  # noqa: E402


def main(names: list[str]) -> None:
    audio = oracle.FIXTURES / "audio" / "en_48k_stereo_12s.flac"
    y, sr = librosa.load(str(audio), sr=None, mono=True)
    y24 = librosa.resample(y, orig_sr=sr, target_sr=24000).astype(np.float32)
    for name in names:
        spec = oracle.SPECS[name]
        model, st, tok, _ = oracle.build_models(spec)
        # decoder output scale before the clamp
        pre = {}
        h = st.decoder.decoder[-1].register_forward_hook(lambda m, i, o, pre=pre: pre.__setitem__("y", o))
        g = torch.Generator().manual_seed(0)
        codes = torch.randint(0, spec.codebook_size, (1, 16, 60), generator=g)
        with torch.inference_mode():
            st.decoder(codes)
        h.remove()
        yv = pre["y"].flatten()
        mx = []
        hs = [m.register_forward_pre_hook(lambda m, a, mx=mx: mx.append(float(a[0].abs().max())))
              for m in st.decoder.modules() if isinstance(m, oracle.SnakeBeta)]
        with torch.inference_mode():
            st.decoder(codes)
        for hh in hs:
            hh.remove()
        print(f"  max |x| into SnakeBeta: {max(mx):.2f}")
        print(f"{name}: decoder pre-clamp std {yv.std():.4f} clip>1 {(yv.abs() > 1).float().mean():.4f}")
        # Mimi: projected latent scale vs codebook
        lat = {}
        q = st.encoder.quantizer.semantic_residual_vector_quantizer
        h = q.input_proj.register_forward_hook(lambda m, i, o, lat=lat: lat.__setitem__("z", o))
        with torch.inference_mode():
            enc = st.encode(torch.from_numpy(y24)[None], torch.ones(1, len(y24), dtype=torch.long))
        h.remove()
        c = enc.audio_codes[0].numpy()
        print(f"  mimi latent std {lat['z'].std():.4f}; codes {c.shape}; unique per level "
              f"{[len(np.unique(c[:, i])) for i in range(16)]}")
    return


if __name__ == "__main__":
    main(sys.argv[1:] or list(oracle.SPECS))
