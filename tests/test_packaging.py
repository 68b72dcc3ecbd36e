"""The .deb layout and metadata, built from a stand-in onedir folder (the real PyInstaller build runs in CI's
install test, tests/test_install.py with QWEN3TTS_INSTALL_TEST=1)."""

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(shutil.which("dpkg-deb") is None, reason="dpkg-deb is not installed (not Debian)")


def _build_module():
    sys.path.insert(0, str(ROOT / "packaging"))
    spec = importlib.util.spec_from_file_location("qwen3tts_build", ROOT / "packaging" / "build.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_deb_installs_bundle_launchers_desktop_entry_and_icons(tmp_path):
    build = _build_module()
    onedir = tmp_path / "dist" / build.APP
    onedir.mkdir(parents=True)
    for exe in (build.APP, "qwen3tts"):
        (onedir / exe).write_text("#!/bin/sh\n")
        (onedir / exe).chmod(0o755)
    icons = build.render(tmp_path / "icons")["png256"].parent
    deb = build.make_deb(onedir, tmp_path / "dist", tmp_path / "build", icons)

    fields = subprocess.run(["dpkg-deb", "-f", str(deb)], capture_output=True, text=True, check=True).stdout
    assert f"Package: {build.APP}" in fields
    depends = next(line for line in fields.splitlines() if line.startswith("Depends:"))
    # the two Qt names wrongly as "xcb-cursor0" when missing, and PortAudio (dlopened, invisible to ldd)
    for lib in ("libportaudio2", "libxcb-cursor0", "libxcb-icccm4", "libxcb-keysyms1", "libegl1"):
        assert lib in depends
    # the GPU path uses the system's Vulkan loader and drivers when present, the CPU otherwise: recommended only
    recommends = next(line for line in fields.splitlines() if line.startswith("Recommends:"))
    assert recommends == "Recommends: libvulkan1, mesa-vulkan-drivers" and "vulkan" not in depends

    listing = subprocess.run(["dpkg-deb", "-c", str(deb)], capture_output=True, text=True, check=True).stdout
    for path in (
        f"./opt/{build.APP}/{build.APP}",
        f"./opt/{build.APP}/qwen3tts",
        f"./usr/bin/{build.APP}",
        "./usr/bin/qwen3tts",
        f"./usr/share/applications/{build.APP_ID}.desktop",
        f"./usr/share/icons/hicolor/256x256/apps/{build.APP_ID}.png",
        f"./usr/share/icons/hicolor/scalable/apps/{build.APP_ID}.svg",
    ):
        assert path in listing, path

    # Uninstall must leave user data alone: the maintainer scripts only refresh caches.
    work = tmp_path / "x"
    subprocess.run(["dpkg-deb", "-R", str(deb), str(work)], check=True)
    for script in ("postinst", "postrm"):
        text = (work / "DEBIAN" / script).read_text()
        assert "rm " not in text and ".local" not in text and ".config" not in text
    entry = (work / "usr/share/applications" / f"{build.APP_ID}.desktop").read_text()
    assert f"Exec=/usr/bin/{build.APP}" in entry and f"Icon={build.APP_ID}" in entry
