"""The model's languages as a combo box (shown by name, stored by code), and their display names."""

from __future__ import annotations

from PySide6.QtWidgets import QComboBox, QWidget


def language_title(code: str) -> str:
    return "Auto-detect" if code == "auto" else code.replace("_", " ").title()


def language_items(codes: list[str]) -> list[tuple[str, str]]:
    """(title, code) pairs for a list of language codes."""
    return [(language_title(code), code) for code in codes]


class LanguageCombo(QComboBox):
    """Languages by name; currentData() is the code. Refilling keeps the choice when the new list has it."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.set_languages(["auto"])

    def set_languages(self, codes: list[str], select: str | None = None) -> None:
        """Refill without emitting change signals; select (or the current choice) stays chosen if present."""
        keep = select or self.language()
        self.blockSignals(True)
        self.clear()
        for title, code in language_items(codes or ["auto"]):
            self.addItem(title, code)
        self.setCurrentIndex(max(self.findData(keep), 0))
        self.blockSignals(False)

    def language(self) -> str:
        return self.currentData() or "auto"
