"""Long synthesis: joining (length, fades, no clicks), the streamed writer, the runaway guard, chunk retries and
skips (on a scripted synthesizer, so runaways happen exactly when the test says), and a long text end to end on
the demo model through `qwen3tts synth --text-file`."""

from __future__ import annotations

import os
import stat
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from engine.errors import AudioError, Cancelled, EngineError, TextError
from engine.io.audio_writer import AudioFileWriter
from engine.longform.consuming import run_speech
from engine.longform.events import (
    ChunkAudio,
    ChunkFrame,
    ChunkProgress,
    ChunkRetry,
    ChunkSkipped,
    ChunkStarted,
    ChunkStream,
    LongResult,
)
from engine.longform.joining import JoinSettings, fade_edges, joined_piece, pause_samples, seconds_to_samples
from engine.longform.recording_length import RecordingLength
from engine.longform.request import LongTextOptions, SynthesisRequest, split_for_synthesis
from engine.longform.runaway import GuardSettings, RunawayGuard
from engine.longform.runner import speak
from engine.text.length import estimated_frames
from engine.types import AudioChunk, FrameEvent, GenerationSettings, SynthesisResult
from engine.voice import Voice
from qwen3tts_cli.main import main

SR = 24000
SPF = 1920

# ------------------------------------------------------------------------------------------------ joining


def test_fade_is_a_symmetric_raised_cosine_that_leaves_the_middle_alone():
    audio = np.ones(1000, np.float32)
    out = fade_edges(audio, 100)
    assert np.array_equal(out[100:900], audio[100:900])
    assert np.allclose(out[:100], out[::-1][:100])
    assert np.all(np.diff(out[:100]) > 0) and 0 < out[0] < 0.001 and out[99] > 0.999
    assert np.array_equal(audio, np.ones(1000, np.float32))  # the input is not changed


def test_fade_of_audio_shorter_than_two_fades_is_shortened():
    out = fade_edges(np.ones(10, np.float32), 100)
    assert out.shape == (10,) and out[0] < out[4] and np.allclose(out, out[::-1])


@pytest.mark.parametrize("sentence_pause,paragraph_pause", [(0.35, 0.9), (0.0, 0.0), (0.1, 2.0)])
def test_joined_length_is_chunks_plus_pauses_and_seams_do_not_click(sentence_pause, paragraph_pause):
    join = JoinSettings(sentence_pause=sentence_pause, paragraph_pause=paragraph_pause, fade=0.012)
    # the worst case for a click: chunks that start and end at full scale (DC), with opposite signs
    chunks = [np.full(5000, 0.9, np.float32), np.full(7000, -0.9, np.float32), np.full(3000, 0.9, np.float32)]
    after_paragraph = [False, False, True]
    pieces = [joined_piece(c, pause_samples(p, join) if i else 0, join)
              for i, (c, p) in enumerate(zip(chunks, after_paragraph, strict=True))]
    joined = np.concatenate(pieces)
    pauses = pause_samples(False, join) + pause_samples(True, join)
    assert len(joined) == sum(len(c) for c in chunks) + pauses
    # a raised cosine over n samples rises at most pi/(2n) per sample; a hard cut would jump by 1.8 here
    n = seconds_to_samples(join.fade)
    bound = 0.9 * np.sin(np.pi / (2 * n)) * 2
    assert np.abs(np.diff(joined)).max() <= bound
    assert np.abs(np.diff(np.concatenate([[0.0], joined, [0.0]]))).max() <= bound  # starts and ends quietly


def test_pauses_are_silence_of_the_configured_length():
    join = JoinSettings(sentence_pause=0.25, paragraph_pause=1.0)
    piece = joined_piece(np.full(2000, 0.5, np.float32), pause_samples(True, join), join)
    assert np.array_equal(piece[:SR], np.zeros(SR, np.float32)) and piece[SR] != 0
    assert pause_samples(False, join) == SR // 4


@pytest.mark.parametrize("bad", [dict(sentence_pause=-1.0), dict(paragraph_pause=11.0), dict(fade=1.0)])
def test_bad_join_settings_are_refused(bad):
    with pytest.raises(TextError, match="must be between 0 and"):
        JoinSettings(**bad).check()


# ------------------------------------------------------------------------------------------------ writer


@pytest.mark.parametrize("suffix,subtype", [(".wav", "FLOAT"), (".flac", None), (".wav", "PCM_16")])
def test_writer_streams_pieces_into_one_file(tmp_path, suffix, subtype):
    path = tmp_path / f"long{suffix}"
    rng = np.random.default_rng(0)
    pieces = [(0.5 * rng.standard_normal(n)).clip(-1, 1).astype(np.float32) for n in (100, 5000, 1)]
    with AudioFileWriter(path, subtype=subtype) as w:
        for p in pieces:
            w.write(p)
        assert not path.exists()  # only a complete recording takes the name
    data, sr = sf.read(path, dtype="float32")
    expected = np.concatenate(pieces)
    assert sr == SR and data.shape == expected.shape
    step = 1.0 / 32768 if subtype == "PCM_16" or suffix == ".flac" else 0.0  # 16-bit quantisation
    assert np.abs(data - expected).max() <= step
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o666 & ~_umask()
    assert [p.name for p in tmp_path.iterdir()] == [path.name]


def test_writer_failure_leaves_the_existing_file_untouched(tmp_path):
    path = tmp_path / "take.wav"
    path.write_bytes(b"the user's earlier take")
    with pytest.raises(RuntimeError), AudioFileWriter(path) as w:
        w.write(np.zeros(100, np.float32))
        raise RuntimeError("cancelled half way")
    assert path.read_bytes() == b"the user's earlier take"
    assert [p.name for p in tmp_path.iterdir()] == ["take.wav"]


def test_writer_refuses_bad_names_and_samples(tmp_path):
    with pytest.raises(AudioError, match="use a .wav, .flac or .ogg"):
        AudioFileWriter(tmp_path / "x.mp3")
    with pytest.raises(AudioError, match="does not exist"):
        AudioFileWriter(tmp_path / "missing" / "x.wav")
    with AudioFileWriter(tmp_path / "x.wav") as w, pytest.raises(AudioError, match="NaN"):
        w.write(np.array([0.0, np.nan], np.float32))


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# ------------------------------------------------------------------------------------------------ guard


def _feed(guard: RunawayGuard, codes) -> int | None:
    """The frame (1-based) at which the guard fires, or None."""
    for i, c in enumerate(codes):
        if guard.push(c):
            return i + 1
    return None


@pytest.mark.parametrize("period", [1, 2, 5, 12])
def test_guard_catches_a_loop_exactly_when_it_has_lasted_loop_seconds(period):
    s = GuardSettings()
    rng = np.random.default_rng(period)
    speech = list(rng.integers(0, 2048, 30))
    cycle = list(rng.choice(2048, period, replace=False) + 5000)  # never seen in the speech part
    codes = speech + cycle * (200 // period)
    fired = _feed(RunawayGuard(100, s), codes)
    # a constant code is also "at most 2 distinct codes": that fires one frame sooner, when the window holds
    # the last speech code and loop_frames - 1 constant ones
    assert fired == 30 + s.loop_frames - (1 if period == 1 else 0)


def test_guard_ignores_a_loop_longer_than_its_longest_period():
    s = GuardSettings(max_period=12, max_distinct=2)
    cycle = list(range(13))
    assert _feed(RunawayGuard(100, s), cycle * 20) is None


def test_guard_catches_silence_that_wavers_between_two_codes():
    s = GuardSettings()
    rng = np.random.default_rng(1)
    speech = list(rng.integers(0, 2048, 40))
    silence = list(rng.choice([7, 9], 300))  # not periodic, but only two values
    assert _feed(RunawayGuard(100, s), speech + silence) == 40 + s.loop_frames


def test_guard_leaves_speech_like_codes_alone():
    # speech changes c0 nearly every frame; repeats of a code a few frames apart are fine
    rng = np.random.default_rng(2)
    codes = np.repeat(rng.integers(0, 2048, 4000), rng.integers(1, 4, 4000))
    assert _feed(RunawayGuard(10**6, GuardSettings()), codes) is None


def test_guard_frame_limit_grows_with_the_estimate():
    s = GuardSettings(length_factor=3.0, min_extra_seconds=6.0)
    assert RunawayGuard(10, s).frame_limit == 10 + 75
    assert RunawayGuard(100, s).frame_limit == 300
    assert "ran past 24.0 s for about 8.0 s" in RunawayGuard(100, s).too_long()


# ------------------------------------------------------------------------------------------------ scripted synthesizer


class ScriptedSynth:
    """Follows the Synthesizer contract used by synthesize_long (check_language, check_voice, check_settings,
    synthesize -> FrameEvents then a SynthesisResult, validation before the first event, close() cancels). What
    each chunk does is scripted per (text, attempt): "ok", "loop", "long" (never stops), "empty" or "bad" (raises)."""

    languages = ["auto", "english"]
    model_id = "scripted"

    def __init__(self, script: dict[str, list[str]], frames: int = 6):
        self.script = script
        self.frames = frames
        self.calls: list[tuple[str, GenerationSettings]] = []
        self.open_generators = 0

    def check_language(self, language):
        if language not in self.languages:
            raise TextError(f"Unknown language {language!r}.")
        return language

    def check_voice(self, voice):
        pass

    def check_settings(self, settings):
        pass

    def synthesize(self, text, voice, language="auto", settings=None, instruct=None):
        attempt = sum(1 for t, _ in self.calls if t == text)
        self.calls.append((text, settings))
        plan = self.script.get(text, ["ok"])
        what = plan[min(attempt, len(plan) - 1)]
        if what == "bad":
            raise TextError("The text produced no speakable tokens.")
        return self._run(what, settings)

    def _run(self, what, settings):
        self.open_generators += 1
        try:
            n = {"ok": self.frames, "empty": 0}.get(what, settings.max_frames)
            codes = np.zeros((n, 16), np.int64)
            for k in range(n):
                codes[k, 0] = 42 if what == "loop" else 100 + (k * 37) % 1000
                yield FrameEvent(k, codes[k], 0.0, 0.0, settings.max_frames, self.frames)
            audio = np.full(n * SPF, 0.1 + settings.seed % 7 / 10, np.float32)  # which seed made it shows
            yield SynthesisResult(audio, codes, "eos" if what in ("ok", "empty") else "cap", settings.seed)
        finally:
            self.open_generators -= 1

    def synthesize_many(self, jobs, settings=None, batch_size=4, longest_first=False):
        return ScriptedBatch(self, jobs, settings or GenerationSettings(), batch_size, longest_first)


class ScriptedBatch:
    """Follows Synthesizer.synthesize_many's BatchRun: JobEvents of up to batch_size jobs advancing side by side
    (a frame of each in turn), a job's settings with its own seed and cap, cancel(job) between frames."""

    def __init__(self, synth: ScriptedSynth, jobs, settings: GenerationSettings, batch_size: int,
                 longest_first: bool = False):
        self.synth, self.jobs, self.settings, self.batch_size = synth, list(jobs), settings, batch_size
        self.longest_first = longest_first  # the engine's order: the estimate from the text, at most the cap
        self.cancelled: set[int] = set()
        self._events = self._run()

    def __iter__(self):
        return self

    def __next__(self):
        return next(self._events)

    def cancel(self, job: int) -> None:
        self.cancelled.add(job)

    def close(self) -> None:
        self._events.close()

    def _run(self):
        from collections import deque

        from engine.types import JobEvent

        order = range(len(self.jobs))
        if self.longest_first:
            order = sorted(order, key=lambda j: -min(estimated_frames(self.jobs[j].text),
                                                     self.jobs[j].max_frames or 10**9))
        waiting, running, gens = deque(order), [], {}
        try:
            while waiting or running:
                while waiting and len(running) < self.batch_size:
                    j = waiting.popleft()
                    job = self.jobs[j]
                    own = replace(self.settings, seed=job.seed, max_frames=job.max_frames)
                    try:
                        gens[j] = self.synth.synthesize(job.text, job.voice, job.language, own)
                        running.append(j)
                    except TextError as e:
                        yield JobEvent(job=j, error=e)
                for j in list(running):
                    if j in self.cancelled:
                        running.remove(j)
                        gens.pop(j).close()
                        yield JobEvent(job=j, error=Cancelled("This job was cancelled."))
                        continue
                    ev = next(gens[j])
                    if isinstance(ev, SynthesisResult):
                        running.remove(j)
                        gens.pop(j).close()
                    yield JobEvent(job=j, event=ev)
        finally:
            for g in gens.values():
                g.close()


VOICE = Voice(xvector=np.zeros(4, np.float32), model_id="scripted")
TEXT = "First one here. Second one here.\n\nThird one here. Fourth one here."
CHUNKS = ["First one here.", "Second one here.", "Third one here.", "Fourth one here."]
OPTIONS = LongTextOptions(max_chars=20, guard=GuardSettings(retries=2, loop_seconds=1.0))


def speak_text(synth, text=TEXT, language="english", settings=None, options=None):
    return speak(synth, SynthesisRequest(text, VOICE, language, settings or GenerationSettings(),
                                         options=options or LongTextOptions()))


def run_long(synth, text=TEXT, options=OPTIONS, settings=None):
    return list(speak_text(synth, text, "english", settings or GenerationSettings(seed=10), options))


def test_chunks_come_in_order_with_their_pauses():
    assert [c.text for c in split_for_synthesis(TEXT, "english", 20)] == CHUNKS
    synth = ScriptedSynth({})
    events = run_long(synth)
    audio = [e for e in events if isinstance(e, ChunkAudio)]
    assert [e.text for e in audio] == CHUNKS and [e.chunk for e in audio] == [0, 1, 2, 3]
    assert [e.text for e in events if isinstance(e, ChunkStarted)] == CHUNKS
    join = OPTIONS.join
    pauses = [0, pause_samples(False, join), pause_samples(True, join), pause_samples(False, join)]
    for i, (e, pause) in enumerate(zip(audio, pauses, strict=True)):
        assert len(e.samples) == pause + len(e.result.audio)
        # faded at the seams only: the recording's own start and end are the model's audio as it is
        assert np.array_equal(e.samples, joined_piece(e.result.audio, pause, join, fade_in=i > 0, fade_out=i < 3))
    assert audio[0].samples[0] == audio[0].result.audio[0] and audio[-1].samples[-1] == audio[-1].result.audio[-1]
    assert audio[1].samples[-1] != audio[1].result.audio[-1]
    starts = np.cumsum([0] + [len(e.samples) for e in audio])
    assert [e.start_sample for e in audio] == list(starts[:-1])
    result = events[-1]
    assert isinstance(result, LongResult) and result.samples == starts[-1] and result.skipped == []
    # same voice and settings for every chunk; chunk i's seed is base + i
    assert [s.seed for _, s in synth.calls] == [10, 11, 12, 13]
    frames = [e for e in events if isinstance(e, ChunkFrame)]
    assert len(frames) == 4 * synth.frames and {e.chunk for e in frames} == {0, 1, 2, 3}


def test_a_looping_chunk_is_retried_with_another_seed():
    synth = ScriptedSynth({"Second one here.": ["loop", "ok"]})
    events = run_long(synth)
    retries = [e for e in events if isinstance(e, ChunkRetry)]
    assert len(retries) == 1 and retries[0].chunk == 1 and "loop" in retries[0].reason
    seeds = [s.seed for t, s in synth.calls if t == "Second one here."]
    assert len(seeds) == 2 and seeds[0] == 11 and seeds[1] == retries[0].seed != 11
    audio = [e for e in events if isinstance(e, ChunkAudio)]
    assert [e.text for e in audio] == CHUNKS and audio[1].attempts == 2
    # the loop was stopped as soon as the guard saw it, not at the frame cap
    loop_frames = [e for e in events if isinstance(e, ChunkFrame) and e.chunk == 1 and e.attempt == 0]
    assert len(loop_frames) == OPTIONS.guard.loop_frames
    assert synth.open_generators == 0


def test_a_chunk_that_always_runs_away_is_reported_and_the_others_are_kept():
    synth = ScriptedSynth({"Second one here.": ["long"], "Third one here.": ["loop"]})
    events = run_long(synth)
    skipped = [e for e in events if isinstance(e, ChunkSkipped)]
    assert [(e.chunk, e.attempts) for e in skipped] == [(1, 3), (2, 3)]
    assert "ran past" in skipped[0].reason and "loop" in skipped[1].reason
    assert skipped[0].message.startswith("Chunk 2 of 4 was left out: it ran past")
    audio = [e for e in events if isinstance(e, ChunkAudio)]
    assert [e.text for e in audio] == ["First one here.", "Fourth one here."]
    # the paragraph ended inside the left-out chunks: the pause before the fourth is still a paragraph pause
    assert len(audio[1].samples) - len(audio[1].result.audio) == pause_samples(True, OPTIONS.join)
    assert events[-1].skipped == skipped


@pytest.mark.parametrize("batch_size", [2, 3])
def test_chunks_side_by_side_give_the_same_recording(batch_size):
    """Batched chunks (synthesize_many) finish in any order, loop, run away and are retried, yet the recording,
    the seeds and the left-out chunks are exactly those of one chunk after the other."""
    text = " ".join(f"Sentence {w} is here." for w in ("one", "two", "three", "four", "five", "six", "seven"))
    script = {"Sentence two is here.": ["loop", "ok"], "Sentence four is here.": ["long"],
              "Sentence five is here.": ["bad"], "Sentence six is here.": ["empty", "loop", "ok"]}
    options = LongTextOptions(max_chars=24, guard=GuardSettings(retries=2, loop_seconds=1.0))

    def outcome(size):
        synth = ScriptedSynth(script)
        events = run_long(synth, text, replace(options, batch_size=size), GenerationSettings(seed=3))
        audio = [(e.chunk, e.start_sample, e.samples, e.attempts, e.result.seed) for e in events
                 if isinstance(e, ChunkAudio)]
        skipped = [(e.chunk, e.reason, e.attempts) for e in events if isinstance(e, ChunkSkipped)]
        calls = sorted((t, s.seed, s.max_frames, s.greedy) for t, s in synth.calls)
        return audio, skipped, calls, events[-1].samples, synth.open_generators

    one, side = outcome(1), outcome(batch_size)
    assert [a[:2] + a[3:] for a in side[0]] == [a[:2] + a[3:] for a in one[0]]
    assert all(np.array_equal(a[2], b[2]) for a, b in zip(side[0], one[0], strict=True))
    assert side[1:] == one[1:]
    assert [c for c, *_ in one[0]] == [0, 1, 2, 5, 6] and [c for c, *_ in one[1]] == [3, 4]
    assert side[4] == 0  # every job's generator was closed


def test_progress_follows_the_first_chunk_not_yet_in_the_recording():
    progress = ChunkProgress()
    frame = FrameEvent(0, np.zeros(16, np.int64), 0.0, 0.0, 10, 10)
    piece = ChunkAudio(0, 4, "", np.zeros(1, np.float32), 0, None, 1)
    seen = [progress.see(ChunkStarted(1, 4, "b")), progress.see(ChunkStarted(0, 4, "a")),
            progress.see(ChunkFrame(1, 4, 0, frame)), progress.see(ChunkFrame(0, 4, 0, frame))]
    assert seen == [True, True, False, True] and progress.chunk == 0  # chunk 1 started first, 0 is shown
    assert progress.see(piece) and progress.chunk == 1 and progress.done == 1
    assert progress.see(replace(piece, chunk=1)) and progress.chunk == 2 and progress.done == 2
    assert progress.see(ChunkSkipped(3, 4, "", "loop", 3)) and progress.chunk == 4  # (2 was a scene break)
    assert not progress.see(LongResult(4, [], 1, 0, None))


def test_run_speech_shows_the_first_unwritten_chunk_and_its_length():
    """The one consumer of a long text's events (the CLI's and the app's): frames only of the chunk on show with
    how many are done, each change of chunk once, every piece in order, the expected length at the start and as
    chunks finish, and the LongResult."""
    synth = ScriptedSynth({"Second one here.": ["loop", "ok"]})
    options = replace(OPTIONS, batch_size=2)
    frames, parts, pieces, samples, retries, lengths = [], [], [], [], [], []
    result = run_speech(
        speak_text(synth, TEXT, "english", GenerationSettings(seed=10), options),
        on_frame=lambda ev, done: frames.append((ev.chunk, done)), on_audio=pieces.append,
        on_samples=samples.append, on_retry=retries.append, on_part=lambda i, n: parts.append((i, n)),
        on_length=lengths.append)
    assert parts == [(i, 4) for i in range(4)] and [p.chunk for p in pieces] == [0, 1, 2, 3]
    # chunks 2 and 3 run beside 0 and 1 and are done before the retried chunk 1: their frames are never on show
    shown = [c for c, _ in frames]
    assert shown == sorted(shown) and {c: d for c, d in frames} == {0: 0, 1: 1}
    assert [r.chunk for r in retries] == [1]
    assert lengths[-1] == result.samples == sum(len(p.samples) for p in pieces) and len(lengths) >= 2
    assert lengths[0] == RecordingLength(TEXT, "english", options).samples  # the estimate from the same chunks
    assert [s.start_sample for s in samples] == [p.start_sample for p in pieces]
    assert all(np.array_equal(s.samples, p.samples) for s, p in zip(samples, pieces, strict=True))
    assert result.chunks == 4 and not result.skipped and synth.open_generators == 0
    assert result.frames == sum(p.result.codes.shape[0] for p in pieces)


def test_run_speech_refuses_a_text_with_nothing_generated():
    synth = ScriptedSynth({c: ["bad"] for c in CHUNKS})
    skipped: list = []
    with pytest.raises(EngineError, match="No part of the text could be generated. Chunk 1 of 4 was left out"):
        run_speech(speak_text(synth, TEXT, "english", GenerationSettings(seed=1), OPTIONS),
                           on_skipped=skipped.append)
    assert [s.chunk for s in skipped] == [0, 1, 2, 3]


def test_run_speech_closes_the_events_when_cancelled():
    synth = ScriptedSynth({})

    def cancel_at_the_second_frame(ev, done):
        if ev.frame.index == 1:
            raise Cancelled("stopped")

    with pytest.raises(Cancelled):
        run_speech(speak_text(synth, TEXT, "english", GenerationSettings(seed=1), OPTIONS),
                           on_frame=cancel_at_the_second_frame)
    assert synth.open_generators == 0 and len(synth.calls) == 1


def test_a_short_text_is_a_long_text_of_one_chunk_with_its_synthesis_unchanged():
    """One chunk: the same call synthesize() alone would get (seed, settings), and the recording is exactly its
    audio (no seam: no fade), its codes and its seed in the LongResult."""
    synth = ScriptedSynth({})
    events = run_long(synth, text="Only one here.", settings=GenerationSettings(seed=7))
    assert [(t, s.seed) for t, s in synth.calls] == [("Only one here.", 7)]
    (piece,) = [e for e in events if isinstance(e, ChunkAudio)]
    assert piece.start_sample == 0 and np.array_equal(piece.samples, piece.result.audio)
    result = events[-1]
    assert isinstance(result, LongResult) and result.chunks == 1 and result.seed == 7
    assert result.frames == piece.result.codes.shape[0] and result.samples == len(piece.result.audio)


def test_a_short_text_streams_its_audio_as_synthesize_makes_it():
    class Streaming(ScriptedSynth):
        def _run(self, what, settings):
            for ev in super()._run(what, settings):
                if isinstance(ev, SynthesisResult):
                    for k in range(0, len(ev.audio), 1000):
                        yield AudioChunk(ev.audio[k:k + 1000], k)
                yield ev

    synth = Streaming({})
    streamed = []
    result = run_speech(speak_text(synth, "Only one here.", settings=GenerationSettings(seed=3, stream_audio=True),
                                   options=OPTIONS), on_samples=streamed.append)
    assert [t for t, _ in synth.calls] == ["Only one here."] and synth.calls[0][1].stream_audio
    audio = np.concatenate([c.samples for c in streamed])
    assert [c.start_sample for c in streamed] == list(range(0, len(audio), 1000))  # each sample once, in order
    assert len(audio) == result.samples == synth.frames * SPF and result.seed == 3
    # a text of several chunks is not streamed (its pieces are faded at the seams after each chunk ends)
    synth = Streaming({})
    events = run_long(synth, settings=GenerationSettings(seed=3, stream_audio=True))
    assert not [e for e in events if isinstance(e, ChunkStream)] and not synth.calls[0][1].stream_audio


def test_a_scene_break_is_only_a_pause():
    synth = ScriptedSynth({})
    events = run_long(synth, text="First one here.\n\n* * *\n\nSecond one here.")
    audio = [e for e in events if isinstance(e, ChunkAudio)]
    assert [t for t, _ in synth.calls] == ["First one here.", "Second one here."]
    assert [e.chunk for e in audio] == [0, 2] and not [e for e in events if isinstance(e, ChunkSkipped)]
    assert len(audio[1].samples) - len(audio[1].result.audio) == pause_samples(True, OPTIONS.join)


def test_a_greedy_run_retries_by_sampling():
    synth = ScriptedSynth({"First one here.": ["loop", "ok"]})
    run_long(synth, settings=GenerationSettings(greedy=True, seed=5))
    first = [s for t, s in synth.calls if t == "First one here."]
    assert [s.greedy for s in first] == [True, False]
    assert all(s.greedy for t, s in synth.calls if t != "First one here.")


def test_a_cap_the_caller_set_is_not_a_runaway():
    synth = ScriptedSynth({"First one here.": ["long"]})
    events = run_long(synth, settings=GenerationSettings(seed=1, max_frames=4))
    assert not [e for e in events if isinstance(e, (ChunkRetry, ChunkSkipped))]
    assert [e.result.codes.shape[0] for e in events if isinstance(e, ChunkAudio)][0] == 4


def test_a_chunk_the_model_refuses_is_skipped_without_retries():
    synth = ScriptedSynth({"Third one here.": ["bad"]})
    events = run_long(synth)
    skipped = [e for e in events if isinstance(e, ChunkSkipped)]
    assert [(e.chunk, e.attempts, e.reason) for e in skipped] == [(2, 1, "The text produced no speakable tokens")]


def test_bad_input_is_refused_before_the_first_event():
    synth = ScriptedSynth({})
    with pytest.raises(TextError, match="empty"):
        speak_text(synth, "  \n\n ", "english")
    with pytest.raises(TextError, match="Unknown language"):
        speak_text(synth, TEXT, "klingon")
    with pytest.raises(TextError, match="retries"):
        speak_text(synth, TEXT, "english", options=LongTextOptions(guard=GuardSettings(retries=-1)))
    assert synth.calls == []


def test_closing_the_events_stops_the_chunk_in_progress():
    synth = ScriptedSynth({})
    events = speak_text(synth, TEXT, "english", GenerationSettings(seed=1), OPTIONS)
    for ev in events:
        if isinstance(ev, ChunkFrame) and ev.chunk == 1:
            break
    events.close()
    assert synth.open_generators == 0 and len(synth.calls) == 2


def test_a_cancelled_synthesis_is_not_a_chunk_failure():
    class Stopped(ScriptedSynth):
        def synthesize(self, text, voice, language="auto", settings=None):
            raise Cancelled("stopped from outside")

    with pytest.raises(Cancelled):
        run_long(Stopped({}))


# ------------------------------------------------------------------------------------------------ end to end

ROOT = Path(__file__).resolve().parent.parent
REF = ROOT / "tests" / "fixtures" / "audio" / "en_24k_mono_2s.wav"
CHAPTER = "First one. Second\none.\n\nThird."


@pytest.fixture(scope="module")
def demo_bundle(tmp_path_factory) -> Path:
    from engine.demo import make_demo_bundle

    return make_demo_bundle(tmp_path_factory.mktemp("demo") / "bundle")


def test_long_text_end_to_end_on_the_demo_model(demo_bundle, tmp_path, capsys):
    """A chapter file -> split -> every chunk in the same voice -> one file of chunks + pauses. --max-frames keeps
    each chunk short (the demo model speaks noise and stops at random), and a cap the caller set is kept."""
    chapter = tmp_path / "chapter.txt"
    chapter.write_text(CHAPTER, encoding="utf-8")
    out, chunks_dir = tmp_path / "chapter.wav", tmp_path / "chunks"
    assert main(["split", "--text-file", str(chapter), "--max-chars", "12"]) == 0
    expected_chunks = capsys.readouterr().out.splitlines()
    assert expected_chunks == ["First one.", "Second one.", "Third."]
    common = ["synth", "--model", str(demo_bundle), "--text-file", str(chapter), "--ref", str(REF),
              "--x-vector-only", "--max-chars", "12", "--max-frames", "3", "--seed", "7", "--sentence-pause", "0.2",
              "--paragraph-pause", "0.6", "--float"]  # float WAV: the joined file can be compared sample for sample
    code = main([*common, "-o", str(out), "--chunks-dir", str(chunks_dir), "--batch-size", "1"])
    err = capsys.readouterr().err
    assert code == 0, err
    listing = (chunks_dir / "chunks.tsv").read_text(encoding="utf-8").splitlines()
    assert [line.split("\t")[1] for line in listing] == expected_chunks
    parts = [sf.read(chunks_dir / f"{i:04d}.wav", dtype="float32")[0] for i in range(1, 4)]
    assert all(0 < len(p) <= 3 * SPF and len(p) % SPF == 0 for p in parts)
    join = JoinSettings(sentence_pause=0.2, paragraph_pause=0.6)
    after_paragraph = [False, False, True]
    expected = np.concatenate([joined_piece(p, pause_samples(a, join) if i else 0, join, fade_in=i > 0, fade_out=i < 2)
                               for i, (p, a) in enumerate(zip(parts, after_paragraph, strict=True))])
    joined, sr = sf.read(out, dtype="float32")
    assert sr == SR and len(joined) == sum(len(p) for p in parts) + SR // 5 + SR * 3 // 5
    assert np.array_equal(joined, expected)
    assert f"wrote {out}" in err and "3 of 3 chunks" in err
    # the chunks side by side (synthesize_many) give the same file, sample for sample
    side_by_side = tmp_path / "side_by_side.wav"
    assert main([*common, "-o", str(side_by_side), "--batch-size", "3"]) == 0, capsys.readouterr().err
    assert np.array_equal(sf.read(side_by_side, dtype="float32")[0], joined)


@pytest.mark.parametrize("extra,message", [
    (["--chunks-dir", "full"], "must be a new or empty folder"),
    (["--sentence-pause", "-1"], "sentence pause must be between 0 and 10"),
    (["--retries", "99"], "retries must be between 0 and 20"),
    (["--batch-size", "0"], "Batch size must be a whole number from 1 to 8, not 0."),
])
def test_long_text_options_are_checked_before_any_work(tmp_path, capsys, monkeypatch, extra, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.wav").write_bytes(b"mine")
    code = main(["synth", "--model", str(tmp_path / "no-model"), "--text", CHAPTER, "-o", "out.wav",
                 "--ref", str(REF), "--x-vector-only", *extra])
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1
    assert (tmp_path / "full" / "keep.wav").read_bytes() == b"mine"
    assert not (tmp_path / "out.wav").exists()


@pytest.mark.parametrize("batch_size", [1, 4])
def test_memory_stays_bounded_for_an_hour_long_text(tmp_path, batch_size):
    """An hour of speech (360 chunks of 10 s) streamed into a file: the peak of Python/numpy allocations stays
    within a few chunks (a window of 2 x batch_size side by side), far below the hour (345 MB as float32) that
    holding every chunk would take."""
    import tracemalloc

    chunk_seconds, chunks = 10, 360
    frames = chunk_seconds * 25 // 2

    class HourSynth(ScriptedSynth):
        def _run(self, what, settings):
            codes = np.zeros((frames, 16), np.int64)
            codes[:, 0] = np.arange(frames) % 2000
            for k in range(0, frames, 25):  # a frame event every 2 s keeps the test quick
                yield FrameEvent(k, codes[k], 0.0, 0.0, settings.max_frames, frames)
            audio = np.full(frames * SPF, 0.25, np.float32)
            yield SynthesisResult(audio, codes, "eos", settings.seed)

    text = " ".join(f"Sentence number {i} is here." for i in range(chunks))
    options = LongTextOptions(max_chars=30, guard=GuardSettings(length_factor=1000.0), batch_size=batch_size)
    chunk_bytes = frames * SPF * 4
    tracemalloc.start()
    try:
        with AudioFileWriter(tmp_path / "hour.wav", subtype="PCM_16") as writer:
            for ev in speak_text(HourSynth({}), text, "english", GenerationSettings(seed=1), options):
                if isinstance(ev, ChunkAudio):
                    writer.write(ev.samples)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    info = sf.info(tmp_path / "hour.wav")
    pauses = (chunks - 1) * pause_samples(False, options.join)
    assert info.frames == chunks * frames * SPF + pauses and info.duration > 3600
    # one after the other: at any time at most one chunk's raw audio, its piece (pause + faded copy) and
    # soundfile's 16-bit conversion of the piece (half its size), plus bookkeeping (codes, events: < 128 KiB);
    # side by side, the other chunks of the window may be done and waiting for their turn (2 x batch_size - 1)
    pause_bytes = pause_samples(False, options.join) * 4
    waiting = 2 * batch_size - 1 if batch_size > 1 else 0
    assert peak < (2.5 + waiting) * chunk_bytes + 1.5 * pause_bytes + 2**17, f"peak {peak / 2**20:.2f} MB"
