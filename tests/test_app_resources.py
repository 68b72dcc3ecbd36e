"""The app's style sheet, window icon and the images the sheet names are found in all three ways the app runs:
from a checkout, from an installed wheel, and frozen by PyInstaller (the .tar.gz and the .deb carry that folder
as it is; CI's install test runs the installed app's self-test, which checks the same)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Run in a fresh interpreter: which qwen3tts_gui it imported, and what of the look it cannot find.
PROBE = (
    "import json, qwen3tts_gui; from qwen3tts_gui.app import missing_resources; "
    "print(json.dumps({'package': qwen3tts_gui.__file__, 'missing': missing_resources()}))"
)


def _probe(path_entry: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(path_entry))
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=path_entry, env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    found = json.loads(out.stdout.strip().splitlines()[-1])
    # the package must come from the layout under test, not from the checkout or an editable install
    assert Path(found["package"]).resolve().is_relative_to(path_entry.resolve()), found["package"]
    return found


def test_checkout_finds_the_style_sheet_icon_and_the_images_it_names():
    from qwen3tts_gui.app import load_style_sheet, missing_resources
    from qwen3tts_gui.data.paths import resource

    assert resource("style.qss") is not None and resource("icon.svg") is not None
    assert missing_resources() == []
    assert "url(" in load_style_sheet() and "@RESOURCES@" not in load_style_sheet()


def test_installed_wheel_finds_the_style_sheet_and_icon(tmp_path):
    """Build the wheel as pip does (package data from pyproject.toml), unpack it as site-packages and look."""
    src = tmp_path / "src"
    src.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("engine", "qwen3tts_cli", "qwen3tts_gui"):
        shutil.copytree(ROOT / name, src / name, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    wheels = tmp_path / "wheels"
    out = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels), str(src)],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    (wheel,) = wheels.glob("qwen3tts_studio-*.whl")
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as z:
        z.extractall(site)
    assert _probe(site)["missing"] == []


def _spec_datas() -> list[tuple[str, str]]:
    """The datas the PyInstaller spec hands to Analysis, read by running the spec with stand-ins."""
    seen: list[list[tuple[str, str]]] = []

    def analysis(scripts, **kw):
        seen.append(kw["datas"])
        return type("A", (), {"pure": [], "scripts": [], "binaries": [], "datas": []})()

    def anything(*args, **kw):
        return None

    spec = ROOT / "packaging" / "qwen3tts.spec"
    names = {"SPECPATH": str(spec.parent), "Analysis": analysis, "PYZ": anything, "EXE": anything,
             "COLLECT": anything, "BUNDLE": anything, "__file__": str(spec)}
    exec(compile(spec.read_text(), str(spec), "exec"), names)
    assert seen and all(d == seen[0] for d in seen)
    return seen[0]


def test_pyinstaller_bundle_puts_them_where_the_app_looks(tmp_path):
    """Lay out the frozen app's folder as PyInstaller does (the package's modules beside the spec's datas, each
    data folder copied to its destination) and look from there."""
    frozen = tmp_path / "_internal"
    shutil.copytree(ROOT / "qwen3tts_gui", frozen / "qwen3tts_gui", ignore=shutil.ignore_patterns(
        "__pycache__", "*.pyc", "resources"))
    for source, dest in _spec_datas():
        shutil.copytree(source, frozen / dest, dirs_exist_ok=True)
    assert _probe(frozen)["missing"] == []
