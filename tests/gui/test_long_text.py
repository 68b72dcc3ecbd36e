"""A chapter in the app: chunk i of n progress, playback from the first chunk, the whole chapter's expected
length (for the waveform and the player's rebuffering), one take, left-out chunks reported; a .txt imported into
the batch as one long text."""

from __future__ import annotations

import numpy as np
import soundfile as sf

from engine import FrameEvent, JoinSettings, SynthesisRequest, SynthesisResult, estimated_frames
from engine.text.length import estimate_seconds
from qwen3tts_gui.workers import SynthesisWorker

from .fakes import SPF, FakeSynthesizer

FIRST = " ".join(["The first paragraph goes on with one more sentence."] * 6)  # 311 characters: two chunks
CHAPTER = FIRST + "\n\nThe second paragraph is short."
JOIN = JoinSettings()


def _chunks(text=CHAPTER):
    return [c.text for c in SynthesisRequest(text).chunks()]


def _watch(window):
    """Record the long worker's signals as they arrive (connected before the job runner starts its thread, so
    none is missed however fast the worker is)."""
    seen = {"parts": [], "formats": [], "chunks": [], "results": []}
    orig = window.ctx.start_job

    def wrapped(w, *a, **kw):
        if isinstance(w, SynthesisWorker):
            w.part.connect(lambda i, n: (seen["parts"].append((i, n)),
                                         seen["formats"].append(window.progress.bar.format())))
            w.chunk.connect(lambda ch: seen["chunks"].append(ch))
            w.done.connect(lambda r: seen["results"].append(r))
        return orig(w, *a, **kw)

    window.ctx.start_job = wrapped
    return seen


def _record_lengths(window):
    """Every expected length the output panel is told, and every one it gives the player."""
    told, given = [], []
    panel, player = window.output, window.ctx.player
    expect_samples, expect_length = panel.expect_samples, player.expect_length
    panel.expect_samples = lambda n: (told.append(n), expect_samples(n))  # before generate() connects it
    player.expect_length = lambda n: (given.append(n), expect_length(n))
    return told, given


def _estimate(chunk: str) -> int:
    """A chunk's expected samples as the engine estimates them from its text (12.5 frames of 1920 samples/s)."""
    return round(estimate_seconds(chunk) * 12.5) * SPF


def test_the_expected_length_is_the_whole_chapter_and_follows_the_chunks(qtbot, make_window, audio, settings):
    chunks = _chunks()
    synth = FakeSynthesizer(frame_delay=0.01)
    settings.batch_size = 1  # one chunk after the other: playback starts while two are still to come
    window = make_window(synth=synth)
    seen = _watch(window)
    told, given = _record_lengths(window)
    window.text_edit.setPlainText(CHAPTER)
    assert window.generate()
    qtbot.waitUntil(lambda: len(seen["chunks"]) >= 1, timeout=10000)
    assert window.synth_worker is not None  # the other chunks are still being generated
    window.output.toggle_play()
    at_play = window.output.expected_samples
    qtbot.waitUntil(lambda: window.synth_worker is None, timeout=30000)
    # CHAPTER's first two chunks are one paragraph, the third another
    pause = [0, round(JOIN.sentence_pause * 24000), round(JOIN.paragraph_pause * 24000)]
    real = [round(len(c) * synth.frames_per_char) * SPF for c in chunks]  # what the fake makes of each
    assert real != [_estimate(c) for c in chunks]  # so each refinement shows
    # before any chunk: every chunk's estimate plus the pauses; then each finished chunk at its real length
    assert told == [sum(pause[i] + (real[i] if i < done else _estimate(c)) for i, c in enumerate(chunks))
                    for done in range(4)]
    take = window.output.current
    assert told[-1] == len(take.audio)
    # playing from the first chunk on, the player had the whole chapter's length, then each refinement
    assert at_play in told[1:] and given == told[told.index(at_play):]


def test_a_single_chunk_text_is_a_chapter_of_one_chunk(qtbot, make_window):
    """The same worker and signals as a chapter: the estimate its first frame carries, then its real length;
    no "Chunk 1 of 1" in the progress bar."""
    text = "Hello there, how are you?"
    assert len(_chunks(text)) == 1
    window = make_window()
    told, _ = _record_lengths(window)
    seen = _watch(window)
    window.text_edit.setPlainText(text)
    assert window.generate()
    qtbot.waitUntil(lambda: window.synth_worker is None, timeout=10000)
    take = window.output.takes[-1]
    assert told == [estimated_frames(text) * SPF, len(take.audio)]
    assert seen["parts"] == [(0, 1)] and "Chunk" not in seen["formats"][0]
    assert np.array_equal(np.concatenate([c.samples for c in seen["chunks"]]), take.audio)


def test_a_chapter_becomes_one_take(qtbot, make_window, fake_synth, dialogs):
    chunks = _chunks()
    assert len(chunks) == 3
    window = make_window()
    seen = _watch(window)
    window.text_edit.setPlainText(CHAPTER)
    assert window.generate()
    qtbot.waitUntil(lambda: window.synth_worker is None, timeout=20000)
    assert not dialogs.errors and not dialogs.infos
    assert seen["parts"] == [(0, 3), (1, 3), (2, 3)]
    assert seen["formats"][1].startswith("Chunk 2 of 3")
    # every chunk spoken in the same voice, in order, seeds base + i
    calls = fake_synth.calls
    assert [c["text"] for c in calls] == chunks
    assert len({c["voice"] for c in calls}) == 1
    assert [c["seed"] - calls[0]["seed"] for c in calls] == [0, 1, 2]
    # the audio arrived chunk by chunk, contiguous, and the take is exactly what was streamed
    starts = [ch.start_sample for ch in seen["chunks"]]
    assert starts == [0] + list(np.cumsum([len(ch.samples) for ch in seen["chunks"]])[:-1])
    take = window.output.current
    assert window.output.takes == [take] and take.text == CHAPTER
    np.testing.assert_array_equal(take.audio, np.concatenate([ch.samples for ch in seen["chunks"]]))
    frames = [round(len(c) * fake_synth.frames_per_char) for c in chunks]
    pauses = round(JOIN.sentence_pause * 24000) + round(JOIN.paragraph_pause * 24000)
    assert len(take.audio) == sum(frames) * SPF + pauses
    assert len(take.result.codes) == sum(frames)
    assert "Done" in window.progress.bar.format()
    # the Audio figure is the recording's length, pauses included, not the frames' alone
    assert window.progress.audio_len.text() == f"{len(take.audio) / 24000:.1f} s"
    assert window.progress.audio_len.text() != f"{sum(frames) * SPF / 24000:.1f} s"


def test_playback_starts_with_the_first_chunk(qtbot, make_window, audio, settings):
    synth = FakeSynthesizer(frame_delay=0.01)
    settings.batch_size = 2  # the two long chunks side by side, then the short one while the first two play
    window = make_window(synth=synth)
    seen = _watch(window)
    window.text_edit.setPlainText(CHAPTER)
    assert window.generate()
    qtbot.waitUntil(lambda: len(seen["chunks"]) >= 1, timeout=10000)
    assert window.synth_worker is not None  # the other chunks are still being generated
    window.output.toggle_play()
    assert window.ctx.player.playing
    qtbot.waitUntil(lambda: window.synth_worker is None, timeout=30000)
    take = window.output.current
    qtbot.waitUntil(lambda: audio.output_finished >= 1, timeout=30000)
    played = audio.played_samples()
    np.testing.assert_array_equal(played[: len(take.audio)], take.audio)


class StuckOnSomeText(FakeSynthesizer):
    """Loops (the same codes every frame, never an end) on any chunk containing `stuck`."""

    def __init__(self, stuck: str, **kw):
        super().__init__(**kw)
        self.stuck = stuck

    def synthesize(self, text, voice, language="auto", settings=None, instruct=None):
        if self.stuck not in text:
            return super().synthesize(text, voice, language, settings, instruct=instruct)
        self.calls.append(dict(text=text, voice=voice.name, language=language, settings=settings,
                               seed=settings.seed))
        return self._loop(settings)

    def _loop(self, settings):
        codes = np.full((settings.max_frames, 16), 7, np.int64)
        for k in range(settings.max_frames):
            yield FrameEvent(k, codes[k], 0.0, 0.0, settings.max_frames, 10)
        yield SynthesisResult(np.zeros(settings.max_frames * SPF, np.float32), codes, "cap", settings.seed)


def test_a_chunk_that_keeps_looping_is_left_out_and_reported(qtbot, make_window, dialogs):
    synth = StuckOnSomeText("second paragraph", frame_delay=0.001)
    window = make_window(synth=synth)
    window.text_edit.setPlainText(CHAPTER)
    assert window.generate()
    qtbot.waitUntil(lambda: window.synth_worker is None, timeout=20000)
    assert [title for title, _ in dialogs.infos] == ["Parts left out"]
    assert "Chunk 3 of 3 was left out: its codes fell into a loop" in dialogs.infos[0][1]
    assert sum("second paragraph" in c["text"] for c in synth.calls) == 3  # the first try and two new seeds
    take = window.output.current
    first_two = [round(len(c) * synth.frames_per_char) for c in _chunks()[:2]]
    assert len(take.audio) == sum(first_two) * SPF + round(JOIN.sentence_pause * 24000)


def test_batch_imports_a_txt_as_one_long_text(qtbot, make_window, settings, dialogs, tmp_path):
    window = make_window()
    panel = window.batch
    settings.batch_dir = str(tmp_path / "out")
    panel._show_folder()
    one_line = tmp_path / "one.txt"
    one_line.write_text("Just one line.\n", encoding="utf-8")
    assert panel.import_path(one_line) and dialogs.questions == []  # nothing to ask
    chapter = tmp_path / "chapter.txt"
    chapter.write_text(CHAPTER.replace(". ", ".\n", 2) + "\n", encoding="utf-8")  # hard-wrapped lines
    dialogs.choice = 1  # "One long text"
    assert panel.import_path(chapter)
    assert "Is chapter.txt one long text, or 4 separate lines?" in dialogs.questions[0][1]
    assert [ln.text for ln in panel.model.lines] == ["Just one line.", CHAPTER.replace(". ", ".\n", 2)]
    assert panel.run_all()
    qtbot.waitUntil(lambda: not panel.running, timeout=20000)
    assert [ln.state for ln in panel.model.lines] == ["done", "done"], [ln.error for ln in panel.model.lines]
    out = sorted((tmp_path / "out").glob("002 - *.wav"))
    assert len(out) == 1
    audio, _ = sf.read(out[0], dtype="float32")
    frames = [round(len(c) * 0.5) for c in _chunks()]
    assert len(audio) == sum(frames) * SPF + round(JOIN.sentence_pause * 24000) + round(JOIN.paragraph_pause * 24000)


def test_pauses_come_from_the_settings_box_and_are_remembered(qtbot, make_window, fake_synth, settings):
    window = make_window()
    box = window.settings_box
    box.sentence_pause.setValue(0.1)
    box.paragraph_pause.setValue(1.5)
    assert (settings.sentence_pause_ms, settings.paragraph_pause_ms) == (100, 1500)
    window.text_edit.setPlainText(CHAPTER)
    assert window.generate()
    qtbot.waitUntil(lambda: window.synth_worker is None, timeout=20000)
    frames = [round(len(c) * fake_synth.frames_per_char) for c in _chunks()]
    assert len(window.output.current.audio) == sum(frames) * SPF + 2400 + 36000
