"""Render qwen3tts_gui/resources/icon.svg into the icon files installers need (PNG sizes, .ico, .icns). Uses Qt only."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SIZES = (16, 32, 48, 64, 128, 256, 512)


def render(out_dir: Path) -> dict[str, Path]:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QGuiApplication, QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer

    _app = QGuiApplication.instance() or QGuiApplication(sys.argv[:1])
    svg = ROOT / "qwen3tts_gui" / "resources" / "icon.svg"
    renderer = QSvgRenderer(str(svg))
    if not renderer.isValid():
        raise SystemExit(f"{svg} is not a valid SVG")
    out_dir.mkdir(parents=True, exist_ok=True)
    files: dict[str, Path] = {}
    images = {}
    for size in SIZES:
        img = QImage(size, size, QImage.Format.Format_ARGB32)
        img.fill(Qt.GlobalColor.transparent)
        painter = QPainter(img)
        renderer.render(painter)
        painter.end()
        images[size] = img
        path = out_dir / f"icon-{size}.png"
        img.save(str(path))
        files[f"png{size}"] = path
    for fmt, size in (("ico", 256), ("icns", 512)):
        path = out_dir / f"icon.{fmt}"
        # the stub types the format as bytes; the binding takes only str (bytes: ValueError, PySide6 on Linux)
        if not images[size].save(str(path), fmt):  # type: ignore[call-overload]
            raise SystemExit(f"Qt could not write {path}")
        files[fmt] = path
    return files


if __name__ == "__main__":
    for name, path in render(Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "build" / "icons")).items():
        print(name, path)
