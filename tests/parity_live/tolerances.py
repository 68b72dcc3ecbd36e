"""How far a float32 fixture may move when the official code runs on another CPU, derived per quantity.

Why not bit-identical: the official implementation is float32 PyTorch, and the order in which a CPU kernel
adds up a reduction depends on the instruction set (AVX2 / AVX-512 kernels, MKL / oneDNN code paths) and on the
thread count. Each order rounds differently. (The outputs are regenerated from the committed checkpoints: see
conftest.py for why, and test_models_identical for the checkpoints' own bound.)

Checked on: fixtures made with AVX2 kernels against AVX-512 ones, 1 against 2 torch threads
(ORACLE_TORCH_THREADS=2), and against no SIMD at all with 2 threads (ATEN_CPU_CAPABILITY=default): the largest
difference was 1.6 % of its tolerance (CustomVoice trailing text rows), waveforms 1.2 %, logits 0.2 %. The bound
is the worst case, so it is loose for deep chains; the exact integer codes are what catches a wrong computation.

The derivation (Higham, "Accuracy and Stability of Numerical Algorithms", Thm 3.1/3.5): a float32 sum of n
terms, in any order, is within gamma_n * sum|terms| of the exact sum, gamma_n = n*u/(1 - n*u), u = 2^-24.
Two different orders are therefore within about 2*n*u*sum|terms| of each other. A value that passes through a
chain of reductions (a network) collects the rounding of every reduction on its path; the normalised layers
of these models (RMSNorm, LayerNorm, BatchNorm) keep relative errors from growing, so to first order the
relative errors add: L = sum of the reduction lengths along the chain. The sum of |terms| is not stored, so the
array's own magnitude (max |value|) stands in for it:

    tolerance = 2 * u * L * max|reference|

L is computed below from the model's own config (tests/fixtures/models/<model>/config.json) and the case
(sequence length, frames), one function per quantity, so a new model or case gets its own figure.

The log-mel is the exception: log() turns an absolute error of the mel power into a relative one, so a quiet
bin (far below the loudest bin of its frame) carries a larger error than a loud one; its tolerance is per
element (see mel_tolerance).

Integers (token ids, codec codes, sampled ids) are compared exactly: a greedy argmax (talker, code predictor)
or an RVQ argmin (codec encoder) can only change under float noise when two candidates are within the noise
of each other (a near-tie). The live test does not loosen for that: it fails and names the first differing
position, so the case's text can be changed in make_fixtures.py (the CustomVoice/VoiceDesign cases already
refuse candidates whose greedy margin is below MIN_MARGIN; their stored min_margin is compared like a logit).
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import numpy as np

U = 2.0**-24  # float32 unit roundoff

# Speaker-encoder mel (qwen_tts mel_spectrogram as called by extract_speaker_embedding).
MEL_N_FFT = 1024
MEL_BINS = MEL_N_FFT // 2 + 1


@cache
def _config(models_dir: Path, model: str) -> tuple[dict, dict]:
    main = json.loads((models_dir / model / "config.json").read_text(encoding="utf-8"))
    speech = json.loads((models_dir / model / "speech_tokenizer" / "config.json").read_text(encoding="utf-8"))
    return main, speech


def transformer_chain(layers: int, hidden: int, heads: int, head_dim: int, intermediate: int, seq: int) -> int:
    """Reduction lengths along one token's path through pre-norm attention + gated MLP layers."""
    per_layer = (
        2 * hidden  # the two RMSNorms
        + hidden  # q/k/v projections
        + 2 * head_dim  # q/k norm, q.k
        + 2 * seq  # softmax denominator, probabilities x values
        + heads * head_dim  # output projection
        + hidden  # gate/up projections
        + intermediate  # down projection
    )
    return layers * per_layer + hidden  # + final norm


def mel_chain() -> int:
    """STFT (bounded as a direct DFT) then the mel filterbank."""
    return MEL_N_FFT + MEL_BINS


def speaker_chain(spk: dict, mel_frames: int) -> int:
    """ECAPA-TDNN: TDNN, SE-Res2Net blocks, feature aggregation, attentive statistics pooling, projection."""
    ch, ks, scale = spk["enc_channels"], spk["enc_kernel_sizes"], spk["enc_res2net_scale"]
    n = mel_chain() + spk["mel_dim"] * ks[0]
    for i in range(1, len(ch) - 1):
        sub = ch[i] // scale
        n += ch[i - 1] + (scale - 1) * sub * ks[i] + ch[i]  # 1x1, chained res2net convs, 1x1
        n += mel_frames + ch[i] + spk["enc_se_channels"]  # squeeze-excitation: time mean, two 1x1
    n += sum(ch[1:-1]) * ks[-1]  # feature aggregation
    n += 2 * mel_frames + 3 * ch[-1] + spk["enc_attention_channels"]  # global stats, attention convs
    n += 2 * mel_frames  # weighted mean and std over time
    return n + 2 * ch[-1]  # final 1x1


def talker_input_chain(talker: dict, spk_chain: int) -> int:
    """Prefill/trailing rows: text projection MLP plus summed codec embeddings, or the x-vector row."""
    text = 2 * talker["text_hidden_size"] + talker["num_code_groups"] + 1
    return max(text, spk_chain)


def logits_chain(talker: dict, input_chain: int, seq: int) -> int:
    body = transformer_chain(talker["num_hidden_layers"], talker["hidden_size"], talker["num_attention_heads"],
                             talker["head_dim"], talker["intermediate_size"], seq)
    return input_chain + body + talker["hidden_size"]  # + codec head


def decoder_chain(dec: dict, frames: int) -> int:
    """12 Hz speech decoder: RVQ sum, pre-conv, windowed transformer, ConvNeXt upsampling, conv vocoder."""
    n = dec["num_quantizers"] + dec["codebook_dim"] + 3 * dec["codebook_dim"]  # RVQ sum, projection, pre-conv
    n += dec["latent_dim"] + transformer_chain(
        dec["num_hidden_layers"], dec["hidden_size"], dec["num_attention_heads"], dec["head_dim"],
        dec["intermediate_size"], min(frames, dec["sliding_window"])) + dec["hidden_size"]
    latent = dec["latent_dim"]
    for factor in dec["upsampling_ratios"]:
        n += latent * factor + 7 + latent + latent + 4 * latent  # transposed conv, ConvNeXt block
    n += latent * 7
    dim = dec["decoder_dim"]
    for _ in dec["upsample_rates"]:
        n += dim * 2  # transposed conv: 2*rate taps at stride rate -> 2 taps per output, dim channels
        dim //= 2
        n += 3 * (dim * 7 + dim)  # three residual units
    return n + dim * 7


def _mel_frames(entries: list[dict], model: str, audio: str) -> int:
    for e in entries:
        if e.get("kind") == "speaker" and e["model"] == model and e["audio"] == audio:
            return int(e["mel_frames"])
    return max(int(e["mel_frames"]) for e in entries if e.get("kind") == "speaker")


def reduction_length(entry: dict, key: str, entries: list[dict], models_dir: Path) -> int:
    """L for array `key` of the fixture described by `entry` (a cases.json entry; None for common files)."""
    main, speech = _config(models_dir, entry["model"])
    talker, spk, dec = main["talker_config"], main["speaker_encoder_config"], speech["decoder_config"]
    kind = entry["kind"]
    audio = entry.get("audio") or entry.get("ref_audio") or ""
    spk_chain = speaker_chain(spk, _mel_frames(entries, entry["model"], audio)) if audio else 0
    if key == "xvector":
        return spk_chain
    if key in ("prefill", "trailing"):
        return talker_input_chain(talker, spk_chain)
    if key in ("logits", "min_margin"):
        seq = int(entry["prefill_rows"]) + int(entry["frames"])
        return logits_chain(talker, talker_input_chain(talker, spk_chain), seq)
    if key == "wav":
        frames = int(entry["frames"]) + int(entry.get("ref_frames", 0))
        return decoder_chain(dec, frames)
    raise KeyError(f"no tolerance rule for {kind}:{key}; derive one in tests/parity_live/tolerances.py")


def mel_tolerance(ref: np.ndarray) -> np.ndarray:
    """Per-element tolerance of a log-mel (frames x bins).

    The mel power m of a frame is a sum of non-negative filterbank terms over an FFT whose rounding is
    relative to the frame's energy: |dm| <= 2*u*L*max_frame(m). log() divides by m itself, so
    |d log m| <= 2*u*L*exp(max_frame(log m) - log m)."""
    row_max = ref.max(axis=-1, keepdims=True).astype(np.float64)
    return 2 * U * mel_chain() * np.exp(row_max - ref.astype(np.float64))


def resample_length(sample_rate: int) -> int:
    """Input samples summed into one 24 kHz sample by the official loader's resampler (librosa, soxr_hq),
    measured as the support of its impulse response; 0 when no resampling happens (the copy is exact)."""
    if sample_rate == 24000:
        return 0
    import librosa

    impulse = np.zeros(4 * sample_rate, dtype=np.float32)
    impulse[2 * sample_rate] = 1.0
    h = librosa.resample(impulse, orig_sr=sample_rate, target_sr=24000)
    support_out = int(np.count_nonzero(np.abs(h) > 0))
    return int(np.ceil(support_out * sample_rate / 24000))


def tolerance(entry: dict | None, key: str, ref: np.ndarray, arrays: dict, entries: list[dict],
              models_dir: Path) -> np.ndarray | float:
    """Absolute tolerance (scalar or per element) for float array `key` of one fixture file."""
    if key == "mel":
        return mel_tolerance(ref)
    if key == "audio24k":
        return 2 * U * resample_length(int(arrays["sample_rate"])) * float(np.abs(ref).max())
    if entry is None:
        raise KeyError(f"no cases.json entry for a file with float array {key!r}")
    scale_of = "logits" if key == "min_margin" else key  # a margin is a difference of two logits
    scale = float(np.abs(arrays[scale_of]).max())
    factor = 2 if key == "min_margin" else 1
    return factor * 2 * U * reduction_length(entry, key, entries, models_dir) * scale
