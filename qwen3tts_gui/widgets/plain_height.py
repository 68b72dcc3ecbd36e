"""Word-wrapped text without height-for-width layouts.

A word-wrapped label makes its panel, its group box and the dialog height-for-width widgets; a dialog's vertical
box layout in that mode shared its height out evenly and gave the Models dialog's Download section less than its
minimum at the dialog's default size, so its rows were drawn over each other. These widgets report a plain
minimum height instead: their wrapped height at their present width, asked again when the width changes.
"""

from __future__ import annotations

from PySide6.QtCore import QSize
from PySide6.QtWidgets import QLabel, QWidget


class PlainHeight:
    """Mix in before a QWidget class."""

    def hasHeightForWidth(self) -> bool:  # noqa: N802 (Qt's name)
        return False

    def minimumSizeHint(self) -> QSize:  # noqa: N802
        hint = super().minimumSizeHint()  # type: ignore[misc]
        width = max(self.width(), hint.width())  # type: ignore[attr-defined]
        return QSize(hint.width(), max(hint.height(), self.heightForWidth(width)))  # type: ignore[attr-defined]

    def sizeHint(self) -> QSize:  # noqa: N802
        hint = super().sizeHint()  # type: ignore[misc]
        return QSize(hint.width(), max(hint.height(), self.minimumSizeHint().height()))

    def resizeEvent(self, event) -> None:  # noqa: N802
        super().resizeEvent(event)  # type: ignore[misc]
        if event.oldSize().width() != event.size().width():
            self.updateGeometry()  # type: ignore[attr-defined]  # the wrapped height follows the width


class WrappedLabel(PlainHeight, QLabel):
    """A word-wrapped QLabel with a plain minimum height."""

    def __init__(self, text: str = "", parent: QWidget | None = None):
        super().__init__(text, parent)
        self.setWordWrap(True)
