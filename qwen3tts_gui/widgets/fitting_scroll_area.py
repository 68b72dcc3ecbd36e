"""A scroll area that scrolls up and down only and is never narrower than what it holds.

A plain QScrollArea with its sideways scroll bar turned off clips its widget on the right when the widget needs
more width than the area has: with the app's style sheet and no microphone the voice column needs 354 px in a
340 px pane, and "Delete" and "Record (no microphone)" lost their right border. This area asks its splitter for
the widget's minimum width plus the vertical scroll bar's, and asks again whenever the widget's layout changes
(a button's text grows, the style sheet is set).
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, QSize, Qt
from PySide6.QtWidgets import QFrame, QScrollArea, QStyle, QWidget


class FittingScrollArea(QScrollArea):
    def __init__(self, widget: QWidget, least_width: int = 0, parent: QWidget | None = None):
        super().__init__(parent)
        self._least_width = least_width
        self.setWidget(widget)
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        widget.installEventFilter(self)

    def _fitting_width(self) -> int:
        widget = self.widget()
        if widget is None:
            return self._least_width
        bar = self.verticalScrollBar().sizeHint().width() or self.style().pixelMetric(
            QStyle.PixelMetric.PM_ScrollBarExtent)
        frame = 2 * self.frameWidth()
        return max(self._least_width, widget.minimumSizeHint().width() + bar + frame)

    def minimumSizeHint(self) -> QSize:
        return QSize(self._fitting_width(), super().minimumSizeHint().height())

    def sizeHint(self) -> QSize:
        hint = super().sizeHint()
        return QSize(max(hint.width(), self._fitting_width()), hint.height())

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self.widget() and event.type() == QEvent.Type.LayoutRequest:
            self.updateGeometry()  # the splitter asks for the new minimum width
        return super().eventFilter(watched, event)
