"""The GUI tests' FakeSynthesizer and the real Synthesizer (on the demo bundle) pass the same contract checks.

Every check runs against both, so the fake cannot drift from the engine the GUI really talks to: eager
validation, the reference checks of voice creation, events in order with one final result, streaming chunks that
add up to the audio, seeds, the frame cap, and cancelling by closing the generator.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import numpy as np
import pytest

from engine import (
    MAX_BATCH_SIZE,
    SAMPLES_PER_FRAME,
    WHISPER_LANGUAGES,
    AudioChunk,
    AudioError,
    Cancelled,
    ChunkAudio,
    ChunkFrame,
    ChunkStream,
    FrameEvent,
    GenerationSettings,
    LanguageError,
    SynthesisResult,
    SynthesizerContract,
    TextError,
    Timings,
    Transcript,
    Voice,
    VoiceError,
    estimated_frames,
)
from qwen3tts_gui.engine_adapter import TranscriberContract

from .fakes import FakeSynthesizer, FakeTranscriber, speech_like

SR = 24000


@pytest.fixture(scope="module", params=["fake", "real"])
def synth(request):
    if request.param == "fake":
        return FakeSynthesizer(frame_delay=0.0)
    from engine import Synthesizer

    return Synthesizer(request.getfixturevalue("demo_bundle"), threads=1)


@pytest.fixture(scope="module")
def voice(synth) -> Voice:
    return synth.create_voice((speech_like(2.0, SR), SR), name="Contract")


def run(synth, voice, text="Hello there, how are you?", **settings):
    return list(synth.synthesize(text, voice, "english", GenerationSettings(**settings)))


def test_properties(synth):
    assert synth.languages[0] == "auto" and "english" in synth.languages
    assert isinstance(synth.model_id, str) and synth.model_id
    d = synth.default_settings
    assert isinstance(d, GenerationSettings)
    assert None not in (d.temperature, d.top_k, d.top_p, d.repetition_penalty)
    assert synth.decoder_precision in ("fp32", "bf16", "fp16")


def _members(cls) -> dict[str, object]:
    return {n: v for n, v in vars(cls).items() if not n.startswith("_")} | {
        n: None for n in getattr(cls, "__annotations__", {}) if not n.startswith("_")}


def test_both_implement_the_one_contract(synth):
    """Every member of engine.SynthesizerContract exists, and every method takes the contract's parameters first,
    with its defaults (any further parameter has a default): the app may call either in the same way."""
    assert isinstance(synth, SynthesizerContract)
    for name, member in _members(SynthesizerContract).items():
        assert hasattr(synth, name), name
        if inspect.isfunction(member):
            want = [(p.name, p.default) for p in inspect.signature(member).parameters.values()][1:]
            params = list(inspect.signature(getattr(synth, name)).parameters.values())
            assert [(p.name, p.default) for p in params[:len(want)]] == want, name
            assert all(p.default is not inspect.Parameter.empty for p in params[len(want):]), name


def test_model_facts_and_refusals(synth, voice):
    """The demo model and the fake are Base models: no speakers, no instruction, a voice's x-vector length."""
    assert synth.kind.kind == "base" and synth.kind.speakers == () and not synth.kind.honours_instruct
    assert synth.hidden_size == voice.xvector.shape[0]
    assert synth.precision in ("fp32", "fp16", "q8") and isinstance(synth.load_seconds, float)
    assert len(synth.thread_counts) == 2 and all(isinstance(t, int) and t >= 1 for t in synth.thread_counts)
    assert synth.kind.check_instruct(None) == "" and synth.kind.instruct_note(None) is None
    with pytest.raises(TextError):
        synth.kind.check_instruct("Speak slowly.")
    with pytest.raises(VoiceError):
        synth.kind.speaker("ryan")
    with pytest.raises(VoiceError):
        synth.check_voice(None)


def test_decode_gives_the_audio_of_the_codes(synth, voice):
    result = run(synth, voice, seed=5, max_frames=6)[-1]
    assert np.array_equal(synth.decode(result.codes), result.audio)


def test_voice_from_a_reference(synth, voice):
    assert voice.model_id == synth.model_id and voice.name == "Contract" and not voice.icl
    assert voice.xvector.ndim == 1 and np.isfinite(voice.xvector).all()
    icl = synth.create_voice((speech_like(2.0, SR), SR), ref_text="Hello there.", language="english")
    assert icl.icl and icl.language == "english"
    assert icl.ref_codes.ndim == 2 and icl.ref_codes.shape[1] == 16 and icl.ref_codes.shape[0] >= 1


@pytest.mark.parametrize("samples", [speech_like(2.0, SR)[: SR // 5], np.zeros(SR, np.float32)],
                         ids=["too short", "silent"])
def test_unusable_reference_is_an_audio_error(synth, samples):
    with pytest.raises(AudioError):
        synth.create_voice((samples, SR))


def test_bad_input_is_refused_before_the_first_event(synth, voice):
    with pytest.raises(TextError):
        synth.synthesize("   ", voice, "english")
    with pytest.raises(TextError):
        synth.synthesize("Hello.", voice, "klingon")
    with pytest.raises(TextError):
        synth.synthesize("Hello.", voice, "english", GenerationSettings(temperature=0.0))
    with pytest.raises(VoiceError):
        synth.synthesize("Hello.", Voice(xvector=voice.xvector, model_id="another-model"), "english")
    synth.check_language("english")
    synth.check_voice(voice)
    synth.check_settings(GenerationSettings(seed=3))


def test_events_in_order_then_one_result(synth, voice):
    events = run(synth, voice, seed=7, max_frames=12, stream_audio=True)
    result = events[-1]
    assert isinstance(result, SynthesisResult) and sum(isinstance(e, SynthesisResult) for e in events) == 1
    frames = [e for e in events if isinstance(e, FrameEvent)]
    assert 1 <= len(frames) <= 12 and [f.index for f in frames] == list(range(len(frames)))
    assert all(f.max_frames == 12 and f.estimated_frames >= f.index + 1 for f in frames)
    assert np.array_equal(np.stack([f.codes for f in frames]), result.codes) and result.codes.shape[1] == 16
    # chunks are contiguous, never ahead of the frames made so far, and add up to the result's audio
    made, streamed = 0, []
    for e in events:
        if isinstance(e, FrameEvent):
            made = e.index + 1
        elif isinstance(e, AudioChunk):
            assert e.start_sample == sum(len(s) for s in streamed)
            streamed.append(e.samples)
            assert e.start_sample + len(e.samples) <= made * SAMPLES_PER_FRAME
    assert np.array_equal(np.concatenate(streamed), result.audio)
    assert len(result.audio) == len(result.codes) * SAMPLES_PER_FRAME and result.audio.dtype == np.float32
    assert result.seed == 7 and result.ended_by in ("eos", "cap") and isinstance(result.timings, Timings)


def test_the_first_frame_reports_the_estimate_from_the_text(synth, voice):
    """What a long text's expected length (RecordingLength) adds up per chunk is what a synthesis reports."""
    text = "Hello there, how are you?"
    gen = synth.synthesize(text, voice, "english", GenerationSettings(seed=3))
    first = next(gen)
    gen.close()
    assert first.index == 0 and first.estimated_frames == estimated_frames(text)
    capped = synth.synthesize(text, voice, "english", GenerationSettings(seed=3, max_frames=5))
    assert next(capped).estimated_frames == 5
    capped.close()


def test_no_chunks_without_streaming_and_the_cap_holds(synth, voice):
    events = run(synth, voice, "A sentence long enough to run into the frame cap of three. " * 3, seed=1,
                 max_frames=3)
    assert not any(isinstance(e, AudioChunk) for e in events)
    assert len(events[-1].codes) <= 3


def test_same_seed_same_codes(synth, voice):
    a, b = run(synth, voice, seed=11, max_frames=6)[-1], run(synth, voice, seed=11, max_frames=6)[-1]
    assert np.array_equal(a.codes, b.codes) and np.array_equal(a.audio, b.audio)


def test_closing_the_generator_cancels(synth, voice):
    gen = synth.synthesize("A long sentence to be cut short. " * 4, voice, "english",
                           GenerationSettings(seed=2, max_frames=40))
    first = next(gen)
    assert isinstance(first, FrameEvent) and first.index == 0
    gen.close()
    with pytest.raises(StopIteration):
        next(gen)
    assert isinstance(run(synth, voice, seed=2, max_frames=4)[-1], SynthesisResult)  # the next one runs


def _requests(voice, *specs, **settings):
    from engine import SynthesisRequest

    return [SynthesisRequest(text, voice, language, GenerationSettings(seed=seed, max_frames=cap, **settings))
            for text, seed, cap, language in specs]


def test_speak_many_streams_audio(synth, voice):
    """Requests asking stream_audio side by side: each one's ChunkStream pieces come between its first frame and
    its ChunkAudio, contiguous, never ahead of its frames, and add up to its audio; a request that does not ask
    gets none."""
    requests = _requests(voice, ("Hello there.", 10, 6, "english"), ("Hello there.", 7, 3, "english"),
                         stream_audio=True)
    requests += _requests(voice, ("Hello there.", 1, 4, "english"))
    events = list(synth.speak_many(requests, batch_size=3))
    plain = [ev.event for ev in events if ev.request == 2]
    assert not any(isinstance(e, ChunkStream) for e in plain)
    (audio,) = [e for e in plain if isinstance(e, ChunkAudio)]
    assert not audio.streamed and len(audio.samples) == len(audio.result.codes) * SAMPLES_PER_FRAME
    for j in (0, 1):
        mine = [ev.event for ev in events if ev.request == j]
        (audio,) = [e for e in mine if isinstance(e, ChunkAudio)]
        assert audio.streamed and mine.index(audio) == len(mine) - 2  # then its LongResult
        made, streamed = 0, []
        for e in mine[:-2]:
            if isinstance(e, ChunkFrame):
                made = e.frame.index + 1
            elif isinstance(e, ChunkStream):
                assert e.audio.start_sample == sum(len(s) for s in streamed)
                assert e.audio.start_sample + len(e.audio.samples) <= made * SAMPLES_PER_FRAME
                streamed.append(e.audio.samples)
        assert np.array_equal(np.concatenate(streamed), audio.result.audio)
        assert len(audio.result.audio) == len(audio.result.codes) * SAMPLES_PER_FRAME


def test_suggested_batch_size(synth, voice):
    """The model's suggestion is a valid batch size, and speak_many without one runs that many requests side by
    side: all of them start before the first ends, and the next waits."""
    n = synth.suggested_batch_size
    assert isinstance(n, int) and 1 <= n <= MAX_BATCH_SIZE
    requests = _requests(voice, *[("Hello there.", k, 3, "english") for k in range(n + 1)], greedy=True,
                         codes_only=True)
    started: set[int] = set()
    speeches = synth.speak_many(requests, longest_first=False)
    for ev in speeches:
        if isinstance(ev.event, ChunkAudio):
            break
        started.add(ev.request)
    speeches.close()
    assert started == set(range(n))


def test_speak_many(synth, voice):
    """Several requests through one door: each request's events tagged with its number and its codes those of
    speak() alone, a refused request failing alone with its own error, cancel(i) stopping one request between
    frames, longest_first starting the longest request first, and a bad batch size refused at once."""
    from engine import LongResult, SynthesisRequest, run_speech

    def request(text, seed, cap, language="english"):
        return SynthesisRequest(text, voice, language, GenerationSettings(seed=seed, max_frames=cap, codes_only=True))

    requests = [request("Hello there.", 3, 5), request("Hello.", 4, 9, "klingon"),
                request("Hello there, how are you today?", 5, 40), request("Hi there.", 6, 4)]
    speeches = synth.speak_many(requests, batch_size=2, longest_first=False)
    codes: dict[int, list] = {}
    errors: dict[int, type] = {}
    frames: dict[int, list[int]] = {}
    for ev in speeches:
        assert (ev.event is None) != (ev.error is None)
        if isinstance(ev.event, ChunkFrame):
            frames.setdefault(ev.request, []).append(ev.event.frame.index)
        if ev.error is not None:
            errors[ev.request] = type(ev.error)
        elif isinstance(ev.event, ChunkAudio):
            codes.setdefault(ev.request, []).append(ev.event.result.codes)
        elif isinstance(ev.event, ChunkFrame) and ev.request == 2 and ev.event.frame.index == 1:
            speeches.cancel(2)
        elif isinstance(ev.event, LongResult):
            assert ev.request in codes
    assert errors == {1: TextError, 2: Cancelled} and sorted(codes) == [0, 3]
    assert frames[2] == [0, 1] and all(frames[i] == list(range(len(codes[i][0]))) for i in (0, 3))
    for i in (0, 3):
        alone: list = []
        run_speech(synth.speak(requests[i]), on_audio=alone.append)
        assert len(codes[i]) == len(alone) == 1 and np.array_equal(codes[i][0], alone[0].result.codes)
    firsts = []
    for longest_first in (False, True):
        events = synth.speak_many([requests[3], requests[0]], batch_size=1, longest_first=longest_first)
        firsts.append(next(ev.request for ev in events if ev.event is not None))
        events.close()
    assert firsts == [0, 1]  # "Hello there." (cap 5) is expected to run longer than "Hi there." (cap 4)
    for bad in (0, MAX_BATCH_SIZE + 1):
        with pytest.raises(TextError):
            synth.speak_many(requests, batch_size=bad)


def test_tuning_reports_progress_and_cancels_cleanly(synth, tmp_path, monkeypatch):
    """tune(): Cancelled when cancel() is True (nothing changes, tuning still needed), else progress rising to 1.0
    and a record whose summary is one line; then no tuning is needed."""
    monkeypatch.setenv("QWEN3TTS_CACHE_DIR", str(tmp_path))  # the real engine stores its record there
    monkeypatch.setattr("os.getloadavg", lambda: (0.1, 0.1, 0.1))  # a quiet machine: the record is kept
    needed = synth.tuning_needed
    with pytest.raises(Cancelled):
        synth.tune(cancel=lambda: True)
    assert synth.tuning_needed == needed
    seen: list[tuple[float, str]] = []
    record = synth.tune(progress=lambda f, m: seen.append((f, m)))
    fractions = [f for f, _ in seen]
    assert fractions and fractions == sorted(fractions) and fractions[-1] == 1.0 and 0.0 <= fractions[0]
    assert all(isinstance(m, str) and m for _, m in seen)
    line = record.summary()
    assert isinstance(line, str) and line and "\n" not in line
    assert not synth.tuning_needed


# --- speech recognition: the GUI tests' FakeTranscriber against engine.Transcriber on the tiny Whisper fixture ---

WHISPER_FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "whisper"


@pytest.fixture(scope="module", params=["fake", "real"])
def transcriber(request, tmp_path_factory):
    if request.param == "fake":
        return FakeTranscriber(text="Guten Tag.", language="de")
    from engine import Transcriber, convert_checkpoint

    bundle = convert_checkpoint(WHISPER_FIXTURE / "models" / "tinywhisper80", tmp_path_factory.mktemp("w") / "b")
    return Transcriber(bundle, threads=1)


def _clip(name: str = "de_8k_4s.wav") -> tuple[np.ndarray, int]:
    from engine import read_audio_file

    samples, rate = read_audio_file(WHISPER_FIXTURE / "audio" / name)
    return samples, rate


def test_transcriber_matches_the_app_contract():
    assert isinstance(FakeTranscriber(), TranscriberContract)


def test_transcript_detects_the_language_or_takes_the_given_one(transcriber):
    seen: list[tuple[float, str]] = []
    heard = transcriber.transcribe(_clip(), progress=lambda f, m: seen.append((f, m)))
    assert isinstance(heard, Transcript) and isinstance(heard.text, str)
    assert heard.language_detected and heard.language in WHISPER_LANGUAGES
    assert heard.language_name == WHISPER_LANGUAGES[heard.language]
    fractions = [f for f, _ in seen]
    assert fractions and fractions[0] == 0.0 and fractions[-1] == 1.0 and fractions == sorted(fractions)
    given = transcriber.transcribe(_clip(), language="french")
    assert given.language == "fr" and not given.language_detected
    assert transcriber.transcribe(_clip(), language="fr").language == "fr"


def test_transcriber_cancel_raises_cancelled(transcriber):
    with pytest.raises(Cancelled):
        transcriber.transcribe(_clip(), cancel=lambda: True)


@pytest.mark.parametrize("audio", [
    (np.zeros(0, np.float32), 16000),  # empty
    (np.zeros(48000, np.float32), 16000),  # silent
    (np.full(16000, np.nan, np.float32), 16000),  # NaN
    (np.full(16000 * 31, 0.1, np.float32), 16000),  # past the 30 s window
])
def test_transcriber_refuses_unusable_audio_in_one_line(transcriber, audio):
    with pytest.raises(AudioError) as e:
        transcriber.transcribe(audio)
    assert "\n" not in str(e.value) and str(e.value)


def test_transcriber_refuses_an_unknown_language(transcriber):
    with pytest.raises(LanguageError):
        transcriber.transcribe(_clip(), language="klingon")
