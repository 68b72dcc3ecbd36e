"""A take that runs past its estimate (a runaway on random weights, say) shows the length limit it runs to, not
"Frame 143 of ~143" over a full bar for minutes."""

from __future__ import annotations


def test_progress_past_the_estimate_shows_the_limit(qtbot, make_window, fake_synth, dialogs):
    window = make_window()
    fake_synth.frames_per_char = 40.0  # far longer than the text suggests, and than the limit
    text = "Hello there."
    fake_synth.hold_at_frame = 120
    box = window.settings_box
    box.max_frames.setValue(400)
    window.text_edit.setPlainText(text)
    assert window.generate(), dialogs.errors
    qtbot.waitUntil(lambda: fake_synth.produced >= 120 and window.progress.frames >= 120, timeout=10000)
    window.progress._throttle.flush()
    bar = window.progress.bar
    try:
        assert bar.maximum() == 400 and bar.value() == window.progress.frames
        assert "at most 400" in bar.format() and "expected" in bar.format(), bar.format()
        assert bar.value() < bar.maximum(), "not a full bar"
    finally:
        fake_synth.release.set()
    qtbot.waitUntil(lambda: window.synth_worker is None, timeout=20000)
    assert "length limit reached" in bar.format()


def test_progress_within_the_estimate_shows_the_estimate(qtbot, make_window, fake_synth):
    window = make_window()
    fake_synth.hold_at_frame = 3
    window.settings_box.max_frames.setValue(400)
    window.text_edit.setPlainText("Hello there, this is a somewhat longer sentence to speak.")
    assert window.generate()
    qtbot.waitUntil(lambda: window.progress.frames >= 3, timeout=10000)
    window.progress._throttle.flush()
    try:
        assert "of ~" in window.progress.bar.format() and "at most" not in window.progress.bar.format()
    finally:
        fake_synth.release.set()
    qtbot.waitUntil(lambda: window.synth_worker is None, timeout=20000)
