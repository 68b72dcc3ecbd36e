"""Generate the parity fixtures with the official qwen-tts implementation (CPU, fp32, greedy).

Run in the reference environment:
    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 .venv-ref/bin/python tests/reference/make_fixtures.py
Options: --out DIR (default tests/fixtures), --steps models,outputs, --models tiny06b,...
The reference audio (tests/fixtures/audio) is an input; it is made by make_audio.py.
What each file holds is written down where it is saved (below) and in tests/fixtures/cases.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import oracle  # noqa: E402  (installs the torchaudio stub before qwen_tts)
import torch  # noqa: E402

AUDIO_DIR = oracle.FIXTURES / "audio"
ATTN = "sdpa"
K_LOGITS = 4  # prefill + 3 decode steps
MIN_FRAMES = 5  # a case must produce at least this many frames

TOKENIZER_TEXTS = [
    "Hello world!",
    "The quick brown fox jumps over the lazy dog.",
    "It's 10:45, we're late; they'll wait, won't they?",
    "Numbers: 0 12 345 6789 3.14159 -7 100% $20.50",
    "你好，世界！今天天气很好。",
    "中文和English混合的句子，比如AI和GPU。",
    "こんにちは、世界！カタカナとひらがな。",
    "안녕하세요, 세계! 음성 합성 테스트입니다.",
    "Emoji 😀🎉👍❤️🚀 test 🙂",
    "Full-width ＡＢＣ１２３，「」（）！？",
    "Café naïve résumé Straße Ångström",
    "e\u0301 composed vs é precomposed (NFC)",
    "Tabs\tand  double  spaces\nnew line\r\nwindows",
    "   leading and trailing spaces   ",
    "Привет, мир! Bonjour le monde.",
    "<|im_start|>assistant\nHello 你好<|im_end|>\n<|im_start|>assistant\n",
    "",
]


@dataclass(frozen=True)
class SynthCase:
    case: str
    text: str | tuple[str, ...]  # a tuple: candidates, the first that ends as `expect` is used
    language: str
    mode: str  # xvector | icl
    ref_audio: str
    max_new_tokens: int
    non_streaming: bool = False
    expect: str = "any"  # eos | cap | any  (checked: a fixture that changes behaviour fails loudly)


LONG_EN = (
    "This is a much longer sentence for the long case. It keeps going with plenty of words, "
    "numbers like 42 and 2026, and more clauses, so that the talker has to produce well over "
    "sixty frames before the cap.",
    "Here is another long passage: the weather was fine, the park was quiet, and we walked for "
    "an hour, talking about 3 books, 7 films and 12 songs, until the sun went down.",
    "A third long text, in case the others stop early: reading aloud takes time, and every "
    "sentence, clause and number, such as 1999 or 365, adds more frames to the output.",
    "Long text number four. We count: one, two, three, four, five, six, seven, eight, nine, ten, "
    "eleven, twelve, and then we start over again from the very beginning.",
)
SHORT_EN = ("Hello world, this is a test.", "Good morning, how are you doing today?",
            "The quick brown fox.", "Speech synthesis test.", "Thank you very much.",
            "See you tomorrow!", "What time is it now?", "Hello world.")
SHORT_ZH = ("你好，世界！今天天气很好。", "我们去公园散步吧。", "谢谢你。", "你好，世界！",
            "今天天气很好，我们去公园散步吧。", "我叫通义千问。")
MIXED = ("Mixed: 中文 English 日本語 한국어 😀 123 456!", "안녕하세요, 세계! 123 😀",
         "你好 Hello 안녕 😀 2026", "Emoji 🎉👍 and 中文 and 한국어 42.")

# Each case lists candidate texts; the first whose greedy run ends as `expect` is used (the run is
# deterministic, so the same candidate is chosen every time; cases.json records the chosen text).
CASES: dict[str, list[SynthCase]] = {
    "tiny06b": [
        SynthCase("xv_en_16k", SHORT_EN, "english", "xvector", "en_16k_mono_1s.wav", 16, expect="cap"),
        SynthCase("xv_auto_zh_44k", SHORT_ZH, "auto", "xvector", "zh_44k_mono_5s.wav", 16, expect="cap"),
        SynthCase("icl_en_22k", SHORT_EN[1:], "english", "icl", "en_22k_stereo_3s.flac", 16, expect="cap"),
        SynthCase("icl_zh_48k", SHORT_ZH[1:], "chinese", "icl", "zh_48k_mono_3s.flac", 16, expect="cap"),
        SynthCase("xv_mixed_48k", MIXED, "auto", "xvector", "en_48k_stereo_12s.flac", 16, expect="cap"),
        SynthCase("icl_long_12s", LONG_EN, "english", "icl", "en_48k_stereo_12s.flac", 64, expect="cap"),
        SynthCase("xv_long_24k", LONG_EN, "english", "xvector", "en_24k_mono_2s.wav", 66, expect="cap"),
        SynthCase("xv_eos_44k", SHORT_EN, "english", "xvector", "en_44k_stereo_2s.flac", 60, expect="eos"),
        SynthCase("icl_eos_22k", SHORT_EN[1:], "auto", "icl", "en_22k_stereo_3s.flac", 60, expect="eos"),
        SynthCase("xv_nonstream_16k", MIXED[1:], "korean", "xvector", "zh_16k_stereo_4s.wav", 12,
                  non_streaming=True, expect="cap"),
        SynthCase("icl_nonstream_48k", SHORT_EN[2:], "english", "icl", "zh_48k_mono_3s.flac", 12,
                  non_streaming=True, expect="cap"),
        SynthCase("icl_auto_16k", SHORT_EN[3:], "auto", "icl", "zh_16k_stereo_4s.wav", 12, expect="cap"),
    ],
    "tiny17b": [
        SynthCase("xv_en_22k", SHORT_EN, "english", "xvector", "en_22k_stereo_3s.flac", 16, expect="cap"),
        SynthCase("icl_zh_44k", SHORT_ZH, "chinese", "icl", "zh_44k_mono_5s.wav", 16, expect="cap"),
        SynthCase("xv_mixed_auto_48k", MIXED + SHORT_ZH + SHORT_EN, "auto", "xvector", "zh_48k_mono_3s.flac", 16, expect="cap"),
        SynthCase("xv_eos_16k", SHORT_EN, "english", "xvector", "en_16k_mono_1s.wav", 60, expect="eos"),
        SynthCase("icl_nonstream_24k", SHORT_EN[3:], "english", "icl", "en_24k_mono_2s.wav", 12,
                  non_streaming=True, expect="cap"),
    ],
    "tinyodd": [
        SynthCase("xv_en_44k", SHORT_EN, "english", "xvector", "en_44k_stereo_2s.flac", 16, expect="cap"),
        SynthCase("icl_long_12s", LONG_EN, "english", "icl", "en_48k_stereo_12s.flac", 64, expect="cap"),
        SynthCase("xv_auto_zh_16k", SHORT_ZH + MIXED, "auto", "xvector", "zh_16k_stereo_4s.wav", 16,
                  expect="cap"),
        SynthCase("icl_eos_16k", SHORT_EN, "english", "icl", "en_16k_mono_1s.wav", 60, expect="eos"),
        SynthCase("xv_nonstream_22k", SHORT_EN[2:], "auto", "xvector", "en_22k_stereo_3s.flac", 12,
                  non_streaming=True, expect="cap"),
    ],
}

@dataclass(frozen=True)
class KindCase:
    """A CustomVoice / VoiceDesign case: generate_custom_voice / generate_voice_design with these arguments."""

    case: str
    text: str | tuple[str, ...]
    language: str
    speaker: str  # "" for voice_design
    instruct: str  # "" = none; 0.6B CustomVoice drops any instruct
    max_new_tokens: int
    non_streaming: bool | None = None  # None: the wrapper's default (True for both kinds)
    expect: str = "any"


SHORT_JA = ("こんにちは、世界！", "今日はいい天気ですね。", "ありがとうございます。", "カタカナとひらがな。")
SHORT_KO = ("안녕하세요, 세계!", "오늘 날씨가 좋네요.", "감사합니다.", "음성 합성 테스트입니다.")
SHORT_FR = ("Bonjour le monde.", "Bonjour le monde. Hola mundo.", "Café, naïve, résumé.")
SAD = "Speak slowly and sadly, almost whispering."
ANGRY = "用特别愤怒的语气说。"
DESIGN_EN = "A warm, low female voice, calm and a little husky."
DESIGN_ZH = "一个年轻男性的声音，语速很快，很兴奋。"

KIND_CASES: dict[str, list[KindCase]] = {
    # 0.6B CustomVoice: the wrapper drops any instruct (tts_model_size "0b6")
    "tinycv06b": [
        KindCase("cv_serena_en_instruct_dropped", SHORT_EN, "english", "serena", SAD, 16, expect="cap"),
        KindCase("cv_eric_zh_dialect", SHORT_ZH, "chinese", "eric", "", 16, expect="cap"),
        KindCase("cv_dylan_auto_dialect_stream", SHORT_ZH, "auto", "dylan", "", 16, non_streaming=False,
                 expect="cap"),
        KindCase("cv_uncle_fu_ja_stream", SHORT_JA, "japanese", "uncle_fu", "", 12, non_streaming=False,
                 expect="cap"),
        KindCase("cv_eric_en_no_dialect", SHORT_EN, "english", "Eric", "", 12, expect="cap"),
        KindCase("cv_serena_eos", SHORT_EN, "english", "serena", "", 60, expect="eos"),
    ],
    # 1.7B CustomVoice: the instruct rows go before the role rows
    "tinycv17b": [
        KindCase("cv_serena_en_instruct", SHORT_EN, "english", "serena", SAD, 16, expect="cap"),
        KindCase("cv_dylan_zh_instruct_stream", SHORT_ZH, "chinese", "dylan", ANGRY, 16, non_streaming=False,
                 expect="cap"),
        KindCase("cv_eric_auto_dialect", SHORT_ZH, "auto", "eric", "", 12, expect="cap"),
        KindCase("cv_ryan_ko_instruct_stream", SHORT_KO, "korean", "ryan", SAD, 12, non_streaming=False,
                 expect="cap"),
        KindCase("cv_uncle_fu_instruct_eos", SHORT_EN, "english", "uncle_fu", SAD, 60, expect="eos"),
    ],
    # VoiceDesign: no speaker row; the instruct describes the voice
    "tinyvd17b": [
        KindCase("vd_en", SHORT_EN, "english", "", DESIGN_EN, 16, expect="cap"),
        KindCase("vd_zh_stream", SHORT_ZH, "chinese", "", DESIGN_ZH, 16, non_streaming=False, expect="cap"),
        KindCase("vd_fr_auto_stream", SHORT_FR, "auto", "", DESIGN_EN, 12, non_streaming=False),
        KindCase("vd_no_instruct", SHORT_EN, "english", "", "", 12, expect="cap"),
        KindCase("vd_eos", SHORT_EN, "english", "", DESIGN_EN, 60, expect="eos"),
    ],
}
# A greedy choice closer than this to its runner-up could flip on another CPU's float rounding; such a candidate
# is not used as a fixture. The figure is empirical: regenerating with 1 and 2 torch threads
# (ORACLE_TORCH_THREADS) moved these logits by at most 5e-6 and changed no code. The worst-case bound of
# tests/parity_live/tolerances.py (2u * reduction length * max|logit|, about 3e-3 here) is far more pessimistic
# and not met by every case: if a CPU ever flips a code, the live tier names the case and its text is changed.
MIN_MARGIN = 1e-3


DECODER_T = {"tiny06b": [20, 100, 400], "tiny17b": [20, 100], "tinyodd": [5, 20, 100, 400]}

GEN = dict(do_sample=False, subtalker_dosample=False, repetition_penalty=1.05, top_k=50, top_p=1.0,
           temperature=0.9, subtalker_top_k=50, subtalker_top_p=1.0, subtalker_temperature=0.9)


# --------------------------------------------------------------------------------------------


def save_npz(path: Path, **arrays: Any) -> None:
    """np.savez_compressed, atomically; strings become 0-d unicode arrays."""
    conv = {}
    for k, v in arrays.items():
        if isinstance(v, str):
            v = np.array(v)
        elif isinstance(v, (bool, int, float)):
            v = np.array(v)
        conv[k] = v
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez_compressed(tmp, **conv)
    os.replace(tmp, path)


def stem(name: str) -> str:
    return Path(name).stem + "_" + Path(name).suffix.lstrip(".")


def audio_index() -> list[dict]:
    return json.loads((AUDIO_DIR / "index.json").read_text(encoding="utf-8"))


def transcript(audio_file: str) -> str:
    for e in audio_index():
        if e["file"] == audio_file:
            return e["transcript"]
    raise KeyError(audio_file)


class Runner:
    def __init__(self, out: Path, name: str):
        self.name = name
        self.mdir = out / "models" / name
        self.odir = out / "outputs" / name
        self.odir.mkdir(parents=True, exist_ok=True)
        self.tts = oracle.load_official(self.mdir, attn=ATTN)
        self.model = self.tts.model
        self.cfg = self.model.config
        self.entries: list[dict] = []
        self.mismatches: list[str] = []
        self._prompts: dict = {}

    # -- speech tokenizer decoder ----------------------------------------------------------
    def decoder_cases(self) -> None:
        cb = self.cfg.talker_config.vocab_size - 1024
        g = np.random.default_rng(oracle.SPECS[self.name].seed + 7)
        st = self.model.speech_tokenizer
        for t in DECODER_T[self.name]:
            codes = g.integers(0, cb, size=(t, 16), dtype=np.int64)
            wavs, sr = st.decode([{"audio_codes": torch.from_numpy(codes)}])
            wav = np.asarray(wavs[0], dtype=np.float32)
            assert sr == 24000 and wav.shape == (t * 1920,), (sr, wav.shape)
            f = f"decoder_T{t}.npz"
            save_npz(self.odir / f, codes=codes, wav=wav)
            self.entries.append(dict(kind="decoder", model=self.name, file=f"outputs/{self.name}/{f}",
                                     frames=t, samples=int(wav.shape[0]),
                                     window=int(st.model.config.decoder_config.sliding_window),
                                     chunked=t > 300))

    # -- speaker encoder + Mimi encoder per reference audio ----------------------------------
    def audio_cases(self, common: Path) -> None:
        for e in audio_index():
            path = str(AUDIO_DIR / e["file"])
            # x-vector path exactly as create_voice_clone_prompt: load, mono, resample, mel, encoder
            wav, sr = self.tts._normalize_audio_inputs([path])[0]
            import librosa

            a24 = wav if sr == 24000 else librosa.resample(y=wav.astype(np.float32), orig_sr=int(sr),
                                                           target_sr=24000)
            with oracle.SpeakerCapture(self.model) as cap:
                xvec = self.model.extract_speaker_embedding(audio=a24, sr=24000)
            mel = cap.mels[0]
            xvec = xvec.detach().float().numpy()
            # codec path exactly as Qwen3TTSTokenizer.encode on a file path
            enc_audio = self.model.speech_tokenizer.load_audio(path, target_sr=24000)
            assert np.array_equal(enc_audio, np.asarray(a24, dtype=np.float32)), "resample paths differ"
            codes = self.model.speech_tokenizer.encode(path).audio_codes[0].numpy().astype(np.int64)
            s = stem(e["file"])
            cfile = common / f"audio_{s}.npz"
            a24 = np.asarray(a24, dtype=np.float32)
            if cfile.exists():
                old = np.load(cfile)
                assert np.array_equal(old["audio24k"], a24) and np.array_equal(old["mel"], mel), s
            else:
                save_npz(cfile, audio24k=a24, mel=mel, audio=e["file"], sample_rate=e["sample_rate"])
            save_npz(self.odir / f"speaker_{s}.npz", xvector=xvec, audio=e["file"],
                     common=f"outputs/common/audio_{s}.npz")
            save_npz(self.odir / f"encoder_{s}.npz", codes=codes, audio=e["file"],
                     common=f"outputs/common/audio_{s}.npz")
            n = len(a24)
            self.entries.append(dict(kind="speaker", model=self.name, file=f"outputs/{self.name}/speaker_{s}.npz",
                                     audio=e["file"], common=f"outputs/common/audio_{s}.npz",
                                     samples24k=n, mel_frames=int(mel.shape[0]), dim=int(xvec.shape[0])))
            self.entries.append(dict(kind="encoder", model=self.name, file=f"outputs/{self.name}/encoder_{s}.npz",
                                     audio=e["file"], common=f"outputs/common/audio_{s}.npz",
                                     samples24k=n, frames=int(codes.shape[0]),
                                     frames_25hz=int(-(-n // 960))))

    # -- tokenizer ------------------------------------------------------------------------------
    def tokenizer_case(self) -> None:
        tok = self.tts.processor
        ids = np.empty(len(TOKENIZER_TEXTS), dtype=object)
        for i, t in enumerate(TOKENIZER_TEXTS):
            ids[i] = np.asarray(tok(text=t)["input_ids"][0], dtype=np.int64)
        save_npz(self.odir / "tokenizer.npz", texts=np.array(TOKENIZER_TEXTS), ids=ids)
        self.entries.append(dict(kind="tokenizer", model=self.name, file=f"outputs/{self.name}/tokenizer.npz",
                                 count=len(TOKENIZER_TEXTS), allow_pickle=True))

    # -- synthesis ------------------------------------------------------------------------------
    def prompt(self, ref_audio: str, mode: str):
        key = (ref_audio, mode)
        if key not in self._prompts:
            items = self.tts.create_voice_clone_prompt(
                ref_audio=str(AUDIO_DIR / ref_audio),
                ref_text=transcript(ref_audio) if mode == "icl" else None,
                x_vector_only_mode=(mode == "xvector"),
            )
            self._prompts[key] = items
        return self._prompts[key]

    def run_synth(self, c: SynthCase) -> dict:
        items = self.prompt(c.ref_audio, c.mode)
        with oracle.GenerateCapture(self.model) as run, oracle.TalkerCapture(self.model, k_logits=K_LOGITS) as cap:
            wavs, sr = self.tts.generate_voice_clone(
                text=c.text, language=c.language, voice_clone_prompt=items,
                non_streaming_mode=c.non_streaming, max_new_tokens=c.max_new_tokens, **GEN)
        got = dict(input_ids=run.first_ids("input_ids"), ref_ids=run.first_ids("ref_ids"),
                   gen_kwargs=run.gen_kwargs(), codes=run.codes, sampled=run.sampled)
        codes = got["codes"]
        eos = self.cfg.talker_config.codec_eos_token_id
        ended_by = "eos" if int(got["sampled"][-1]) == eos else "cap"
        if ended_by == "cap":
            assert codes.shape[0] == c.max_new_tokens - 1, (codes.shape, c)
        return dict(got=got, cap=cap, wav=np.asarray(wavs[0], dtype=np.float32), sr=sr, ended_by=ended_by,
                    items=items)

    def synth_cases(self) -> None:
        for c0 in CASES[self.name]:
            # candidates are tried in order until one ends as expected (deterministic under greedy)
            cands = (c0.text,) if isinstance(c0.text, str) else c0.text
            for i, text in enumerate(cands):
                c = replace(c0, text=text)
                r = self.run_synth(c)
                got, cap, items = r["got"], r["cap"], r["items"]
                ok = c.expect == "any" or r["ended_by"] == c.expect
                ok = ok and got["codes"].shape[0] >= MIN_FRAMES
                if ok or i == len(cands) - 1:
                    break
                print(f"  {self.name}/{c.case}: candidate {i} ended by {r['ended_by']} after "
                      f"{got['codes'].shape[0]} frames, trying the next", flush=True)
            if not ok:
                self.mismatches.append(f"{self.name}/{c.case}: ended by {r['ended_by']} after "
                                       f"{got['codes'].shape[0]} frames, expected {c.expect}")
            if len(cap.logits) < 3:
                raise SystemExit(f"{self.name}/{c.case}: only {len(cap.logits)} logits rows")
            it = items[0]
            arrays = dict(
                text=c.text, language=c.language, mode=c.mode, ref_audio=c.ref_audio,
                ref_text=transcript(c.ref_audio) if c.mode == "icl" else "",
                non_streaming=bool(c.non_streaming), max_new_tokens=int(c.max_new_tokens),
                input_ids=got["input_ids"].astype(np.int64),
                xvector=it.ref_spk_embedding.detach().float().numpy(),
                prefill=cap.prefill.astype(np.float32), trailing=cap.trailing.astype(np.float32),
                logits=np.stack(cap.logits).astype(np.float32), codes=got["codes"],
                sampled=got["sampled"], wav=r["wav"], ended_by=r["ended_by"],
            )
            if c.mode == "icl":
                arrays["ref_ids"] = got["ref_ids"].astype(np.int64)
                arrays["ref_codes"] = it.ref_code.numpy().astype(np.int64)
            f = f"synth_{c.case}.npz"
            save_npz(self.odir / f, **arrays)
            e = dict(kind="synth", model=self.name, file=f"outputs/{self.name}/{f}", **asdict(c))
            e.pop("expect")
            e.update(ended_by=r["ended_by"], frames=int(got["codes"].shape[0]),
                     prefill_rows=int(cap.prefill.shape[0]), trailing_rows=int(cap.trailing.shape[0]),
                     logits_rows=len(cap.logits), samples=int(r["wav"].shape[0]),
                     ref_frames=int(it.ref_code.shape[0]) if c.mode == "icl" else 0,
                     gen=dict(got["gen_kwargs"], **{k: GEN[k] for k in GEN}), attn=ATTN)
            self.entries.append(e)
            print(f"  {self.name}/{c.case}: {e['frames']} frames, {r['ended_by']}, prefill {e['prefill_rows']}",
                  flush=True)


class KindRunner(Runner):
    """CustomVoice / VoiceDesign cases. Their speech and text tokenizers are byte-identical to a Base fixture's
    (checked), so only the synthesis cases are generated."""

    def kind_cases(self) -> None:
        spec = oracle.SPECS[self.name]
        assert self.model.tts_model_type == spec.kind, (self.model.tts_model_type, spec.kind)
        for c0 in KIND_CASES[self.name]:
            cands = (c0.text,) if isinstance(c0.text, str) else c0.text
            for i, text in enumerate(cands):
                c = replace(c0, text=text)
                r = self.run_kind(c)
                problem = None
                if c.expect != "any" and r["ended_by"] != c.expect:
                    problem = f"ended by {r['ended_by']}"
                elif r["codes"].shape[0] < MIN_FRAMES:
                    problem = f"only {r['codes'].shape[0]} frames"
                elif r["margin"] < MIN_MARGIN:
                    problem = f"a greedy choice within {r['margin']:.2e} of its runner-up"
                if problem is None:
                    break
                print(f"  {self.name}/{c.case}: candidate {i}: {problem}, trying the next", flush=True)
                if i == len(cands) - 1:
                    self.mismatches.append(f"{self.name}/{c.case}: no candidate text qualifies ({problem})")
            arrays = dict(
                text=c.text, language=c.language, speaker=c.speaker, instruct=c.instruct,
                kind=spec.kind, non_streaming=bool(r["non_streaming"]), max_new_tokens=int(c.max_new_tokens),
                input_ids=r["input_ids"], instruct_ids=r["instruct_ids"], prefill=r["prefill"],
                trailing=r["trailing"], logits=r["logits"], codes=r["codes"], sampled=r["sampled"], wav=r["wav"],
                ended_by=r["ended_by"], min_margin=np.float32(r["margin"]),
            )
            f = f"kind_{c.case}.npz"
            save_npz(self.odir / f, **arrays)
            e = dict(kind="kind_synth", model=self.name, file=f"outputs/{self.name}/{f}", case=c.case,
                     text=c.text, language=c.language, speaker=c.speaker, instruct=c.instruct,
                     tts_model_type=spec.kind, tts_model_size=spec.size, non_streaming=bool(r["non_streaming"]),
                     default_text_mode=c.non_streaming is None, max_new_tokens=c.max_new_tokens,
                     ended_by=r["ended_by"], frames=int(r["codes"].shape[0]),
                     prefill_rows=int(r["prefill"].shape[0]), trailing_rows=int(r["trailing"].shape[0]),
                     instruct_rows=int(r["instruct_ids"].shape[0]), samples=int(r["wav"].shape[0]),
                     gen=dict(r["gen_kwargs"], **GEN), attn=ATTN)
            self.entries.append(e)
            print(f"  {self.name}/{c.case}: {e['frames']} frames, {r['ended_by']}, prefill {e['prefill_rows']}, "
                  f"instruct rows {e['instruct_rows']}, margin {r['margin']:.3f}", flush=True)

    def run_kind(self, c: KindCase) -> dict:
        model = self.model
        kwargs = dict(GEN, max_new_tokens=c.max_new_tokens)
        if c.non_streaming is not None:
            kwargs["non_streaming_mode"] = c.non_streaming
        with oracle.GenerateCapture(model) as run, \
                oracle.TalkerCapture(model, k_logits=c.max_new_tokens + 1) as cap, \
                oracle.CodePredictorMargins(model) as cp_margins:
            if model.tts_model_type == "custom_voice":
                wavs, sr = self.tts.generate_custom_voice(text=c.text, speaker=c.speaker, language=c.language,
                                                          instruct=c.instruct or None, **kwargs)
            else:
                wavs, sr = self.tts.generate_voice_design(text=c.text, instruct=c.instruct, language=c.language,
                                                          **kwargs)
        assert sr == 24000
        instruct_ids = run.first_ids("instruct_ids")
        got = dict(input_ids=run.first_ids("input_ids"),
                   instruct_ids=np.zeros(0, np.int64) if instruct_ids is None else instruct_ids,
                   non_streaming=bool(run.kwargs["non_streaming_mode"]), gen_kwargs=run.gen_kwargs(),
                   codes=run.codes, sampled=run.sampled)
        eos = self.cfg.talker_config.codec_eos_token_id
        ended_by = "eos" if int(got["sampled"][-1]) == eos else "cap"
        if ended_by == "cap":
            assert got["codes"].shape[0] == c.max_new_tokens - 1, (got["codes"].shape, c)
        margin = min(talker_margin(cap.logits, got["sampled"], self.cfg.talker_config), cp_margins.margin)
        return dict(got, prefill=cap.prefill.astype(np.float32), trailing=cap.trailing.astype(np.float32),
                    logits=np.stack(cap.logits[:K_LOGITS]).astype(np.float32), wav=np.asarray(wavs[0], np.float32),
                    ended_by=ended_by, margin=margin)


def talker_margin(logits: list[np.ndarray], sampled: np.ndarray, tcfg: Any, penalty: float = 1.05) -> float:
    """Smallest gap between the greedy choice and its runner-up over the run, on the scores the official
    generate ranks (repetition penalty, EOS masked for 2 steps, control ids suppressed)."""
    eos, vocab = tcfg.codec_eos_token_id, tcfg.vocab_size
    gaps = []
    for k, raw in enumerate(logits[: len(sampled)]):
        s = np.asarray(raw, np.float64).copy()
        seen = np.unique(sampled[:k])
        if len(seen):
            s[seen] = np.where(s[seen] > 0, s[seen] / penalty, s[seen] * penalty)
        keep = s[eos]
        s[vocab - 1024:] = -np.inf
        s[eos] = -np.inf if k < 2 else keep
        top = np.sort(s)[-2:]
        # a replica that disagrees with generate's choice can only be a near-tie: report it as no margin
        gaps.append(top[1] - top[0] if int(np.argmax(s)) == int(sampled[k]) else 0.0)
    return float(min(gaps))


def model_summary(name: str, mdir: Path) -> dict:
    cfg = json.loads((mdir / "config.json").read_text())
    st = json.loads((mdir / "speech_tokenizer" / "config.json").read_text())
    tc, cp = cfg["talker_config"], cfg["talker_config"]["code_predictor_config"]
    dec, enc = st["decoder_config"], st["encoder_config"]
    return dict(
        model=name, path=f"models/{name}", tts_model_size=cfg["tts_model_size"],
        talker=dict(hidden=tc["hidden_size"], layers=tc["num_hidden_layers"], heads=tc["num_attention_heads"],
                    kv_heads=tc["num_key_value_heads"], head_dim=tc["head_dim"], vocab=tc["vocab_size"],
                    text_vocab=tc["text_vocab_size"], text_hidden=tc["text_hidden_size"],
                    mrope_section=tc["rope_scaling"]["mrope_section"]),
        code_predictor=dict(hidden=cp["hidden_size"], layers=cp["num_hidden_layers"],
                            heads=cp["num_attention_heads"], kv_heads=cp["num_key_value_heads"],
                            head_dim=cp["head_dim"], vocab=cp["vocab_size"]),
        codebook_size=dec["codebook_size"], num_code_groups=tc["num_code_groups"],
        decoder=dict(hidden=dec["hidden_size"], layers=dec["num_hidden_layers"], heads=dec["num_attention_heads"],
                     head_dim=dec["head_dim"], sliding_window=dec["sliding_window"], latent=dec["latent_dim"],
                     decoder_dim=dec["decoder_dim"], codebook_dim=dec["codebook_dim"]),
        encoder=dict(hidden=enc["hidden_size"], layers=enc["num_hidden_layers"], filters=enc["num_filters"],
                     sliding_window=enc["sliding_window"], codebook_dim=enc["codebook_dim"],
                     num_quantizers=enc["num_quantizers"]),
        speaker_dim=cfg["speaker_encoder_config"]["enc_dim"],
        special=dict(im_start=cfg["im_start_token_id"], im_end=cfg["im_end_token_id"],
                     tts_pad=cfg["tts_pad_token_id"], tts_bos=cfg["tts_bos_token_id"],
                     tts_eos=cfg["tts_eos_token_id"], codec_eos=tc["codec_eos_token_id"],
                     codec_pad=tc["codec_pad_id"], codec_bos=tc["codec_bos_id"]),
        weights_dtype="bfloat16 (model.safetensors), float32 (speech_tokenizer)",
        **({} if cfg["tts_model_type"] == "base" else dict(
            tts_model_type=cfg["tts_model_type"], speakers=tc["spk_id"], dialects=tc["spk_is_dialect"])),
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=oracle.FIXTURES)
    ap.add_argument("--steps", default="models,outputs")
    ap.add_argument("--models", default=",".join(oracle.SPECS))
    args = ap.parse_args(argv)
    steps = args.steps.split(",")
    names = args.models.split(",")
    out: Path = args.out
    t0 = time.time()
    if "models" in steps:
        for name in names:
            model, st, tok, fb = oracle.build_models(oracle.SPECS[name])
            assert not fb, f"parameters without an init rule: {fb}"
            oracle.save_hub(model, st, tok, out / "models" / name)
            check_shared_files(out / "models", name)
            print(f"model {name} written ({time.time() - t0:.1f}s)", flush=True)
    if "outputs" in steps:
        common = out / "outputs" / "common"
        common.mkdir(parents=True, exist_ok=True)
        base = [n for n in oracle.SPECS if oracle.SPECS[n].kind == "base"]
        entries: list[dict] = []
        models: list[dict] = []
        probes: dict = {}
        if set(base) <= set(names):
            for f in common.glob("*.npz"):
                f.unlink()
        elif (out / "cases.json").is_file():  # a subset run keeps the other models' cases
            old = json.loads((out / "cases.json").read_text(encoding="utf-8"))
            entries = [e for e in old["entries"] if e["model"] not in names]
            models = [m for m in old["models"] if m["model"] not in names]
            probes = {k: v for k, v in old["meta"]["mimi_encoder_mask_probe"].items() if k not in names}
        mismatches: list[str] = []
        for name in names:
            spec = oracle.SPECS[name]
            r = Runner(out, name) if spec.kind == "base" else KindRunner(out, name)
            for f in r.odir.glob("*.npz"):
                f.unlink()
            if spec.kind == "base":
                r.decoder_cases()
                r.audio_cases(common)
                r.tokenizer_case()
                r.synth_cases()
                # 300 frames at 25 Hz (12 s) > every tiny Mimi window: does the encoder apply it?
                probes[name] = oracle.mimi_transformer_mask_probe(r.model.speech_tokenizer.model, 300)
            else:
                r.kind_cases()
            entries += r.entries
            mismatches += r.mismatches
            models.append(model_summary(name, r.mdir))
            print(f"outputs {name} done ({time.time() - t0:.1f}s)", flush=True)
        order = list(oracle.SPECS)
        models.sort(key=lambda m: order.index(m["model"]))
        entries.sort(key=lambda e: order.index(e["model"]))  # stable: each model's own order is kept
        import transformers

        meta = dict(
            generator="tests/reference/make_fixtures.py",
            versions=dict(torch=torch.__version__, transformers=transformers.__version__,
                          qwen_tts=_qwen_tts_version(), numpy=np.__version__),
            device="cpu", dtype="float32", attn_implementation=ATTN, torch_threads=torch.get_num_threads(),
            mimi_encoder_mask_probe=probes,
        )
        oracle._write_json(out / "cases.json", dict(meta=meta, models=models, entries=entries))
        if mismatches:
            print("\n".join(mismatches), flush=True)
            raise SystemExit("synth cases did not end as expected (greedy behaviour changed?)")
    print(f"done in {time.time() - t0:.1f}s", flush=True)
    return 0


SHARED_FILES = ("speech_tokenizer/model.safetensors", "speech_tokenizer/config.json", "vocab.json", "merges.txt",
                "tokenizer_config.json")


def check_shared_files(models_dir: Path, name: str) -> None:
    """A CustomVoice / VoiceDesign fixture shares its speech and text tokenizers with the Base fixture of its
    shape (git stores the identical files once; the Base fixture's decoder and tokenizer cases cover them)."""
    spec = oracle.SPECS[name]
    if spec.kind == "base":
        return
    twin = next(n for n, s in oracle.SPECS.items() if s.kind == "base" and s.speech_seed == spec.speech_seed)
    for rel in SHARED_FILES:
        a, b = models_dir / name / rel, models_dir / twin / rel
        if b.is_file() and a.read_bytes() != b.read_bytes():
            raise SystemExit(f"{name}/{rel} differs from {twin}/{rel}: the shared tokenizer was not rebuilt alike")


def _qwen_tts_version() -> str:
    from importlib.metadata import version

    return version("qwen-tts")


if __name__ == "__main__":
    raise SystemExit(main())
