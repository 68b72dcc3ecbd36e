"""Generation settings behind a disclosure button; defaults come from the model bundle."""

from __future__ import annotations

import math
from dataclasses import replace

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSpinBox,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from ..data.settings import Settings
from ..engine_adapter import (
    FRAME_RATE,
    SETTING,
    GenerationSettings,
    SettingSpec,
    official_defaults,
    physical_cores,
    usable_cpus,
)
from .device_combo import DeviceCombo

SHOWN = ("temperature", "top_k", "top_p", "repetition_penalty")  # the sampling settings the form offers
# Used only where a bundle leaves a value unset (the official wrapper's defaults).
FALLBACK = official_defaults()


def _value(defaults: GenerationSettings, name: str):
    v = getattr(defaults, name)
    return getattr(FALLBACK, name) if v is None else v


def _set_spin(spin: QSpinBox | QDoubleSpinBox, value: float | str) -> None:
    """Show a remembered value as the box's own kind of number (TypeError, ValueError when it is none)."""
    if isinstance(spin, QSpinBox):
        spin.setValue(int(value))
    else:
        spin.setValue(float(value))


def _tip(spec: SettingSpec) -> str:
    return spec.help[:1].upper() + spec.help[1:]


def _whole_spin(spec: SettingSpec) -> QSpinBox:
    """The input box of a declared whole-number setting: its range and step, its help as the tooltip."""
    box = QSpinBox(minimum=int(spec.low), maximum=int(spec.high), singleStep=int(spec.step))
    box.setToolTip(_tip(spec))
    return box


def _spin(spec: SettingSpec) -> QSpinBox | QDoubleSpinBox:
    """The input box of a declared setting: its range, step and decimals, its help as the tooltip."""
    if spec.whole:
        return _whole_spin(spec)
    box = QDoubleSpinBox(minimum=spec.low, maximum=spec.high, singleStep=spec.step, decimals=spec.decimals)
    box.setToolTip(_tip(spec))
    return box


def _widget(item: QWidget | QHBoxLayout) -> QWidget:
    """A layout wrapped in a widget, so it can move between grid cells."""
    if isinstance(item, QWidget):
        return item
    holder = QWidget()
    item.setContentsMargins(0, 0, 0, 0)
    holder.setLayout(item)
    return holder


class GenerationSettingsBox(QWidget):
    toggled = Signal(bool)

    def __init__(self, settings: Settings, parent: QWidget | None = None):
        super().__init__(parent)
        self.settings = settings
        self.defaults = FALLBACK
        self.toggle = QToolButton()
        self.toggle.setText("Generation settings")
        self.toggle.setObjectName("Disclosure")
        self.toggle.setCheckable(True)
        self.toggle.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.toggle.toggled.connect(self._set_open)

        self.body = QFrame()
        self.body.setObjectName("SettingsBody")
        grid = QGridLayout(self.body)
        grid.setContentsMargins(14, 10, 14, 10)
        grid.setHorizontalSpacing(12)
        grid.setVerticalSpacing(6)

        # every box and check box of a generation setting is built from its declaration (engine/setting_specs.py)
        self.seed = _whole_spin(SETTING["seed"])
        self.seed.setValue(settings.seed)
        self.seed_random = QCheckBox("Random")
        self.seed_random.setToolTip("A new seed for every take (the seed used is shown in the take list)")
        self.seed_random.toggled.connect(lambda on: self.seed.setEnabled(not on))
        self.seed_random.setChecked(settings.seed_random)
        self.seed.setEnabled(not settings.seed_random)
        seed_row = QHBoxLayout()
        seed_row.addWidget(self.seed, 1)
        seed_row.addWidget(self.seed_random)
        self.sampling = {name: _spin(SETTING[name]) for name in SHOWN}
        self.temperature, self.top_k = self.sampling["temperature"], self.sampling["top_k"]
        self.top_p, self.repetition_penalty = self.sampling["top_p"], self.sampling["repetition_penalty"]
        self.max_frames = _whole_spin(SETTING["max_frames"])
        self.max_frames.setSuffix(" frames")
        self.max_frames.setSpecialValueText("Automatic")  # 0: the engine's limit from the length of the text
        self.max_seconds = QLabel()
        self.max_seconds.setObjectName("Muted")
        self.max_frames.valueChanged.connect(self._show_seconds)
        length_row = QHBoxLayout()
        length_row.addWidget(self.max_frames, 1)
        length_row.addWidget(self.max_seconds)
        self.greedy = QCheckBox(f"{SETTING['greedy'].label} (no randomness)")
        self.greedy.setToolTip(_tip(SETTING["greedy"]))
        self.greedy.toggled.connect(self._greedy_toggled)
        self.stream_audio = QCheckBox("Decode while generating")
        self.stream_audio.setToolTip("Make audio as the frames arrive, so playback can start before the end")
        self.stream_audio.setChecked(settings.stream_audio)
        self.stream_audio.toggled.connect(lambda on: setattr(self.settings, "stream_audio", on))
        # long texts (several chunks): the silence between chunks of a paragraph and after a paragraph
        self.sentence_pause = QDoubleSpinBox(minimum=0.0, maximum=10.0, singleStep=0.05, decimals=2, suffix=" s")
        self.paragraph_pause = QDoubleSpinBox(minimum=0.0, maximum=10.0, singleStep=0.1, decimals=2, suffix=" s")
        self.sentence_pause.setValue(settings.sentence_pause_ms / 1000)
        self.paragraph_pause.setValue(settings.paragraph_pause_ms / 1000)
        self.sentence_pause.setToolTip("A long text is spoken in chunks of whole sentences: the pause between "
                                       "two chunks of one paragraph")
        self.paragraph_pause.setToolTip("The pause after a paragraph (a blank line) in a long text")
        self.sentence_pause.valueChanged.connect(
            lambda v: setattr(self.settings, "sentence_pause_ms", round(v * 1000)))
        self.paragraph_pause.valueChanged.connect(
            lambda v: setattr(self.settings, "paragraph_pause_ms", round(v * 1000)))
        self.threads = QSpinBox(minimum=0, maximum=max(1, usable_cpus()))
        self.threads.setPrefix("Threads: ")
        self.threads.setSpecialValueText(f"Threads: auto ({physical_cores()})")
        self.threads.setToolTip("CPU threads for the model (auto: the counts measured for this computer when the "
                                "model was first opened, else one per physical core); used when a model is next "
                                "opened. Fewer threads leave cores free for other programs.")
        self.threads.setValue(min(settings.threads, self.threads.maximum()))
        self.threads.valueChanged.connect(lambda n: setattr(self.settings, "threads", n))
        self.decoder = QComboBox()
        self.decoder.addItem("Speech decoder: Exact (fp32)", "fp32")
        self.decoder.addItem("Speech decoder: Fast (bf16)", "auto")
        self.decoder.setToolTip("Fast runs the speech decoder's big convolutions in bf16 on CPUs with AVX512-BF16 "
                                "(about 1.5x faster; the audio changes slightly, about 30 dB below it); elsewhere, and for models "
                                "converted before this option, it decodes exactly. Used when a model is next opened.")
        self.decoder.setCurrentIndex(max(self.decoder.findData(settings.decoder_precision), 0))
        self.decoder.currentIndexChanged.connect(
            lambda _i: setattr(self.settings, "decoder_precision", self.decoder.currentData()))
        self.device = DeviceCombo(settings)
        reset = QPushButton("Model defaults")
        reset.setToolTip("Reset every value to the model's generation_config.json")
        reset.clicked.connect(self.reset_to_defaults)

        # label/field pairs in the declaration's order (the seed, the sampling settings the form shows, the
        # length), then the pauses: two to a row when there is room and one to a row when the column is narrow
        # (the window's smallest size); the grid is rebuilt from these when the body's width crosses the line
        fields: list[tuple[str, QWidget | QHBoxLayout]] = [
            (SETTING["seed"].label, seed_row), *((SETTING[name].label, box) for name, box in self.sampling.items()),
            (SETTING["max_frames"].label, length_row),
            ("Pause between sentences", self.sentence_pause), ("Pause after a paragraph", self.paragraph_pause),
        ]
        self._grid = grid
        self._pairs: list[tuple[QLabel, QWidget]] = [(QLabel(label), _widget(field)) for label, field in fields]
        flags = QHBoxLayout()
        flags.setContentsMargins(0, 0, 0, 0)
        flags.addWidget(self.greedy)
        flags.addSpacing(16)
        flags.addWidget(self.stream_audio)
        flags.addStretch(1)
        # threads and decoder, then device and defaults: one row of all four needs 596 px, more than the pane
        # has at 960x640 (sideways scrolling); two rows fit in one column
        engine_row = QHBoxLayout()
        engine_row.setContentsMargins(0, 0, 0, 0)
        engine_row.addWidget(self.threads)
        engine_row.addWidget(self.decoder)
        engine_row.addStretch(1)
        device_row = QHBoxLayout()
        device_row.setContentsMargins(0, 0, 0, 0)
        device_row.addWidget(self.device)
        device_row.addStretch(1)
        device_row.addWidget(reset)
        self._flags = (_widget(flags), _widget(engine_row), _widget(device_row))
        self._columns = 0
        self._arrange(1)
        self._one_column_width = grid.minimumSize().width()
        self._arrange(2)
        self._two_column_width = grid.minimumSize().width()
        self.body.setMinimumWidth(self._one_column_width)  # the grid's own minimum would be the 2-column one

        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(4)
        lay.addWidget(self.toggle, 0, Qt.AlignmentFlag.AlignLeft)
        lay.addWidget(self.body)
        self.toggle.setChecked(settings.settings_open)
        self._set_open(settings.settings_open)
        self._loading = False
        self._drop_unusable_values()
        self.load_defaults(FALLBACK)
        # values the user sets are kept (and win over the model's defaults at the next start)
        for spin in (*self.sampling.values(), self.max_frames):
            spin.valueChanged.connect(self._remember)
        self.greedy.toggled.connect(self._remember)

    def _arrange(self, columns: int) -> None:
        if columns == self._columns:
            return
        grid = self._grid
        while grid.count():
            grid.takeAt(0)
        for i, (label, field) in enumerate(self._pairs):
            row, col = divmod(i, columns)
            grid.addWidget(label, row, 2 * col)
            grid.addWidget(field, row, 2 * col + 1)
        rows = -(-len(self._pairs) // columns)
        for i, flags in enumerate(self._flags):
            if columns == 2:  # greedy and streaming beside threads and decoder; device and defaults below them
                grid.addWidget(flags, rows + i // 2, 2 * (i % 2) + 2 * (i // 2), 1, 2)
            else:
                grid.addWidget(flags, rows + i, 0, 1, 2)
        for col in range(4):
            grid.setColumnStretch(col, 1 if col in (1, 3) and col < 2 * columns else 0)
        self._columns = columns

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._arrange(2 if self.body.width() >= self._two_column_width else 1)

    def _set_open(self, on: bool) -> None:
        self.toggle.setArrowType(Qt.ArrowType.DownArrow if on else Qt.ArrowType.RightArrow)
        self.body.setVisible(on)
        self.settings.settings_open = on
        self.toggled.emit(on)

    def _greedy_toggled(self, on: bool) -> None:
        for name, box in self.sampling.items():  # greedy ignores what shapes random sampling only
            box.setEnabled(not (on and SETTING[name].random))

    def _show_seconds(self, frames: int) -> None:
        s = frames / FRAME_RATE
        self.max_seconds.setText(f"≈ {int(s // 60)}:{s % 60:04.1f}" if frames else "")

    def _spins(self) -> dict[str, QSpinBox | QDoubleSpinBox]:
        return {**self.sampling, "max_frames": self.max_frames}

    def _drop_unusable_values(self) -> None:
        """Forget remembered values no field can show (a hand edit, another version: top-k 1e30, Infinity), each
        named once; the model's default is used instead. A stored value must never stop the app from starting."""
        user, kept = self.settings.generation_values, {}
        for name, value in user.items():
            spin = self._spins().get(name)
            if name == "greedy":
                usable = isinstance(value, bool)
            elif spin is not None:
                whole = isinstance(spin, QSpinBox)
                usable = (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
                          and (not whole or float(value).is_integer()) and spin.minimum() <= value <= spin.maximum())
            else:
                continue  # not one of ours (any more): dropped without a word
            if usable:
                kept[name] = value
            else:
                self.settings.report(f"The setting generate/values had an unusable {name} ({str(value)[:40]}); "
                                     "the model's default is used.")
        if kept != user:
            self.settings.generation_values = kept

    def load_defaults(self, defaults: GenerationSettings) -> None:
        """The model's defaults, then whatever the user set (remembered in the settings) on top."""
        self.defaults = defaults
        user = self.settings.generation_values
        self._loading = True
        try:
            self.greedy.setChecked(bool(user.get("greedy", defaults.greedy)))
            for name, spin in self.sampling.items():
                try:
                    _set_spin(spin, user.get(name, _value(defaults, name)))
                except (TypeError, ValueError):  # a hand-edited value: the default instead
                    _set_spin(spin, _value(defaults, name))
            try:
                self.max_frames.setValue(int(user.get("max_frames", defaults.max_frames or 0) or 0))
            except (TypeError, ValueError):
                self.max_frames.setValue(int(defaults.max_frames or 0))
        finally:
            self._loading = False
        self._show_seconds(self.max_frames.value())

    def reset_to_defaults(self) -> None:
        self.settings.generation_values = {}
        self.load_defaults(self.defaults)

    def _remember(self, *_) -> None:
        if self._loading:
            return
        self.settings.generation_values = dict(
            greedy=self.greedy.isChecked(), **{name: spin.value() for name, spin in self.sampling.items()},
            max_frames=self.max_frames.value())

    def generation_settings(self) -> GenerationSettings:
        random_seed = self.seed_random.isChecked()
        self.settings.seed_random = random_seed
        self.settings.seed = self.seed.value()
        settings = replace(
            self.defaults,
            greedy=self.greedy.isChecked(),
            seed=None if random_seed else self.seed.value(),
            max_frames=self.max_frames.value() or None,
            stream_audio=self.stream_audio.isChecked(),
        )
        for name, spin in self.sampling.items():
            setattr(settings, name, spin.value())
        return settings
