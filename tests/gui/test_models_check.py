"""The Models dialog shows what the 8-bit check measured beside each model's precision, and offers the check to an
8-bit model made before it (engine/convert/q8_recheck.py runs it against the checkpoint the user picks)."""

from __future__ import annotations

from PySide6.QtCore import Qt

from engine import Bundle, read_check_record
from engine.convert import convert_checkpoint
from tests.bundles import MODELS

MODEL = MODELS / "tiny06b"


def rows(dialog) -> dict:
    items = [dialog.table.topLevelItem(i) for i in range(dialog.table.topLevelItemCount())]
    return {item.text(0).split(" (")[0]: item for item in items}  # "old (default)" once opened


def test_the_dialog_shows_the_check_and_offers_it_to_an_old_8bit_model(qtbot, make_window, dialogs):
    window = make_window(model=False)
    root = window.ctx.models_folder()
    old = convert_checkpoint(MODEL, root / "old", "q8", check=False)  # as converted before the check
    new = convert_checkpoint(MODEL, root / "new", "q8")
    record = read_check_record(Bundle.open(new).manifest)
    dialog = window.models.show_models()
    qtbot.addWidget(dialog)
    table = rows(dialog)
    assert table["old"].text(1) == "q8 (8-bit, not checked)"
    assert "qwen3tts models check old" in table["old"].toolTip(1)
    assert table["new"].text(1) == f"{Bundle.open(new).precision} ({record.summary()})"
    dialog.table.setCurrentItem(table["new"])
    assert not dialog.check_btn.isEnabled()
    dialog.table.setCurrentItem(table["old"])
    assert dialog.check_btn.isEnabled()

    dialogs.dirs.append(str(MODEL))  # the checkpoint it came from
    qtbot.mouseClick(dialog.check_btn, Qt.MouseButton.LeftButton)
    assert window.ctx.job is not None  # the check runs off the GUI thread
    qtbot.waitUntil(lambda: window.ctx.job is None, timeout=180000)
    assert not [e for e in dialogs.errors if "checking" in e[0]]
    again = window.models.show_models()
    qtbot.addWidget(again)
    checked = read_check_record(Bundle.open(old).manifest)
    assert rows(again)["old"].text(1) == f"{Bundle.open(old).precision} ({checked.summary()})"
    # the check says what it found and does not open the model it checked
    assert window.statusBar().currentMessage() == f"Checked old: {checked.summary()}"
    assert window.ctx.model_path is None and window.ctx.synth is None


def test_checking_the_open_model_opens_it_again(qtbot, make_window, dialogs):
    """The check may rewrite the model's files (layers kept float, or a float model): the open one is reloaded."""
    opened = []
    window = make_window(model=False)
    old = convert_checkpoint(MODEL, window.ctx.models_folder() / "old", "q8", check=False)
    window.ctx.model_path = old  # as if it were open
    window.models.open_model = lambda path: opened.append(path) or True
    dialogs.dirs.append(str(MODEL))
    window.models.check_model(old)
    qtbot.waitUntil(lambda: window.ctx.job is None, timeout=180000)
    assert opened == [old]


def test_no_checkpoint_chosen_leaves_the_model_as_it_was(qtbot, make_window, dialogs):
    window = make_window(model=False)
    old = convert_checkpoint(MODEL, window.ctx.models_folder() / "old", "q8", check=False)
    before = (old / "manifest.json").read_bytes()
    window.models.check_model(old)  # the folder dialog is cancelled (no answer scripted)
    assert window.ctx.job is None and (old / "manifest.json").read_bytes() == before
