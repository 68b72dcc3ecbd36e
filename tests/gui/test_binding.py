"""The Qt binding itself must be sound: PySide6 6.12.0 on Python 3.11 loses a reference to None per call."""

from qwen3tts_gui.app import binding_problem


def test_qt_binding_keeps_none_alive():
    assert binding_problem() is None


def test_the_settings_form_builds_its_sampling_boxes_from_the_declarations(qtbot, settings):
    """Each box the form shows has its setting's declared range, step, label and help (engine/setting_specs.py),
    and what it holds reaches GenerationSettings under the setting's name."""
    from PySide6.QtWidgets import QDoubleSpinBox, QLabel, QSpinBox

    from engine import SAMPLING_SETTINGS
    from qwen3tts_gui.widgets.settings_box import SHOWN, GenerationSettingsBox

    box = GenerationSettingsBox(settings)
    qtbot.addWidget(box)
    labels = {label.text() for label in box.findChildren(QLabel)}
    for spec in (s for s in SAMPLING_SETTINGS if s.name in SHOWN):
        spin = box.sampling[spec.name]
        assert isinstance(spin, QSpinBox if spec.whole else QDoubleSpinBox)
        assert (spin.minimum(), spin.maximum(), spin.singleStep()) == (spec.low, spec.high, spec.step)
        assert spec.label in labels and spec.help[1:] in spin.toolTip()
        spin.setValue(spin.maximum())
        assert getattr(box.generation_settings(), spec.name) == spin.maximum()
