"""Several requests through one door, Synthesizer.speak_many: each request's events are exactly what speak() alone
gives it (codes, audio, retries, skips), requests of one chunk share model steps, longer ones are chunked, a refused
request fails alone, cancel(i) stops one request and close() all; run_speeches is the one loop over them.

On the scripted synthesizer of tests/test_longform.py (runaways happen when the test says), then on the fixture
model at fp32 and q8 (q8 sequences really share each step's weight pass)."""

from __future__ import annotations

import numpy as np
import pytest

from engine.errors import Cancelled, EngineError, TextError
from engine.longform.consuming import run_speeches
from engine.longform.events import ChunkAudio, ChunkFrame, ChunkRetry, ChunkSkipped, ChunkStarted, LongResult
from engine.longform.many import speak_many
from engine.longform.request import LongTextOptions, SynthesisRequest
from engine.longform.runaway import GuardSettings
from engine.longform.runner import speak
from engine.types import GenerationSettings
from tests.test_longform import CHUNKS, TEXT, VOICE, ScriptedSynth

OPTIONS = LongTextOptions(max_chars=20, guard=GuardSettings(retries=2, loop_seconds=1.0), batch_size=2)
SCRIPT = {"Bravo two here.": ["loop", "ok"], "Second one here.": ["long", "ok"], "Echo five here.": ["loop"],
          "Foxtrot six.": ["bad"]}


def _request(text: str, seed: int, language: str = "english", **settings) -> SynthesisRequest:
    return SynthesisRequest(text, VOICE, language, GenerationSettings(seed=seed, **settings), options=OPTIONS)


REQUESTS = [
    _request("Alpha one here.", 1),
    _request("Bravo two here.", 2),  # loops at first: retried with another seed, as alone
    _request(TEXT, 3),  # four chunks: the long-text runner
    _request("Delta four here.", 4, language="klingon"),  # refused by its checks
    _request("Echo five here.", 5),  # always loops: left out, so nothing of it could be generated
    _request("Foxtrot six.", 6),  # the model refuses its text: the request's own error, as speak() raises it
    _request("Golf seven here.", 7, stream_audio=True),  # streamed: not guarded, synthesize's cap
]


def summary(ev) -> tuple:
    """What an event says, timings aside."""
    if isinstance(ev, ChunkFrame):
        return "frame", ev.chunk, ev.attempt, ev.frame.index, ev.frame.codes.tobytes()
    if isinstance(ev, ChunkAudio):
        return ("audio", ev.chunk, ev.attempts, ev.start_sample, ev.samples.tobytes(), ev.result.codes.tobytes(),
                ev.result.seed)
    if isinstance(ev, LongResult):
        return "result", ev.chunks, ev.samples, ev.frames, ev.seed, [s.message for s in ev.skipped]
    if isinstance(ev, ChunkStarted):
        return "started", ev.chunk, ev.text
    if isinstance(ev, ChunkRetry):
        return "retry", ev.chunk, ev.attempt, ev.reason, ev.seed
    if isinstance(ev, ChunkSkipped):
        return "skipped", ev.chunk, ev.reason, ev.attempts
    raise AssertionError(f"unexpected {ev!r}")


def alone(request: SynthesisRequest, frames: int = 6) -> list[tuple] | type[EngineError]:
    """speak(request) on a synthesizer of its own: its events, or the type of the error it raises."""
    try:
        return [summary(ev) for ev in speak(ScriptedSynth(SCRIPT, frames), request)]
    except EngineError as e:
        return type(e)


def tagged(events) -> dict[int, list[tuple] | type[EngineError]]:
    out: dict[int, list] = {}
    for ev in events:
        if ev.error is not None:
            assert ev.request not in out or not isinstance(out[ev.request], type), "nothing follows an error"
            out[ev.request] = type(ev.error)
        else:
            out.setdefault(ev.request, []).append(summary(ev.event))
    return out


@pytest.mark.parametrize("batch_size", [1, 3])
def test_each_request_gets_what_it_gets_alone(batch_size):
    synth = ScriptedSynth(SCRIPT)
    got = tagged(speak_many(synth, REQUESTS, batch_size=batch_size))
    assert got == {i: alone(r) for i, r in enumerate(REQUESTS)}
    assert got[3] is TextError and got[5] is TextError and synth.open_generators == 0
    assert sum(1 for ev in got[1] if ev[0] == "retry") == 1 and ("skipped", 0) == got[4][-2][:2]
    # the short ones shared their run: the first attempts of requests 0, 1, 4, 5 and 6 in one synthesize_many
    texts = [t for t, _ in synth.calls]
    assert sorted(texts[:5]) == ["Alpha one here.", "Bravo two here.", "Echo five here.", "Foxtrot six.",
                                 "Golf seven here."]
    assert texts[5:8] == ["Bravo two here.", "Echo five here.", "Echo five here."]  # retries, before the long text
    assert texts[8:] == [*CHUNKS, "Second one here."]  # then the long text, chunked (its second chunk retried)


def test_longest_first_changes_no_request():
    requests = [_request("Hi.", 1), _request("A longer line here.", 2)]
    for longest_first in (False, True):
        synth = ScriptedSynth({})
        got = tagged(speak_many(synth, requests, batch_size=1, longest_first=longest_first))
        assert got == {i: alone(r) for i, r in enumerate(requests)}
        assert synth.calls[0][0] == requests[1 if longest_first else 0].text


def test_run_speeches_reports_each_request_once():
    done, failed, samples = {}, {}, {}
    outcomes = run_speeches(speak_many(ScriptedSynth(SCRIPT), REQUESTS, batch_size=3),
                            on_samples=lambda i, chunk: samples.setdefault(i, []).append(chunk.samples),
                            on_done=lambda i, result: done.setdefault(i, result),
                            on_failed=lambda i, error: failed.setdefault(i, error))
    assert sorted(done) == [0, 1, 2, 6] and sorted(failed) == [3, 4, 5]
    assert "No part of the text could be generated" in str(failed[4]) and isinstance(failed[3], TextError)
    assert outcomes == done | failed
    for i in done:  # the recording's samples, once each, as run_speech hands them over for the request alone
        assert sum(len(s) for s in samples[i]) == done[i].samples > 0


def test_cancel_stops_one_request_and_close_stops_all():
    synth = ScriptedSynth({}, frames=12)
    requests = [_request("Alpha one here.", 1), _request("Bravo two here.", 2), _request(TEXT, 3),
                _request("Charlie three.", 4)]
    speeches = speak_many(synth, requests, batch_size=2)
    seen: dict[int, list] = {}
    for ev in speeches:
        seen.setdefault(ev.request, []).append(ev.error or ev.event)
        if ev.request == 1 and isinstance(ev.event, ChunkFrame) and ev.event.frame.index == 2:
            speeches.cancel(1)
        if ev.request == 2 and isinstance(ev.event, ChunkAudio) and ev.event.chunk == 0:
            speeches.cancel(2)  # a long text between its chunks
    assert isinstance(seen[1][-1], Cancelled) and [e.frame.index for e in seen[1] if isinstance(e, ChunkFrame)] == \
        [0, 1, 2]
    assert isinstance(seen[2][-1], Cancelled) and not any(isinstance(e, LongResult) for e in seen[2])
    for i in (0, 3):
        assert [summary(e) for e in seen[i]] == alone(requests[i], frames=12)
    assert synth.open_generators == 0
    speeches.cancel(0)  # finished: nothing to stop
    # close() in the middle stops every request and every generator
    speeches = speak_many(synth, requests, batch_size=2)
    for _ in range(5):
        next(speeches)
    assert synth.open_generators == 2
    speeches.close()
    assert synth.open_generators == 0
    with pytest.raises(StopIteration):
        next(speeches)


def test_bad_batch_size_is_refused_at_once():
    with pytest.raises(TextError, match="Batch size"):
        speak_many(ScriptedSynth({}), REQUESTS, batch_size=0)
    speeches = speak_many(ScriptedSynth({}), [REQUESTS[0], "not a request"], batch_size=1)
    assert isinstance(speeches.requests[0], SynthesisRequest) and 1 not in speeches.chunks
    assert isinstance(next(speeches).error, TextError)


# ------------------------------------------------------------------------------------------------ the real engine


@pytest.fixture(scope="module", params=["fp32", "q8"])
def engine_synth(request):
    from engine.synthesis.synthesizer import Synthesizer
    from tests.bundles import bundle_for, fixture_models

    return Synthesizer(bundle_for(fixture_models()[0], request.param, parts=["text", "talker", "codec_decoder"]),
                       threads=1, decoder_precision="fp32")


def test_speak_many_on_the_model_is_speak_alone(engine_synth):
    """Sampled requests with their own seeds and caps side by side, a long one, a streamed one and a refused one:
    every request's codes and audio are what synth.speak(request) alone gives (a streamed one's audio streams
    side by side too: within the streaming decoder's tolerance of what it streams alone)."""
    from engine.voice import Voice
    from tests.test_synthesizer import STREAM_ATOL

    synth = engine_synth
    voice = Voice(xvector=np.random.default_rng(0).standard_normal(synth.hidden_size).astype(np.float32),
                  model_id=synth.model_id)
    long = LongTextOptions(max_chars=20, batch_size=2)
    requests = [SynthesisRequest(text, voice, "english", GenerationSettings(seed=seed, max_frames=cap),
                                 options=options)
                for text, seed, cap, options in [
                    ("Hello world, how are you?", 5, 12, LongTextOptions()),
                    ("Good morning.", 6, 20, LongTextOptions()),
                    ("First part here. And the second part.", 7, 9, long),
                    ("The weather is fine today.", 8, 7, LongTextOptions()),
                ]]
    requests.append(SynthesisRequest("Streamed line.", voice, "english",
                                     GenerationSettings(seed=9, max_frames=8, stream_audio=True)))
    requests.append(SynthesisRequest("Refused.", voice, "klingon"))
    pieces: dict[int, list[ChunkAudio]] = {}
    outcomes = run_speeches(synth.speak_many(requests, batch_size=3),
                            on_audio=lambda i, ev: pieces.setdefault(i, []).append(ev))
    assert isinstance(outcomes[5], TextError)
    for i, request in enumerate(requests[:5]):
        want: list[ChunkAudio] = []
        result = run_speeches_alone(synth, request, want)
        assert len(pieces[i]) == len(want) and outcomes[i].samples == result.samples
        for got, expect in zip(pieces[i], want, strict=True):
            assert np.array_equal(got.result.codes, expect.result.codes), f"request {i}: codes differ"
            if request.settings.stream_audio:
                np.testing.assert_allclose(got.samples, expect.samples, rtol=0, atol=STREAM_ATOL)
            else:
                assert np.array_equal(got.samples, expect.samples), f"request {i}: audio differs"
    assert len(pieces[2]) == 2


def run_speeches_alone(synth, request, pieces: list) -> LongResult:
    from engine.longform.consuming import run_speech

    return run_speech(synth.speak(request), on_audio=pieces.append)


@pytest.mark.parametrize("overlap", [True, False], ids=["overlap", "inline"])
def test_streamed_requests_side_by_side_stream_as_they_are_decoded(engine_synth, overlap):
    """Requests asking stream_audio, side by side with one that does not: each streamed one's audio comes as
    ChunkStream pieces, in order, before its ChunkAudio (which holds the same samples, streamed=True); the plain
    one has none. The audio is speak() alone's. Decoded on the generating thread (overlap off), each piece follows
    its frame at once, so audio goes out while the other requests are still generating; on the decoder's own
    thread it comes when that thread has it."""
    from engine.longform.events import ChunkStream
    from engine.voice import Voice
    from tests.test_synthesizer import STREAM_ATOL

    synth = engine_synth
    voice = Voice(xvector=np.random.default_rng(1).standard_normal(synth.hidden_size).astype(np.float32),
                  model_id=synth.model_id)
    requests = [SynthesisRequest(text, voice, "english", GenerationSettings(seed=seed, max_frames=cap,
                                                                            stream_audio=stream))
                for text, seed, cap, stream in [("Streamed first line.", 3, 10, True), ("A plain one.", 4, 14, False),
                                                ("Streamed second line here.", 5, 12, True)]]
    synth.overlap_decode = overlap
    try:
        events = list(synth.speak_many(requests, batch_size=3))
    finally:
        synth.overlap_decode = True
    assert not [ev for ev in events if ev.error is not None]
    for i, request in enumerate(requests):
        mine = [ev.event for ev in events if ev.request == i]
        streamed = [ev.audio for ev in mine if isinstance(ev, ChunkStream)]
        audio = [ev for ev in mine if isinstance(ev, ChunkAudio)]
        assert len(audio) == 1 and audio[0].streamed == request.settings.stream_audio
        if not request.settings.stream_audio:
            assert not streamed
            continue
        assert len(streamed) > 1 and [c.start_sample for c in streamed] == list(
            np.cumsum([0] + [len(c.samples) for c in streamed])[:-1])
        assert np.array_equal(np.concatenate([c.samples for c in streamed]), audio[0].samples)
        assert mine.index(audio[0]) > max(k for k, ev in enumerate(mine) if isinstance(ev, ChunkStream))
        want: list[ChunkAudio] = []
        run_speeches_alone(synth, request, want)
        assert np.array_equal(audio[0].result.codes, want[0].result.codes)
        np.testing.assert_allclose(audio[0].samples, want[0].samples, rtol=0, atol=STREAM_ATOL)
    if not overlap:
        plain_last_frame = max(k for k, ev in enumerate(events) if ev.request == 1 and isinstance(ev.event, ChunkFrame))
        first_streamed = min(k for k, ev in enumerate(events) if isinstance(ev.event, ChunkStream))
        assert first_streamed < plain_last_frame  # audio went out while another request was still generating


def test_requests_whose_settings_differ_run_in_turns_and_a_waiting_one_can_be_cancelled():
    """A run shares one set of settings (but for seed and cap): requests with other settings wait for a run of
    their own, each still given its own settings; one cancelled while it waits never reaches the model."""
    synth = ScriptedSynth({})
    requests = [_request("Alpha one here.", 1, temperature=0.7), _request("Bravo two there.", 2, temperature=0.9),
                _request("Charlie three.", 3, temperature=0.7), _request("Delta four.", 4, temperature=0.9)]
    speeches = speak_many(synth, requests, batch_size=4, longest_first=False)
    seen: dict[int, list] = {}
    for ev in speeches:
        seen.setdefault(ev.request, []).append(ev.error or ev.event)
        if ev.request == 0 and isinstance(ev.event, ChunkStarted):
            speeches.cancel(3)
    assert [(t, s.temperature) for t, s in synth.calls] == [("Alpha one here.", 0.7), ("Charlie three.", 0.7),
                                                            ("Bravo two there.", 0.9)]
    assert [type(e) for e in seen[3]] == [Cancelled]
    for i in (0, 1, 2):
        assert [summary(e) for e in seen[i]] == alone(requests[i])
