"""The mouse wheel scrolls the pane under it: it does not change a combo box or spin box the pointer happens to
pass over (a voice's Language silently became Italian while the voice pane was scrolled, and was saved so).

An unfocused combo or spin box hands the wheel to the scroll area around it; once clicked (focused), the wheel
changes it as usual. Installed once on the application, so every window and dialog follows it.
"""

from __future__ import annotations

from PySide6.QtCore import QCoreApplication, QEvent, QObject, Qt
from PySide6.QtWidgets import QAbstractScrollArea, QAbstractSpinBox, QComboBox, QWidget

GUARDED = (QComboBox, QAbstractSpinBox)


class WheelGuard(QObject):
    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt's name)
        kind = event.type()
        if kind == QEvent.Type.Polish and isinstance(watched, GUARDED):
            # Qt gives wheel focus before any filter sees the wheel: take the wheel out of their focus policy
            watched.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        elif kind == QEvent.Type.Wheel and isinstance(watched, GUARDED) and not watched.hasFocus():
            area = _scroll_area_around(watched)
            if area is not None:
                QCoreApplication.sendEvent(area.viewport(), event)
            return True  # never to the combo or spin box itself
        return False


def _scroll_area_around(widget: QWidget) -> QAbstractScrollArea | None:
    parent = widget.parentWidget()
    while parent is not None and not isinstance(parent, QAbstractScrollArea):
        parent = parent.parentWidget()
    return parent


def install_wheel_guard(app: QCoreApplication) -> WheelGuard:
    """One guard per application (a second call returns the first)."""
    guard = app.findChild(WheelGuard)
    if guard is None:
        guard = WheelGuard(app)
        app.installEventFilter(guard)
    return guard
