"""The system libraries Qt's X11 (xcb) platform plugin needs, and a check that names the missing ones.

Qt's own error names libxcb-cursor0 whatever is missing, so the launcher (studio.sh) runs this first:
    python -m qwen3tts_gui.qt_system_libs
When something is missing it names the libraries and their packages, then, on a terminal with apt-get, offers to
run the one install line (APT_PACKAGES, the README's) and asks y/N; without a terminal, or on "no", it prints that line
and exits 1. The .deb declares the same packages (packaging/build.py imports DEB_PACKAGES).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

# Shared objects the xcb plugin (and libQt6XcbQpa behind it) links against -> the Debian/Ubuntu package.
SONAME_PACKAGES = {
    "libxcb-cursor.so.0": "libxcb-cursor0",
    "libxcb-icccm.so.4": "libxcb-icccm4",
    "libxcb-keysyms.so.1": "libxcb-keysyms1",
    "libxcb-image.so.0": "libxcb-image0",
    "libxcb-randr.so.0": "libxcb-randr0",
    "libxcb-render-util.so.0": "libxcb-render-util0",
    "libxcb-render.so.0": "libxcb-render0",
    "libxcb-shape.so.0": "libxcb-shape0",
    "libxcb-xfixes.so.0": "libxcb-xfixes0",
    "libxcb-xkb.so.1": "libxcb-xkb1",
    "libxcb-sync.so.1": "libxcb-sync1",
    "libxcb-shm.so.0": "libxcb-shm0",
    "libxcb-util.so.1": "libxcb-util1",
    "libxcb.so.1": "libxcb1",
    "libX11-xcb.so.1": "libx11-xcb1",
    "libX11.so.6": "libx11-6",
    "libxkbcommon.so.0": "libxkbcommon0",
    "libxkbcommon-x11.so.0": "libxkbcommon-x11-0",
    "libEGL.so.1": "libegl1",
    "libGL.so.1": "libgl1",
    "libfontconfig.so.1": "libfontconfig1",
    "libfreetype.so.6": "libfreetype6",
    "libdbus-1.so.3": "libdbus-1-3",
    "libglib-2.0.so.0": "libglib2.0-0",
    "libgthread-2.0.so.0": "libglib2.0-0",
}
# Loaded at run time without a link-time dependency, so ldd cannot see them: a font, and PortAudio for sound.
RUNTIME_PACKAGES = ["fonts-dejavu-core", "libportaudio2"]
# What the .deb declares: every package above once, in a stable order.
DEB_PACKAGES = sorted(set(SONAME_PACKAGES.values()) | set(RUNTIME_PACKAGES))
# The one install line for a source checkout (the README shows it): venv for studio.sh, then the above.
APT_PACKAGES = ["python3-venv", *DEB_PACKAGES]

_NOT_FOUND = re.compile(r"^\s*(\S+)\s*=>\s*not found", re.MULTILINE)


def xcb_plugin() -> Path | None:
    """The xcb platform plugin of the installed PySide6, or None when there is none (not Linux)."""
    try:
        import PySide6
    except ImportError:
        return None
    plugin = Path(PySide6.__file__).parent / "Qt" / "plugins" / "platforms" / "libqxcb.so"
    return plugin if plugin.is_file() else None


def missing_libraries(plugin: Path) -> list[str]:
    """Sonames ldd cannot resolve for the plugin (ldd follows the whole dependency tree)."""
    out = subprocess.run(["ldd", str(plugin)], capture_output=True, text=True, check=False).stdout
    return sorted(set(_NOT_FOUND.findall(out)))


def install_hint(missing: list[str]) -> str:
    packages = sorted({SONAME_PACKAGES[m] for m in missing if m in SONAME_PACKAGES})
    unknown = [m for m in missing if m not in SONAME_PACKAGES]
    lines = [f"Qt cannot open a window: the system is missing {', '.join(missing)}."]
    if packages:
        lines.append(f"Install them with: sudo apt-get install {' '.join(packages)}")
    if unknown:
        lines.append(f"Find the package that provides {', '.join(unknown)} with your distribution's package search.")
    return "\n".join(lines)


def uses_xcb(environ: dict[str, str]) -> bool:
    """Whether Qt will pick the X11 plugin: it is named, or nothing is named and no Wayland session runs."""
    platform = environ.get("QT_QPA_PLATFORM", "")
    if platform:
        return platform.split(":")[0].split(";")[0] == "xcb"
    return not environ.get("WAYLAND_DISPLAY")


def apt_command(root: bool) -> list[str]:
    """The install line as a command: apt-get itself asks before it installs; sudo only when not root."""
    return [*([] if root else ["sudo"]), "apt-get", "install", *APT_PACKAGES]


def ask_yes_no(question: str) -> bool:
    """y/N on the terminal: only an explicit yes is a yes (Enter, EOF and anything else are no)."""
    print(f"{question} [y/N] ", end="", file=sys.stderr, flush=True)
    answer = sys.stdin.readline().strip().lower()
    return answer in ("y", "yes")


def offer_install(
    missing: list[str],
    *,
    interactive: bool,
    have_apt: bool,
    root: bool,
    ask: Callable[[str], bool] = ask_yes_no,
    run: Callable[[list[str]], int] = lambda cmd: subprocess.call(cmd),
    recheck: Callable[[], list[str]] = lambda: [],
) -> int:
    """Name what is missing; on a terminal with apt-get, offer the install line and run it only on a yes.

    Returns the launcher's exit status: 0 when the libraries are there afterwards, else 1.
    """
    print(install_hint(missing), file=sys.stderr)
    if not have_apt:
        return 1
    command = apt_command(root)
    print(f"Everything the app needs is installed with:\n  {' '.join(command)}", file=sys.stderr)
    if not interactive or not ask("Run it now?"):
        return 1
    status = run(command)
    if status != 0:
        print(f"apt-get stopped with exit status {status}; nothing else was changed.", file=sys.stderr)
        return 1
    still = recheck()
    if still:
        print(install_hint(still), file=sys.stderr)
        return 1
    return 0


def main() -> int:
    if not sys.platform.startswith("linux") or not uses_xcb(dict(os.environ)) or not shutil.which("ldd"):
        return 0
    plugin = xcb_plugin()
    if plugin is None:
        return 0
    missing = missing_libraries(plugin)
    if not missing:
        return 0
    return offer_install(
        missing,
        interactive=sys.stdin.isatty() and sys.stderr.isatty(),
        have_apt=shutil.which("apt-get") is not None,
        root=os.geteuid() == 0,
        recheck=lambda: missing_libraries(plugin),
    )


if __name__ == "__main__":
    raise SystemExit(main())
