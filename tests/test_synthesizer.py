"""Synthesizer API: events, cancel, seeds, settings, validation (the GUI's contract)."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from engine.errors import EngineError, TextError, VoiceError
from engine.synthesis.streaming import StreamedAudio
from engine.synthesis.synthesizer import Synthesizer
from engine.text.length import estimate_seconds
from engine.types import AudioChunk, FrameEvent, GenerationSettings, SynthesisResult, Timings
from engine.voice import Voice
from tests.bundles import bundle_for, fixture_models

AUDIO = Path(__file__).resolve().parent / "fixtures" / "audio"
STREAM_ATOL = 1e-4  # streamed vs whole decode, as in tests/test_codec_decoder.py


@pytest.fixture(scope="module")
def synth() -> Synthesizer:
    return Synthesizer(bundle_for(fixture_models()[0], "fp32", parts=["text", "talker", "codec_decoder"]),
                       decoder_precision="fp32")


@pytest.fixture(scope="module")
def voice(synth) -> Voice:
    rng = np.random.default_rng(0)
    return Voice(xvector=rng.standard_normal(synth.hidden_size).astype(np.float32), model_id=synth.model_id)


def codes_of(synth, voice, settings, text="Hello world, how are you?") -> np.ndarray:
    return list(synth.synthesize(text, voice, "english", settings))[-1].codes


def test_contract_properties(synth):
    assert synth.languages[0] == "auto" and "english" in synth.languages
    assert not any("dialect" in lang for lang in synth.languages)
    assert synth.model_id
    d = synth.default_settings
    gc = synth._bundle.generation_config
    assert d.temperature == gc["temperature"] and d.top_k == gc["top_k"] and d.greedy == (not gc["do_sample"])


def test_events_in_order_then_one_result(synth, voice):
    events = list(synth.synthesize("Hello world.", voice, "english",
                                   GenerationSettings(seed=1, max_frames=8, stream_audio=True)))
    frames = [e for e in events if isinstance(e, FrameEvent)]
    chunks = [e for e in events if isinstance(e, AudioChunk)]
    result = events[-1]
    assert isinstance(result, SynthesisResult)
    assert sum(isinstance(e, SynthesisResult) for e in events) == 1
    assert [f.index for f in frames] == list(range(len(result.codes)))
    assert all(f.max_frames == 8 and f.estimated_frames >= 1 and f.codes.shape == (16,) for f in frames)
    assert np.array_equal(np.stack([f.codes for f in frames]), result.codes)
    assert sum(len(c.samples) for c in chunks) == len(result.audio) == len(result.codes) * 1920
    assert result.seed == 1 and result.timings.frames == len(result.codes)


def test_same_seed_same_output_different_seed_different_output(synth, voice):
    a = codes_of(synth, voice, GenerationSettings(seed=5, max_frames=12))
    b = codes_of(synth, voice, GenerationSettings(seed=5, max_frames=12))
    c = codes_of(synth, voice, GenerationSettings(seed=6, max_frames=12))
    assert np.array_equal(a, b)
    assert not (a.shape == c.shape and np.array_equal(a, c))


def test_cancel_by_closing_the_generator(synth, voice):
    gen = synth.synthesize("Hello world, how are you?", voice, "english", GenerationSettings(greedy=True, max_frames=30))
    first = next(gen)
    assert isinstance(first, FrameEvent)
    next(gen)
    gen.close()
    # the next synthesis starts afresh and matches a fresh greedy run
    g1 = codes_of(synth, voice, GenerationSettings(greedy=True, max_frames=5))
    g2 = codes_of(synth, voice, GenerationSettings(greedy=True, max_frames=5))
    assert np.array_equal(g1, g2)
    assert np.array_equal(g1[0], first.codes)


def test_max_frames_is_an_upper_bound(synth, voice):
    text = "Hello world, how are you today? " * 3
    capped = list(synth.synthesize(text, voice, "english", GenerationSettings(seed=0, max_frames=3)))[-1]
    assert len(capped.codes) <= 3
    # with EOS masked the cap is the only way to stop: exactly max_frames frames, ended by the cap
    full = list(synth.synthesize(text, voice, "english", GenerationSettings(seed=0, max_frames=3, ignore_eos=True)))
    result = full[-1]
    assert result.codes.shape == (3, 16) and result.ended_by == "cap"
    assert len(result.audio) == 3 * 1920 and result.timings.audio_seconds == 3 * 1920 / 24000


def test_codes_only_skips_decoding_and_keeps_the_codes(synth, voice):
    settings = GenerationSettings(seed=4, max_frames=6, ignore_eos=True)
    decoded = list(synth.synthesize("Hello there.", voice, "english", settings))[-1]
    settings.codes_only = True
    codes_only = list(synth.synthesize("Hello there.", voice, "english", settings))[-1]
    assert np.array_equal(codes_only.codes, decoded.codes) and len(decoded.audio) == 6 * 1920
    assert len(codes_only.audio) == 0 and codes_only.timings.decode == 0.0
    assert np.array_equal(synth.decode(codes_only.codes), decoded.audio)


@pytest.mark.parametrize("field,value,named", [
    ("temperature", 0.0, "Temperature"), ("temperature", -1.0, "Temperature"),
    ("temperature", float("nan"), "Temperature"), ("subtalker_temperature", float("inf"), "Code predictor temperature"),
    ("top_k", -1, "Top-k"), ("top_k", 2.5, "Top-k"), ("subtalker_top_k", -3, "Code predictor top-k"),
    ("top_p", 0.0, "Top-p"), ("top_p", 1.5, "Top-p"), ("subtalker_top_p", float("nan"), "Code predictor top-p"),
    ("repetition_penalty", 0.0, "Repetition penalty"), ("repetition_penalty", float("inf"), "Repetition penalty"),
    ("seed", -1, "Seed"), ("seed", 2**63, "Seed"), ("seed", 1.5, "Seed"),
    ("max_frames", 0, "Max frames"), ("max_frames", -5, "Max frames"),
])
def test_settings_out_of_range_are_refused_with_their_name(synth, voice, field, value, named):
    settings = GenerationSettings(**{field: value})
    with pytest.raises(TextError) as info:
        synth.synthesize("Hi there.", voice, "english", settings)
    message = str(info.value)
    assert named in message and repr(value) in message and "\n" not in message
    with pytest.raises(TextError):
        synth.check_settings(settings)


def test_codes_only_cannot_stream(synth, voice):
    with pytest.raises(TextError, match="codes_only"):
        synth.synthesize("Hi there.", voice, "english", GenerationSettings(codes_only=True, stream_audio=True))


@pytest.mark.parametrize("text,language,error", [
    ("", "english", TextError), ("  \n ", "english", TextError), ("Hi.", "klingon", TextError),
])
def test_bad_text_and_language(synth, voice, text, language, error):
    with pytest.raises(error):
        synth.synthesize(text, voice, language)


def test_text_too_long_for_the_cap(synth, voice):
    with pytest.raises(TextError, match="too long"):
        synth.synthesize("This sentence is quite long. " * 400, voice, "english")
    with pytest.raises(TextError):
        synth.synthesize("Hi.", voice, "english", GenerationSettings(max_frames=0))


def test_voice_checks(synth, voice, tmp_path):
    foreign = Voice(xvector=voice.xvector, model_id="another-model")
    with pytest.raises(VoiceError, match="different model"):
        synth.synthesize("Hi there.", foreign, "english")
    wrong_width = Voice(xvector=np.zeros(synth.hidden_size + 1, np.float32), model_id=synth.model_id)
    with pytest.raises(VoiceError):
        synth.synthesize("Hi there.", wrong_width, "english")
    bad_codes = Voice(xvector=voice.xvector, model_id=synth.model_id, ref_codes=np.full((3, 16), 10**6),
                      ref_text="hello")
    with pytest.raises(VoiceError):
        synth.synthesize("Hi there.", bad_codes, "english")
    # voice files round-trip and keep the model id
    path = voice.save(tmp_path / "v.qvoice")
    back = Voice.load(path, model_id=synth.model_id)
    assert np.array_equal(back.xvector, voice.xvector)
    with pytest.raises(VoiceError):
        Voice.load(path, model_id="another-model")


def test_errors_are_engine_errors():
    assert issubclass(TextError, EngineError) and issubclass(VoiceError, EngineError)


def test_estimate_seconds_scales_with_text():
    assert estimate_seconds("你好，世界。" * 10) > estimate_seconds("你好，世界。")
    assert 1.0 < estimate_seconds("The quick brown fox jumps over the lazy dog.") < 6.0


def test_two_syntheses_open_at_once_each_get_their_own_codes(synth, voice):
    """Each synthesis holds its own KV cache: one started and run to its end while another is half done changes
    neither's codes."""
    text, settings = "Hello world, how are you?", GenerationSettings(seed=2, max_frames=20, codes_only=True)
    short, greedy = "Hi.", GenerationSettings(greedy=True, max_frames=4, codes_only=True)
    want_first = list(synth.synthesize(text, voice, "english", settings))[-1].codes
    want_second = list(synth.synthesize(short, voice, "english", greedy))[-1].codes
    first = synth.synthesize(text, voice, "english", settings)
    head = [next(first), next(first)]
    second = list(synth.synthesize(short, voice, "english", greedy))
    rest = list(first)
    assert [e.index for e in head] == [0, 1] and len(want_first) > 2
    np.testing.assert_array_equal(second[-1].codes, want_second)
    np.testing.assert_array_equal(rest[-1].codes, want_first)


@pytest.mark.parametrize("overlap", [True, False], ids=["overlap", "inline"])
def test_streamed_chunks_same_with_and_without_overlap(synth, voice, overlap):
    """Decoding on the worker thread changes when chunks arrive, never what they hold or their order."""
    settings = GenerationSettings(seed=3, max_frames=10, stream_audio=True)
    synth.overlap_decode = False
    want = list(synth.synthesize("Hello world.", voice, "english", settings))
    synth.overlap_decode = overlap
    try:
        got = list(synth.synthesize("Hello world.", voice, "english", settings))
    finally:
        synth.overlap_decode = True
    chunks = [[e for e in run if isinstance(e, AudioChunk)] for run in (want, got)]
    assert [c.start_sample for c in chunks[0]] == [c.start_sample for c in chunks[1]]
    # frames the worker finds waiting decode in one push: equal to one push per frame within the streaming
    # decoder's tolerance (tests/test_codec_decoder.py), not bit for bit
    for a, b in zip(*chunks, strict=True):
        np.testing.assert_allclose(a.samples, b.samples, rtol=0, atol=STREAM_ATOL)
    np.testing.assert_allclose(want[-1].audio, got[-1].audio, rtol=0, atol=STREAM_ATOL)
    frames_seen = 0
    for e in got:  # a chunk never comes before the frame it decodes
        frames_seen += isinstance(e, FrameEvent)
        if isinstance(e, AudioChunk):
            assert e.start_sample + len(e.samples) <= frames_seen * 1920


class _HeldStream:
    """A real streaming decoder whose pushes wait while `hold` is set: frames pile up behind the worker."""

    def __init__(self, decoder):
        self._stream = decoder.stream()
        self.go = threading.Event()
        self.go.set()
        self.sizes: list[int] = []

    def stream(self):
        return self

    def push(self, frames):
        assert self.go.wait(30)
        self.sizes.append(len(frames))
        return self._stream.push(frames)


def test_overlap_decodes_waiting_frames_in_one_push(synth):
    """Frames generated while the worker is busy go to the decoder together; the audio is still one chunk per
    frame and equals the whole decode."""
    dec = synth._decoder
    codes = np.random.default_rng(4).integers(0, dec.codebook_sizes, size=(6, dec.num_quantizers))
    held = _HeldStream(dec)
    stream = StreamedAudio(held, None, Timings(), overlap=True)
    try:
        chunks = stream.push(codes[0])  # the first chunk is waited for
        held.go.clear()  # the worker now stops inside its next push
        for frame in codes[1:]:
            chunks += stream.push(frame)
        held.go.set()
        chunks += stream.finish()
    finally:
        held.go.set()
        stream.close()
    # frame 1 (maybe with some of the others) is held in the decoder; the rest wait and go in one push
    assert held.sizes[0] == 1 and sum(held.sizes[1:]) == 5 and len(held.sizes[1:]) <= 2
    assert [c.start_sample for c in chunks] == [i * 1920 for i in range(6)]
    assert all(len(c.samples) == 1920 for c in chunks)
    np.testing.assert_allclose(np.concatenate([c.samples for c in chunks]), dec.decode(codes), rtol=0,
                               atol=STREAM_ATOL)


def test_decoder_precision_reaches_the_decoder():
    """Synthesizer(decoder_precision=...) picks the speech decoder's precision; a bad name fails at once, in one
    sentence, before the bundle is read."""
    bundle = bundle_for(fixture_models()[0], "fp32", parts=["text", "talker", "codec_decoder"])
    fast = Synthesizer(bundle, threads=1, decoder_precision="bf16")
    assert fast.decoder_precision == "bf16"
    codes = np.zeros((3, 16), np.int64)
    exact = Synthesizer(bundle, threads=1, decoder_precision="fp32")
    assert exact.decoder_precision == "fp32"
    assert not np.array_equal(fast.decode(codes + 5), exact.decode(codes + 5))
    with pytest.raises(EngineError, match="Unknown speech decoder precision") as e:
        Synthesizer("/nonexistent/bundle", decoder_precision="quick")
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("stream", [False, True])
def test_a_short_request_through_speak_is_exactly_its_synthesis(synth, voice, stream):
    """speak() treats a short text as a long text of one chunk, and that chunk is the synthesis itself: the same
    codes and the same audio samples as synthesize() with the seed and the frame cap speak gives it (the guard's
    cap when not streamed, the caller's when streamed), and run_speech hands over exactly that audio."""
    from engine import SynthesisRequest, run_speech

    text = "Hello world, how are you?"
    settings = GenerationSettings(seed=5, max_frames=12, stream_audio=stream)
    samples, pieces = [], []
    result = run_speech(synth.speak(SynthesisRequest(text, voice, "english", settings)),
                        on_samples=samples.append, on_audio=pieces.append)
    alone = list(synth.synthesize(text, voice, "english", settings))[-1]
    (piece,) = pieces
    assert np.array_equal(piece.result.codes, alone.codes) and result.frames == len(alone.codes)
    heard = np.concatenate([s.samples for s in samples])
    assert np.array_equal(heard, piece.result.audio) and np.array_equal(piece.samples, piece.result.audio)
    if stream:  # where streamed decoding cuts its pieces follows the decoder thread's timing (STREAM_ATOL)
        np.testing.assert_allclose(heard, alone.audio, rtol=0, atol=STREAM_ATOL)
    else:
        assert np.array_equal(heard, alone.audio)
    assert result.seed == 5 and result.samples == len(alone.audio) and piece.streamed == stream


def test_speak_checks_a_short_request_before_the_first_event(synth, voice):
    from engine import SynthesisRequest

    with pytest.raises(TextError, match="max frames"):
        synth.speak(SynthesisRequest("Hello world.", voice, "english",
                                     GenerationSettings(max_frames=10**9, stream_audio=True)))
