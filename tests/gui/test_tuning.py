"""The one-time "Tuning for this computer…" step after a model opens: a cancellable engine job with its result in
the status line; a model already tuned opens without it."""

from __future__ import annotations

from qwen3tts_gui.controllers.tuning import TITLE

from .fakes import FakeSynthesizer


def _dialog(window):
    from PySide6.QtWidgets import QProgressDialog

    return next((d for d in window.findChildren(QProgressDialog) if d.isVisible()), None)


def test_a_model_opened_for_the_first_time_is_tuned_once(qtbot, make_window):
    synth = FakeSynthesizer(tuning_needed=True, tune_delay=0.01)
    window = make_window(model=False, synth=synth)
    window.open_model(window.ctx.models_folder() / "fake-bundle")
    qtbot.waitUntil(lambda: window.ctx.busy == "tuning for this computer", timeout=5000)
    dialog = _dialog(window)
    assert dialog is not None and TITLE in dialog.labelText()
    qtbot.waitUntil(lambda: window.ctx.job is None, timeout=10000)
    assert synth.tuned == 1 and not synth.tuning_needed
    message = window.statusBar().currentMessage()
    assert message.startswith("Tuned for this computer") and "talker 2" in message
    assert _dialog(window) is None
    # opened again: no second tuning
    window.open_model(window.ctx.models_folder() / "fake-bundle")
    qtbot.waitUntil(lambda: window.ctx.job is None, timeout=5000)
    assert synth.tuned == 1


def test_tuning_can_be_cancelled_and_the_model_stays_usable(qtbot, make_window, dialogs):
    synth = FakeSynthesizer(tuning_needed=True, tune_delay=0.05)
    window = make_window(model=False, synth=synth)
    window.open_model(window.ctx.models_folder() / "fake-bundle")
    qtbot.waitUntil(lambda: _dialog(window) is not None and _dialog(window).value() > 0, timeout=5000)
    worker = window.ctx.job
    with qtbot.waitSignal(worker.finished, timeout=5000):
        _dialog(window).canceled.emit()  # its Cancel button, or Esc
    qtbot.waitUntil(lambda: window.ctx.job is None, timeout=5000)
    assert synth.tuned == 0 and synth.tuning_needed  # tuned again at the next open
    assert "Tuning cancelled" in window.statusBar().currentMessage()
    assert not dialogs.errors and window.ctx.synth is synth


def test_a_tuned_model_opens_without_the_step(qtbot, make_window):
    synth = FakeSynthesizer(tuning_needed=False)
    window = make_window(model=True, synth=synth)
    assert window.ctx.job is None and synth.tuned == 0 and _dialog(window) is None
