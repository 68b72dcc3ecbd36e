"""Whisper fixtures: tiny random checkpoints, reference speech, and transformers' outputs on them.

Steps (all offline but `vocab`, which fetches one sdist from PyPI with pip):
    vocab    the multilingual vocabulary openai-whisper ships (whisper/assets/multilingual.tiktoken in its sdist)
             -> vocab.json, merges.txt and the special tokens, as the hub's Whisper tokenizers lay them out
             (transformers' TikTokenConverter's merge rule); kept in tests/fixtures/whisper/tokenizer/
    audio    espeak-ng speech in several languages and sample rates, 1 s to past 30 s, and silence
    models   two tiny random checkpoints in the hub's layout, from fixed seeds (their vocab.json and merges.txt
             are links to the ones in tokenizer/, the same bytes):
             tinywhisper80  (80 mel bins, 99 languages, like whisper-tiny ... large-v2)
             tinywhisper128 (128 mel bins, 100 languages with <|yue|>, like large-v3 / large-v3-turbo)
    outputs  WhisperProcessor + WhisperForConditionalGeneration.generate (greedy) on every clip: the log-mel
             features, the detected language, the token ids, the text; also with the language given

Run in the reference environment (.venv-ref: torch, transformers 4.57.3, librosa, soundfile):
    .venv-ref/bin/python tests/reference/make_whisper_fixtures.py [--steps vocab,audio,models,outputs] [--out DIR]
The live tier (tests/parity_live/test_whisper_live.py) runs `models,outputs` into a temporary folder and compares.
"""

from __future__ import annotations

import argparse
import ast
import base64
import hashlib
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
FIXTURES = HERE.parent / "fixtures"
sys.path.insert(0, str(HERE))

WHISPER_SDIST = "openai-whisper==20250625"
VOCAB_ASSET = "whisper/assets/multilingual.tiktoken"
VOCAB_SHA256 = "b34b360dbb493e781e479794586d661700670d65564001f23024971d1f2fa126"
TOKENIZER_PY = "whisper/tokenizer.py"
N_TIMESTAMPS = 1501  # <|0.00|> ... <|30.00|>

# name -> (seed, mel bins, languages (99 or 100), d_model, encoder layers, decoder layers, heads, ffn, init_std,
#          eos gain). Random weights never end a transcript by themselves: the end-of-text row of the (tied) output
# table gets `eos gain` times the direction of the final norm's bias, chosen (by trying 1.7-3.1) so that some
# clips end after a few tokens and others run to the 448-token limit.
MODELS = {
    "tinywhisper80": (3801, 80, 99, 32, 2, 2, 2, 64, 0.2, 1.7),
    "tinywhisper128": (3802, 128, 100, 48, 2, 3, 3, 80, 0.2, 3.1),
}

# (file, espeak voice, speed, text, language code, sample rate, channels, subtype, seconds, peak)
CLIPS = [
    ("en_16k_1s.wav", "en-us", 175, "Hello there.", "en", 16000, 1, "PCM_16", 1.2, 0.7),
    ("de_8k_4s.wav", "de", 160, "Guten Morgen, wie geht es dir heute?", "de", 8000, 1, "PCM_16", 4.0, 0.6),
    ("fr_48k_stereo_5s.flac", "fr", 165, "Bonjour, je voudrais un café et un croissant, s'il vous plaît.", "fr",
     48000, 2, "PCM_16", 5.0, 0.5),
    ("es_22k_3s.wav", "es", 170, "El perro corre por el parque.", "es", 22050, 1, "PCM_16", 3.0, 0.8),
    ("zh_44k_6s.wav", "cmn", 200, "今天天气很好，我们去公园散步吧。", "zh", 44100, 1, "PCM_16", 6.0, 0.5),
    ("ru_24k_4s.wav", "ru", 165, "Добрый вечер, как твои дела?", "ru", 24000, 1, "FLOAT", 4.0, 0.4),
    ("ja_32k_5s.wav", "ja", 170, "こんにちは、元気ですか。", "ja", 32000, 1, "PCM_16", 5.0, 0.6),
    ("en_16k_10s.wav", "en-us", 170,
     "Please call Stella. Ask her to bring these things with her from the store: six spoons of fresh snow "
     "peas and five thick slabs of blue cheese.", "en", 16000, 1, "PCM_16", 10.0, 0.7),
    ("en_16k_29s.flac", "en-us", 150,
     "When the sunlight strikes raindrops in the air, they act as a prism and form a rainbow. The rainbow is "
     "a division of white light into many beautiful colors. These take the shape of a long round arch, with "
     "its path high above, and its two ends apparently beyond the horizon. There is, according to legend, a "
     "boiling pot of gold at one end. People look, but no one ever finds it.", "en", 16000, 1, "PCM_16", 29.5,
     0.7),
    ("en_16k_30s.flac", "en-us", 150,
     "When the sunlight strikes raindrops in the air, they act as a prism and form a rainbow. The rainbow is "
     "a division of white light into many beautiful colors. These take the shape of a long round arch, with "
     "its path high above, and its two ends apparently beyond the horizon.", "en", 16000, 1, "PCM_16", 30.0,
     0.7),
    ("silence_16k_3s.wav", None, 0, "", None, 16000, 1, "PCM_16", 3.0, 0.0),
]
# clips also decoded with their language given (no detection)
WITH_LANGUAGE = {"en_16k_1s.wav": "en", "de_8k_4s.wav": "de", "zh_44k_6s.wav": "zh"}


def _tokenizer_dir(out: Path) -> Path:
    return out / "whisper" / "tokenizer"


# ---------------------------------------------------------------------------------------------------- vocab

def step_vocab(out: Path) -> None:
    # GPT-2's byte -> printable character map, the one vocab.json is written in
    from transformers.models.gpt2.tokenization_gpt2 import bytes_to_unicode

    with tempfile.TemporaryDirectory() as td:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "-d", td,
                        WHISPER_SDIST], check=True, capture_output=True)
        (sdist,) = Path(td).glob("openai_whisper-*.tar.gz")
        with tarfile.open(sdist) as tar:
            members = {m.name.split("/", 1)[1]: m for m in tar.getmembers() if "/" in m.name}
            asset = tar.extractfile(members[VOCAB_ASSET]).read()  # type: ignore[union-attr]
            source = tar.extractfile(members[TOKENIZER_PY]).read().decode()  # type: ignore[union-attr]
    if hashlib.sha256(asset).hexdigest() != VOCAB_SHA256:
        raise SystemExit(f"{VOCAB_ASSET} of {WHISPER_SDIST} is not the expected file")
    ranks: dict[bytes, int] = {}
    for line in asset.decode().splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    byte_encoder = bytes_to_unicode()

    def text(b: bytes) -> str:
        return "".join(byte_encoder[c] for c in b)

    vocab = {text(t): r for t, r in ranks.items()}
    merges = []
    for token, rank in ranks.items():
        local = [(token[:i], token[i:], rank) for i in range(1, len(token))
                 if token[:i] in ranks and token[i:] in ranks]
        merges += sorted(local, key=lambda m: (ranks[m[0]], ranks[m[1]]))
    merges.sort(key=lambda m: m[2])
    languages = None
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "LANGUAGES":
            languages = list(ast.literal_eval(node.value))
    assert languages is not None and len(languages) == 100 and languages[-1] == "yue", languages
    d = _tokenizer_dir(out)
    d.mkdir(parents=True, exist_ok=True)
    # written as WhisperTokenizer.save_pretrained writes them, so that the models' copies are the same files
    (d / "vocab.json").write_text(json.dumps(vocab, indent=2, sort_keys=True, ensure_ascii=False) + "\n",
                                  encoding="utf-8")
    (d / "merges.txt").write_text("#version: 0.2\n" + "".join(f"{text(a)} {text(b)}\n" for a, b, _ in merges),
                                  encoding="utf-8")
    (d / "languages.json").write_text(json.dumps(languages) + "\n", encoding="utf-8")
    (d / "SOURCE").write_text(f"{VOCAB_ASSET} of the {WHISPER_SDIST} sdist (sha256 {VOCAB_SHA256}), converted by "
                              "tests/reference/make_whisper_fixtures.py --steps vocab\n", encoding="utf-8")
    print(f"vocab: {len(vocab)} tokens, {len(merges)} merges, {len(languages)} languages")


# ---------------------------------------------------------------------------------------------------- audio

def step_audio(out: Path) -> None:
    import soundfile as sf
    from make_audio import AudioSpec, render

    d = out / "whisper" / "audio"
    d.mkdir(parents=True, exist_ok=True)
    index = []
    with tempfile.TemporaryDirectory() as td:
        for file, voice, speed, text, lang, sr, ch, subtype, seconds, peak in CLIPS:
            if voice is None:
                y = np.zeros((int(round(seconds * sr)), ch) if ch > 1 else int(round(seconds * sr)), np.float32)
            else:
                y = render(AudioSpec(file, voice, speed, text, lang, sr, ch, subtype, seconds, peak), Path(td))
            fmt = "FLAC" if file.endswith(".flac") else "WAV"
            sf.write(str(d / file), y, sr, subtype=subtype, format=fmt)
            index.append({"file": file, "language": lang, "sample_rate": sr, "channels": ch,
                          "seconds": sf.info(str(d / file)).duration, "text": text})
    (d / "index.json").write_text(json.dumps(index, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"audio: {len(index)} clips")


# ---------------------------------------------------------------------------------------------------- models

def _special_tokens(languages: list[str]) -> list[str]:
    return (["<|endoftext|>", "<|startoftranscript|>"] + [f"<|{c}|>" for c in languages]
            + ["<|translate|>", "<|transcribe|>", "<|startoflm|>", "<|startofprev|>", "<|nospeech|>",
               "<|notimestamps|>"])


SHARED_TOKENIZER_FILES = ("vocab.json", "merges.txt")  # what save_pretrained writes as step_vocab made it


def step_models(out: Path, names: list[str]) -> None:
    for name in names:
        dest, tok_dir = out / "whisper" / "models" / name, _tokenizer_dir(out)
        for shared in SHARED_TOKENIZER_FILES:  # made again: never written through the link into tokenizer/
            if (dest / shared).is_symlink():
                (dest / shared).unlink()
        build_checkpoint(dest, tok_dir, *MODELS[name], half=True)
        share_tokenizer_files(dest, tok_dir)


def share_tokenizer_files(dest: Path, tok_dir: Path) -> None:
    """The checkpoint's copies of the shared vocabulary become relative links to the one in `tok_dir` (every
    fixture checkpoint holds the same bytes; a reader follows the link). A copy that differs stays a file."""
    for name in SHARED_TOKENIZER_FILES:
        mine, shared = dest / name, tok_dir / name
        if mine.read_bytes() != shared.read_bytes():
            print(f"{dest.name}/{name} is not the shared {shared}: kept as written")
            continue
        mine.unlink()
        mine.symlink_to(os.path.relpath(shared, dest))


def build_checkpoint(dest: Path, tok_dir: Path, seed: int, mels: int, n_lang: int, d_model: int, enc_layers: int,
                     dec_layers: int, heads: int, ffn: int, std: float, eos_gain: float, half: bool) -> None:
    """One random Whisper checkpoint in the hub's layout (also used for the full-size ones of
    benchmarks/whisper_speed.py), saved in fp16 (`half`) or fp32."""
    import torch
    from transformers import (
        GenerationConfig,
        WhisperConfig,
        WhisperFeatureExtractor,
        WhisperForConditionalGeneration,
        WhisperProcessor,
        WhisperTokenizer,
    )
    from transformers.tokenization_utils import AddedToken

    all_languages = json.loads((tok_dir / "languages.json").read_text(encoding="utf-8"))
    languages = all_languages[:n_lang]
    specials = _special_tokens(languages)
    base = len(json.loads((tok_dir / "vocab.json").read_text(encoding="utf-8")))
    ids = {t: base + i for i, t in enumerate(specials)}
    vocab_size = base + len(specials) + N_TIMESTAMPS
    eot, sot = ids["<|endoftext|>"], ids["<|startoftranscript|>"]
    no_ts = ids["<|notimestamps|>"]
    dest.mkdir(parents=True, exist_ok=True)

    tokenizer = WhisperTokenizer(str(tok_dir / "vocab.json"), str(tok_dir / "merges.txt"), errors="replace",
                                 unk_token="<|endoftext|>", bos_token="<|endoftext|>",
                                 eos_token="<|endoftext|>", pad_token="<|endoftext|>")
    tokenizer.add_special_tokens({"additional_special_tokens": specials[1:]})
    tokenizer.add_tokens([AddedToken(f"<|{i * 0.02:.2f}|>", lstrip=False, rstrip=False, normalized=False)
                          for i in range(N_TIMESTAMPS)])
    assert tokenizer.convert_tokens_to_ids("<|notimestamps|>") == no_ts
    assert len(tokenizer) == vocab_size, (len(tokenizer), vocab_size)
    feature_extractor = WhisperFeatureExtractor(feature_size=mels)
    WhisperProcessor(feature_extractor, tokenizer).save_pretrained(dest)

    config = WhisperConfig(
        vocab_size=vocab_size, num_mel_bins=mels, d_model=d_model, encoder_layers=enc_layers,
        decoder_layers=dec_layers, encoder_attention_heads=heads, decoder_attention_heads=heads,
        encoder_ffn_dim=ffn, decoder_ffn_dim=ffn, max_source_positions=1500, max_target_positions=448,
        pad_token_id=eot, bos_token_id=eot, eos_token_id=eot, decoder_start_token_id=sot, init_std=std,
        begin_suppress_tokens=[220, eot], suppress_tokens=None, scale_embedding=False,
    )
    torch.manual_seed(seed)
    model = WhisperForConditionalGeneration(config).eval()
    with torch.no_grad():  # the init leaves biases and norms at 0 / 1: give them values too
        for pname, p in model.named_parameters():
            if pname.endswith("bias") or "layer_norm" in pname:
                p.add_(torch.randn_like(p) * std)
        bias = model.model.decoder.layer_norm.bias
        model.model.decoder.embed_tokens.weight[eot] += eos_gain * bias / bias.norm()
    non_speech = _non_speech_tokens(tokenizer)
    gen = GenerationConfig(
        decoder_start_token_id=sot, bos_token_id=eot, eos_token_id=eot, pad_token_id=eot, max_length=448,
        begin_suppress_tokens=[220, eot],
        suppress_tokens=sorted(set(non_speech) | {sot, ids["<|startoflm|>"], ids["<|startofprev|>"],
                                                     ids["<|nospeech|>"]}),
        forced_decoder_ids=[[1, None], [2, ids["<|transcribe|>"]]],
        is_multilingual=True,
        lang_to_id={f"<|{c}|>": ids[f"<|{c}|>"] for c in languages},
        task_to_id={"transcribe": ids["<|transcribe|>"], "translate": ids["<|translate|>"]},
        no_timestamps_token_id=no_ts, prev_sot_token_id=ids["<|startofprev|>"], max_initial_timestamp_index=50,
        return_timestamps=False,
    )
    model.generation_config = gen
    (model.half() if half else model).save_pretrained(dest, safe_serialization=True)
    print(f"model {dest.name}: {sum(p.numel() for p in model.parameters())} parameters, vocab {vocab_size}")


def _non_speech_tokens(tokenizer) -> list[int]:
    """openai-whisper's Tokenizer.non_speech_tokens, over this tokenizer (whisper/tokenizer.py)."""
    symbols = list('"#()*+/:;<=>@[\\]^_`{|}~「」『』')
    symbols += "<< >> <<< >>> -- --- -( -[ (' (\" (( )) ((( ))) [[ ]] {{ }} ♪♪ ♪♪♪".split()
    miscellaneous = set("♩♪♫♬♭♮♯")

    def enc(s: str) -> list[int]:
        return tokenizer.encode(s, add_special_tokens=False)

    result = {enc(" -")[0], enc(" '")[0]}
    for symbol in symbols + sorted(miscellaneous):
        for tokens in (enc(symbol), enc(" " + symbol)):
            if len(tokens) == 1 or symbol in miscellaneous:
                result.add(tokens[0])
    return sorted(result)


# ---------------------------------------------------------------------------------------------------- outputs

def reference_audio_16k(path: Path) -> np.ndarray:
    """The clip as float32 mono at 16 kHz: channel mean, then librosa's soxr_hq resampler (fix=True)."""
    import librosa
    import soundfile as sf

    y, sr = sf.read(str(path), dtype="float32", always_2d=True)
    mono = np.mean(y.T, axis=0).astype(np.float32)
    if sr != 16000:
        mono = librosa.resample(mono, orig_sr=sr, target_sr=16000, res_type="soxr_hq").astype(np.float32)
    return mono


def step_outputs(out: Path, names: list[str], audio_dir: Path | None = None) -> None:
    import torch
    from transformers import WhisperForConditionalGeneration, WhisperProcessor

    torch.set_num_threads(int(os.environ.get("ORACLE_TORCH_THREADS", "1")))
    audio_dir = audio_dir or out / "whisper" / "audio"
    index = json.loads((audio_dir / "index.json").read_text(encoding="utf-8"))
    for name in names:
        src = out / "whisper" / "models" / name
        processor = WhisperProcessor.from_pretrained(src)
        model = WhisperForConditionalGeneration.from_pretrained(src, torch_dtype=torch.float32).eval()
        dest = out / "whisper" / "outputs" / name
        dest.mkdir(parents=True, exist_ok=True)
        for clip in index:
            audio = reference_audio_16k(audio_dir / clip["file"])
            features = processor(audio, sampling_rate=16000, return_tensors="pt").input_features
            cases = [("detect", None)]
            if clip["file"] in WITH_LANGUAGE:
                cases.append(("given", WITH_LANGUAGE[clip["file"]]))
            arrays: dict[str, np.ndarray] = {"logmel": features[0].numpy()}
            for case, language in cases:
                with torch.no_grad():
                    ids = model.generate(features, language=language, do_sample=False, num_beams=1)[0]
                    lang_id = int(model.detect_language(features)[0]) if language is None else -1
                arrays[f"{case}_ids"] = ids.numpy().astype(np.int64)
                arrays[f"{case}_lang_id"] = np.array(lang_id)
                arrays[f"{case}_text"] = np.array(processor.batch_decode(ids[None], skip_special_tokens=True)[0])
                arrays[f"{case}_language"] = np.array(language or "")
            stem = clip["file"].rsplit(".", 1)[0]
            np.savez_compressed(dest / f"{stem}.npz", **arrays)
            print(name, stem, {k: (v.tolist() if v.ndim == 0 else v.shape) for k, v in arrays.items()
                               if k != "logmel"})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", default="models,outputs")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--out", type=Path, default=FIXTURES)
    ap.add_argument("--audio", type=Path, default=None, help="audio folder (default: OUT/whisper/audio)")
    ap.add_argument("--tokenizer", type=Path, default=None,
                    help="folder holding the converted vocabulary (default: OUT/whisper/tokenizer)")
    args = ap.parse_args()
    steps = args.steps.split(",")
    names = args.models.split(",")
    if args.tokenizer is not None and "vocab" not in steps:
        dest = _tokenizer_dir(args.out)
        dest.mkdir(parents=True, exist_ok=True)
        for f in args.tokenizer.iterdir():
            (dest / f.name).write_bytes(f.read_bytes())
    if "vocab" in steps:
        step_vocab(args.out)
    if "audio" in steps:
        step_audio(args.out)
    if "models" in steps:
        step_models(args.out, names)
    if "outputs" in steps:
        step_outputs(args.out, names, args.audio)


if __name__ == "__main__":
    main()
