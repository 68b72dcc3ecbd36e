"""The x-vector of a reference voice: mel spectrogram (numpy) -> ECAPA-TDNN speaker encoder (ncnn)."""

from __future__ import annotations

import ncnn
import numpy as np

from ..errors import AudioError, BundleError
from ..io.audio import HOP, N_FFT, mel_spectrogram
from ..runtime.bundle import Bundle
from ..runtime.manifest_parts import SpeakerPart


class SpeakerEncoder:
    """Equals the official Qwen3TTSForConditionalGeneration.extract_speaker_embedding on 24 kHz audio."""

    def __init__(self, bundle: Bundle, threads: int = 2, precision: str = "fp32"):
        """precision: ncnn arithmetic for this one network. fp32 by default for every bundle: the weights stay as
        the bundle stores them (fp16 bundles keep fp16 weights), but bf16/fp16 activations gave no speed-up here
        (full size, 2 threads) while bf16 costs ~0.5 % x-vector error. Pass bundle.runtime_precision to follow
        the bundle instead."""
        part = bundle.record(SpeakerPart)
        if not part.present:
            raise BundleError(
                "this model has no speaker encoder (it is not a Base model); voice cloning needs a Qwen3-TTS Base model"
            )
        self.dim = part.enc_dim
        self.min_frames = part.min_frames
        self._input, self._output = part.input, part.output
        self._net = bundle.net(part.graph, threads, precision=precision)

    def xvector_from_mel(self, mel: np.ndarray) -> np.ndarray:
        """(frames, 128) mel -> (D,) x-vector."""
        mel = np.asarray(mel, dtype=np.float32)
        if mel.ndim != 2 or mel.shape[0] < self.min_frames:
            raise AudioError(f"reference audio is too short for the speaker encoder ({mel.shape[0]} mel frames)")
        x = np.ascontiguousarray(mel.T)  # (channels, time): ncnn h = channels, w = time
        ex = self._net.create_extractor()
        m_in = ncnn.Mat(x).clone()
        ex.input(self._input, m_in)
        ret, out = ex.extract(self._output)
        if ret != 0:
            raise BundleError(f"speaker encoder failed to run (ncnn error {ret})")
        vec = np.array(out, dtype=np.float32).reshape(-1).copy()
        if vec.shape != (self.dim,):
            raise BundleError(f"speaker encoder returned shape {vec.shape}, expected ({self.dim},)")
        return vec

    def xvector(self, audio24k: np.ndarray) -> np.ndarray:
        """24 kHz mono float32 audio (as load_audio returns) -> (D,) float32 x-vector. Any length."""
        audio = np.asarray(audio24k, dtype=np.float32)
        if audio.ndim != 1:
            raise AudioError(f"speaker encoder input must be mono 1-D audio, not shape {audio.shape}")
        min_samples = (self.min_frames - 1) * HOP + N_FFT - 2 * ((N_FFT - HOP) // 2)
        if audio.size < max(min_samples, (N_FFT - HOP) // 2 + 1):
            raise AudioError(f"reference audio is too short for the speaker encoder ({audio.size} samples)")
        return self.xvector_from_mel(mel_spectrogram(audio))
