"""Build the double-click installers that can be built on this system, in one command.

    python packaging/build.py            # PyInstaller onedir + (Linux) portable .tar.gz and .deb
    python packaging/build.py --no-deb   # skip the .deb

Outputs go to dist/. Windows (Inno Setup, packaging/windows/qwen3tts-studio.iss) and macOS (the spec's BUNDLE,
packaging/macos/README.md) installers are built on those systems.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tarfile
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "packaging"))

from make_icons import render  # noqa: E402

from qwen3tts_gui.data.paths import resources_dir  # noqa: E402
from qwen3tts_gui.qt_system_libs import DEB_PACKAGES  # noqa: E402

APP = "qwen3tts-studio"
APP_ID = "io.github.qwen3tts.Studio"
# Runtime libraries the bundled Qt (xcb platform) and sounddevice load from the system: one list, shared
# with the launcher's check (qwen3tts_gui/qt_system_libs.py).
DEB_DEPENDS = DEB_PACKAGES
# The GPU path: ncnn dlopens the system's Vulkan loader (libvulkan.so.1) at first GPU use, so the bundle never
# carries one; without it the app runs on the CPU as before. mesa-vulkan-drivers holds the Vulkan drivers of
# Intel and AMD GPUs (and lavapipe); NVIDIA's comes with its own driver package.
DEB_RECOMMENDS = ["libvulkan1", "mesa-vulkan-drivers"]


def version() -> str:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def run_pyinstaller(build: Path, dist: Path, icons: Path) -> Path:
    env = dict(os.environ, QWEN3TTS_ICONS=str(icons))
    subprocess.run(
        [sys.executable, "-m", "PyInstaller", "--noconfirm", "--clean", "--log-level", "WARN",
         "--distpath", str(dist), "--workpath", str(build / "pyinstaller"), str(ROOT / "packaging" / "qwen3tts.spec")],
        check=True, env=env, cwd=ROOT,
    )
    out = dist / APP
    if not (out / APP).exists():
        raise SystemExit(f"PyInstaller did not produce {out / APP}")
    return out


def desktop_entry() -> str:
    return "\n".join([
        "[Desktop Entry]",
        "Type=Application",
        "Name=Qwen3-TTS Studio",
        "GenericName=Voice cloning",
        "Comment=Clone a voice from a few seconds of audio and speak any text with it, offline",
        f"Exec=/usr/bin/{APP} %F",
        f"Icon={APP_ID}",
        "Terminal=false",
        "Categories=AudioVideo;Audio;",
        "Keywords=tts;speech;voice;clone;",
        f"StartupWMClass={APP}",
        "",
    ])


def make_tarball(onedir: Path, dist: Path) -> Path:
    out = dist / f"{APP}-{version()}-linux-x86_64.tar.gz"
    with tarfile.open(out, "w:gz") as tar:
        tar.add(onedir, arcname=f"{APP}-{version()}")
    return out


def make_deb(onedir: Path, dist: Path, build: Path, icons: Path) -> Path:
    root = build / "deb"
    shutil.rmtree(root, ignore_errors=True)
    opt = root / "opt" / APP
    shutil.copytree(onedir, opt, symlinks=True)
    bin_dir = root / "usr" / "bin"
    bin_dir.mkdir(parents=True)
    for name, target in ((APP, APP), ("qwen3tts", "qwen3tts")):
        launcher = bin_dir / name
        launcher.write_text(f'#!/bin/sh\nexec /opt/{APP}/{target} "$@"\n')
        launcher.chmod(0o755)
    apps = root / "usr" / "share" / "applications"
    apps.mkdir(parents=True)
    (apps / f"{APP_ID}.desktop").write_text(desktop_entry())
    for size in (48, 128, 256, 512):
        d = root / "usr" / "share" / "icons" / "hicolor" / f"{size}x{size}" / "apps"
        d.mkdir(parents=True)
        shutil.copyfile(icons / f"icon-{size}.png", d / f"{APP_ID}.png")
    scal = root / "usr" / "share" / "icons" / "hicolor" / "scalable" / "apps"
    scal.mkdir(parents=True)
    shutil.copyfile(resources_dir() / "icon.svg", scal / f"{APP_ID}.svg")
    size_kb = sum(f.stat().st_size for f in root.rglob("*") if f.is_file()) // 1024
    debian = root / "DEBIAN"
    debian.mkdir()
    (debian / "control").write_text("\n".join([
        f"Package: {APP}",
        f"Version: {version()}",
        "Section: sound",
        "Priority: optional",
        "Architecture: amd64",
        f"Installed-Size: {size_kb}",
        f"Depends: {', '.join(DEB_DEPENDS)}",
        f"Recommends: {', '.join(DEB_RECOMMENDS)}",
        "Maintainer: Qwen3-TTS Studio developers <qwen3tts-studio@users.noreply.github.com>",
        "Description: Local Qwen3-TTS voice cloning on the CPU",
        " Record or load a few seconds of a voice, type text and hear it spoken in that",
        " voice, generated locally with ncnn. Models, voices and settings live in the",
        " user's folders and are left alone on uninstall.",
        "",
    ]))
    # Refresh desktop and icon caches when the tools exist; never touch user data.
    for script in ("postinst", "postrm"):
        p = debian / script
        p.write_text(
            "#!/bin/sh\nset -e\n"
            "command -v update-desktop-database >/dev/null 2>&1 && update-desktop-database -q || true\n"
            "command -v gtk-update-icon-cache >/dev/null 2>&1 && gtk-update-icon-cache -q /usr/share/icons/hicolor || true\n"
        )
        p.chmod(0o755)
    out = dist / f"{APP}_{version()}_amd64.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "-Zxz", "--build", str(root), str(out)], check=True,
                   stdout=subprocess.DEVNULL)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-deb", action="store_true")
    ap.add_argument("--no-tar", action="store_true")
    ap.add_argument("--dist", type=Path, default=ROOT / "dist")
    ap.add_argument("--build", type=Path, default=ROOT / "build")
    args = ap.parse_args(argv)
    t0 = time.monotonic()
    icons = render(args.build / "icons")
    onedir = run_pyinstaller(args.build, args.dist, icons["png256"].parent)
    size = sum(f.stat().st_size for f in onedir.rglob("*") if f.is_file())
    print(f"bundle: {onedir} ({size / 1e6:.0f} MB) in {time.monotonic() - t0:.0f} s")
    if sys.platform.startswith("linux"):
        if not args.no_tar:
            tgz = make_tarball(onedir, args.dist)
            print(f"tarball: {tgz} ({tgz.stat().st_size / 1e6:.0f} MB)")
        if not args.no_deb and shutil.which("dpkg-deb"):
            deb = make_deb(onedir, args.dist, args.build, icons["png256"].parent)
            print(f"deb: {deb} ({deb.stat().st_size / 1e6:.0f} MB)")
    print(f"total build time {time.monotonic() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
