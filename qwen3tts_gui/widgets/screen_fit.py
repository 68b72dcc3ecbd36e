"""Where the main window opens: sized and placed from the screen's available geometry (a 1280x860 window on a
1366x768 laptop hid New from file…, Record, Play and Save… below the bottom edge)."""

from __future__ import annotations

from PySide6.QtCore import QMargins, QRect, QSize

PREFERRED = QSize(1280, 860)
# The window manager's frame is not known before the window is shown: room for a title bar and borders.
FRAME = QMargins(8, 36, 8, 8)


def first_geometry(available: QRect, minimum: QSize, preferred: QSize = PREFERRED) -> QRect | None:
    """The window's client rectangle, centred in `available` with its frame inside; None when even the
    minimum size does not fit (then the window opens maximised)."""
    room = available.marginsRemoved(FRAME)
    if room.width() < minimum.width() or room.height() < minimum.height():
        return None
    size = preferred.boundedTo(room.size()).expandedTo(minimum)
    rect = QRect(0, 0, size.width(), size.height())
    rect.moveCenter(room.center())
    return rect


def still_fits(client: QRect, available: QRect) -> bool:
    """A restored window whose frame lies inside the screen's available area (the screen may have changed)."""
    return available.contains(client.marginsAdded(FRAME))
