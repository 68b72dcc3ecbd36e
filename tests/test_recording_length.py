"""RecordingLength: a long text's recording length before its first chunk (every chunk's estimate plus the pauses
the joining inserts), each finished chunk then counted at its real length, left-out chunks dropped; at the end
it is exactly the recording Synthesizer.speak made. Runs on test_longform's scripted synthesizer."""

from __future__ import annotations

import pytest

from engine.errors import TextError
from engine.longform.events import ChunkAudio, ChunkSkipped, LongResult
from engine.longform.joining import JoinSettings, pause_samples
from engine.longform.recording_length import RecordingLength
from engine.longform.request import LongTextOptions
from engine.text.length import estimate_seconds
from engine.types import GenerationSettings
from tests.test_longform import CHUNKS, OPTIONS, TEXT, ScriptedSynth, run_long

SPF = 1920


def _estimate(chunk: str) -> int:
    return round(estimate_seconds(chunk) * 12.5) * SPF


# TEXT is two paragraphs of two chunks: sentence pause, paragraph pause, sentence pause
PAUSES = [0, pause_samples(False, OPTIONS.join), pause_samples(True, OPTIONS.join), pause_samples(False, OPTIONS.join)]


def _length(text=TEXT, options=OPTIONS, max_frames=None) -> RecordingLength:
    return RecordingLength(text, "english", options, max_frames=max_frames)


def test_before_any_chunk_it_is_every_chunk_estimate_plus_the_pauses():
    length = _length()
    assert length.chunks == 4
    assert length.samples == sum(_estimate(c) for c in CHUNKS) + sum(PAUSES)


@pytest.mark.parametrize("batch_size", [1, 2])
def test_a_finished_chunk_replaces_its_estimate_and_the_end_is_exact(batch_size):
    events = run_long(ScriptedSynth({}), options=LongTextOptions(max_chars=20, guard=OPTIONS.guard,
                                                                   batch_size=batch_size))
    length = _length()
    seen = []
    for ev in events:
        changed = length.see(ev)
        if isinstance(ev, ChunkAudio):
            rest = sum(PAUSES[i] + _estimate(CHUNKS[i]) for i in range(ev.chunk + 1, 4))
            seen.append((changed, length.samples, ev.start_sample + len(ev.samples) + rest))
        else:
            assert not changed
    assert [s for _, s, _ in seen] == [want for _, _, want in seen]
    assert all(changed for changed, _, _ in seen)  # the scripted chunks are far shorter than their estimates
    assert length.samples == events[-1].samples


def test_a_left_out_chunk_drops_out_and_the_paragraph_pause_moves_on():
    # the second chunk (which ends the first paragraph) loops on every try: the third gets the paragraph pause
    events = run_long(ScriptedSynth({CHUNKS[1]: ["loop"]}))
    assert [e.chunk for e in events if isinstance(e, ChunkSkipped)] == [1]
    length = _length()
    for ev in events:
        length.see(ev)
        if isinstance(ev, ChunkSkipped):
            first = next(e for e in events if isinstance(e, ChunkAudio) and e.chunk == 0)
            assert length.samples == (len(first.samples) + pause_samples(True, OPTIONS.join) + _estimate(CHUNKS[2])
                                      + PAUSES[3] + _estimate(CHUNKS[3]))
    assert isinstance(events[-1], LongResult) and length.samples == events[-1].samples


def test_a_scene_break_counts_only_as_a_paragraph_pause():
    text = "First one here.\n\n* * *\n\nSecond one here."
    length = _length(text)
    assert length.chunks == 3
    assert length.samples == _estimate("First one here.") + pause_samples(True, OPTIONS.join) + _estimate(
        "Second one here.")
    for ev in run_long(ScriptedSynth({}), text=text):
        length.see(ev)
    assert length.samples == ev.samples


def test_the_pauses_are_the_ones_asked_for_and_a_frame_cap_bounds_each_chunk():
    join = JoinSettings(sentence_pause=0.1, paragraph_pause=2.0)
    length = _length(options=LongTextOptions(max_chars=20, join=join), max_frames=5)
    assert length.samples == 4 * 5 * SPF + 2 * round(0.1 * 24000) + round(2.0 * 24000)
    events = run_long(ScriptedSynth({}, frames=4), options=LongTextOptions(max_chars=20, join=join),
                      settings=GenerationSettings(seed=1, max_frames=5))
    for ev in events:
        length.see(ev)
    assert length.samples == events[-1].samples


@pytest.mark.parametrize("args,message", [
    (dict(text="   "), "The text is empty"),
    (dict(max_frames=0), "The frame cap must be a whole number"),
    (dict(max_frames=True), "The frame cap must be a whole number"),
    (dict(options=LongTextOptions(join=JoinSettings(sentence_pause=-1.0))), "The sentence pause must be between"),
])
def test_bad_input_is_refused(args, message):
    with pytest.raises(TextError, match=message):
        _length(**args)


def test_an_event_of_another_text_is_refused():
    other = [e for e in run_long(ScriptedSynth({}), text="First one here.\n\nSecond one here.")
             if isinstance(e, ChunkAudio)]
    with pytest.raises(TextError, match="estimated for a text of 4 chunks, not for chunk 1 of 2"):
        _length().see(other[0])
