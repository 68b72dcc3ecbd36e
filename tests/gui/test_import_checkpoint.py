"""Import checkpoint converts at the precision shown beside the button (welcome screen, File > Models), and
File > Import uses the one chosen last."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from qwen3tts_gui.data.paths import models_dir
from qwen3tts_gui.engine_adapter import ModelStore
from qwen3tts_gui.widgets.download_panel import precision_label

CHECKPOINT = Path(__file__).resolve().parents[1] / "fixtures" / "models" / "tiny06b"


def _imported_precisions() -> dict[str, str]:
    """Installed models and their precision, as the store lists them (work folders of a conversion still
    running are not listed)."""
    return {m.name: m.precision for m in ModelStore(models_dir()).installed()}


def _wait_opened(qtbot, window, count: int) -> None:
    qtbot.waitUntil(lambda: len(_imported_precisions()) == count and window.ctx.job is None, timeout=60000)
    qtbot.waitUntil(lambda: window.ctx.model_path is not None and window.ctx.job is None, timeout=10000)


def test_welcome_import_converts_at_the_precision_shown_beside_it(qtbot, make_window, dialogs, settings):
    window = make_window(model=False, voice=False)
    panel = window.welcome.download
    assert panel.precision() == "q8"  # "Fast (8-bit)", the documented default
    dialogs.dirs = [str(CHECKPOINT)]
    window.welcome.import_btn.click()
    _wait_opened(qtbot, window, 1)
    assert not dialogs.errors, dialogs.errors
    assert _imported_precisions() == {"tiny06b": "q8"}
    assert window.ctx.model_path == models_dir() / "tiny06b"


@pytest.mark.parametrize("precision", ["fp16", "fp32"])
def test_models_dialog_import_keeps_the_chosen_precision_and_file_import_follows(qtbot, make_window, dialogs,
                                                                                 settings, precision):
    window = make_window(model=False, voice=False)
    dialog = window.show_models()
    combo = dialog.panel.precision_combo
    combo.setCurrentIndex(combo.findData(precision))
    combo.activated.emit(combo.currentIndex())  # as a user's pick does
    dialogs.dirs = [str(CHECKPOINT)]
    dialog._import()
    _wait_opened(qtbot, window, 1)
    assert _imported_precisions() == {"tiny06b": precision}
    assert settings.download_precision == precision

    # File > Import checkpoint… has no choice of its own: the one chosen last (and shown in the panels); the
    # same checkpoint at that precision is installed already: converting it again is asked, not done unsaid
    dialogs.dirs = [str(CHECKPOINT)]
    dialogs.choice = 1  # "Convert again"
    window.import_action.trigger()
    _wait_opened(qtbot, window, 2)
    assert dialogs.questions[-1][0] == "Already installed" and precision_label(precision) in dialogs.questions[-1][1]
    assert set(_imported_precisions().values()) == {precision}


def test_the_same_checkpoint_again_offers_the_installed_model(qtbot, make_window, dialogs, tmp_path):
    window = make_window(model=False, voice=False)
    dialogs.dirs = [str(CHECKPOINT)]
    window.welcome.import_btn.click()  # Fast (8-bit)
    _wait_opened(qtbot, window, 1)
    assert not dialogs.questions
    # the same files in another folder are the same checkpoint
    copy = tmp_path / "copy of tiny06b"
    shutil.copytree(CHECKPOINT, copy)
    dialogs.dirs = [str(copy)]
    dialogs.choice = 0  # "Open it"
    window.ctx.set_model(None, None)
    window.welcome.import_btn.click()
    qtbot.waitUntil(lambda: bool(dialogs.questions) and window.ctx.job is None, timeout=60000)
    title, text, choices = dialogs.questions[-1]
    assert title == "Already installed" and "“tiny06b”" in text and choices == ["Open it", "Convert again"]
    qtbot.waitUntil(lambda: window.ctx.model_path == models_dir() / "tiny06b", timeout=10000)
    assert list(_imported_precisions()) == ["tiny06b"]  # no second copy

    # at another precision it is another model: converted without a question
    asked = len(dialogs.questions)
    window.ctx.settings.download_precision = "fp16"
    dialogs.dirs = [str(copy)]
    window.import_action.trigger()
    _wait_opened(qtbot, window, 2)
    assert len(dialogs.questions) == asked and sorted(_imported_precisions().values()) == ["fp16", "q8"]
