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


def test_seed_greedy_and_length_come_from_their_declarations(qtbot, make_window):
    """The seed, greedy and maximum length are declared with the sampling settings: the form's boxes take their
    range, step, label and help from there, and a take's line and details name them by their labels."""
    from dataclasses import replace

    from PySide6.QtWidgets import QLabel

    from engine.setting_specs import SETTING
    from qwen3tts_gui.widgets.settings_box import SHOWN

    window = make_window()
    box = window.settings_box
    labels = {label.text() for label in box.findChildren(QLabel)}
    for name, spin in (("seed", box.seed), ("max_frames", box.max_frames)):
        spec = SETTING[name]
        assert (spin.minimum(), spin.maximum(), spin.singleStep()) == (spec.low, spec.high, spec.step)
        assert spec.label in labels and spec.help[1:] in spin.toolTip()
    assert box.greedy.text().startswith(SETTING["greedy"].label) and SETTING["greedy"].help[1:] in box.greedy.toolTip()

    box.seed_random.setChecked(False)
    box.seed.setValue(box.seed.maximum())
    box.max_frames.setValue(box.max_frames.singleStep())
    settings = box.generation_settings()
    assert (settings.seed, settings.max_frames) == (SETTING["seed"].high, SETTING["max_frames"].step)

    window.text_edit.setPlainText("Hello there.")
    assert window.generate()
    qtbot.waitUntil(lambda: window.synth_worker is None, timeout=10000)
    take = window.output.current
    details = take.details()
    for name in ("seed", "max_frames", *SHOWN):
        assert SETTING[name].label.lower() in details.lower(), (name, details)
    greedy = replace(take, settings=replace(take.settings, greedy=True))
    assert SETTING["greedy"].label.lower() in greedy.details().lower() and SETTING["greedy"].label.lower() in greedy.label()


def test_a_take_names_every_declared_setting_it_was_made_with(qtbot, make_window):
    """A take's details name each sampling setting that has a value, by its declared label (those greedy ignores
    give way to "greedy"), and greedy disables just the boxes of the settings it ignores."""
    from dataclasses import replace

    from engine import SAMPLING_SETTINGS

    window = make_window()
    box = window.settings_box
    box.greedy.setChecked(True)
    assert {name: spin.isEnabled() for name, spin in box.sampling.items()} == {
        spec.name: not spec.random for spec in SAMPLING_SETTINGS if spec.name in box.sampling}
    box.greedy.setChecked(False)
    window.text_edit.setPlainText("Hello there.")
    assert window.generate()
    qtbot.waitUntil(lambda: window.synth_worker is None, timeout=10000)
    take = window.output.current
    values = {spec.name: 100 + i if spec.whole else round(0.51 + i / 100, 2)  # no value the start of another
              for i, spec in enumerate(SAMPLING_SETTINGS)}
    made = replace(take, settings=replace(take.settings, **values))
    for spec in SAMPLING_SETTINGS:
        assert f"{spec.label.lower()} {values[spec.name]}" in made.details(), spec.name
    greedy = replace(made, settings=replace(made.settings, greedy=True)).details()
    for spec in SAMPLING_SETTINGS:
        assert (f"{spec.label.lower()} {values[spec.name]}" in greedy) == (not spec.random), spec.name


def test_before_a_model_opens_the_form_shows_the_official_defaults(qtbot, settings):
    """What the form shows for a setting the model leaves unset is the engine's one list of the official defaults,
    so a new sampling setting brings its default with it."""
    from engine import official_defaults
    from qwen3tts_gui.widgets.settings_box import GenerationSettingsBox

    box = GenerationSettingsBox(settings)
    qtbot.addWidget(box)
    defaults = official_defaults()
    assert box.defaults == defaults
    for name, spin in box.sampling.items():
        assert spin.value() == getattr(defaults, name), name
