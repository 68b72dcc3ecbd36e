"""Where the model runs: Automatic, the CPU, or a GPU that ncnn's Vulkan backend sees, by name.

The GPUs are looked up the first time the list is opened, not when the window is built: the app starts without
touching Vulkan (a missing loader or a broken driver can never stop it), and a machine without a GPU shows why
there is none. A GPU chosen in an earlier session stays selected, named by its number, until the list is opened.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtGui import QStandardItemModel
from PySide6.QtWidgets import QComboBox, QWidget

from ..data.settings import Settings
from ..engine_adapter import gpu_choices

AUTO_TIP = ("Automatic runs on the CPU unless this computer's tuning measured a GPU faster. Exact GPU runs give the "
            "same speech as the CPU; fast (fp16) ones are close but not identical. Used when a model is next opened.")


class DeviceCombo(QComboBox):
    """Items carry "device|gpu precision" ("auto|fp32", "cpu|fp32", "gpu:0|fp16"); the choice goes to settings."""

    def __init__(self, settings: Settings, parent: QWidget | None = None,
                 lookup: Callable[[], tuple[list[tuple[str, str]], str]] = gpu_choices):
        super().__init__(parent)
        self.settings = settings
        self._lookup = lookup
        self._looked_up = False
        self.addItem("Device: Automatic", "auto|fp32")
        self.addItem("Device: CPU", "cpu|fp32")
        current = f"{settings.device}|{settings.gpu_precision}"
        if self.findData(current) < 0:
            self.addItem(f"Device: GPU {settings.device.partition(':')[2] or ''} (as chosen before)".replace("  ", " "),
                         current)
        self.setCurrentIndex(max(self.findData(current), 0))
        self.setToolTip(AUTO_TIP)
        self.currentIndexChanged.connect(self._chosen)

    def showPopup(self) -> None:  # noqa: N802 (Qt's name)
        if not self._looked_up:
            self.fill_gpus()
        super().showPopup()

    def fill_gpus(self) -> None:
        """Add each GPU ncnn sees (exact and fast), or one disabled line saying why there is none."""
        self._looked_up = True
        current = self.currentData()
        self.blockSignals(True)
        while self.count() > 2:
            self.removeItem(2)
        gpus, reason = self._lookup()
        for label, device in gpus:
            # what tells the two apart comes first: a GPU's full name is long and the box shows its start only
            short = label.split(";")[0]  # "GPU 1: NVIDIA GeForce RTX 3060", without the driver's details
            for words, precision in (("exact", "fp32"), ("fast (fp16)", "fp16")):
                self.addItem(f"Device: {words}, {short}", f"{device}|{precision}")
                self.setItemData(self.count() - 1, f"{label} ({words})", Qt.ItemDataRole.ToolTipRole)
        if not gpus:
            self.addItem(f"No GPU: {reason}", None)
            model = self.model()
            assert isinstance(model, QStandardItemModel)  # a QComboBox's own model
            item = model.item(2)
            if item is not None:
                item.setEnabled(False)
        index = self.findData(current)
        self.setCurrentIndex(index if index >= 0 else 0)
        self.blockSignals(False)
        if index < 0:  # a GPU chosen before is gone: Automatic
            self._chosen(0)

    def _chosen(self, _index: int) -> None:
        data = self.currentData()
        if not data:
            return
        device, _, precision = str(data).partition("|")
        self.settings.device = device
        self.settings.gpu_precision = precision or "fp32"
