"""The launcher's check for Qt's X11 libraries: ldd parsing, the apt-get line, and coverage of the real plugin."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from qwen3tts_gui import qt_system_libs as qsl

LDD_OUTPUT = """\
\tlinux-vdso.so.1 (0x00007ffd)
\tlibxcb-cursor.so.0 => /lib/x86_64-linux-gnu/libxcb-cursor.so.0 (0x00007f)
\tlibxcb-icccm.so.4 => not found
\tlibxcb-keysyms.so.1 => not found
\tlibfoo-unknown.so.3 => not found
\tlibxcb-icccm.so.4 => not found
"""


def test_missing_libraries_parses_ldd(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setattr(qsl.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 0, LDD_OUTPUT, ""))
    assert qsl.missing_libraries(tmp_path / "libqxcb.so") == [
        "libfoo-unknown.so.3", "libxcb-icccm.so.4", "libxcb-keysyms.so.1"]


def test_install_hint_names_packages_and_unknowns() -> None:
    hint = qsl.install_hint(["libfoo-unknown.so.3", "libxcb-icccm.so.4", "libxcb-keysyms.so.1"])
    lines = hint.splitlines()
    assert lines[0] == ("Qt cannot open a window: the system is missing libfoo-unknown.so.3, libxcb-icccm.so.4, "
                        "libxcb-keysyms.so.1.")
    assert lines[1] == "Install them with: sudo apt-get install libxcb-icccm4 libxcb-keysyms1"
    assert "libfoo-unknown.so.3" in lines[2]


@pytest.mark.parametrize(("env", "expected"), [
    ({}, True),
    ({"QT_QPA_PLATFORM": "xcb"}, True),
    ({"QT_QPA_PLATFORM": "offscreen"}, False),
    ({"WAYLAND_DISPLAY": "wayland-0"}, False),
    ({"WAYLAND_DISPLAY": "wayland-0", "QT_QPA_PLATFORM": "xcb"}, True),
])
def test_uses_xcb(env: dict, expected: bool) -> None:
    assert qsl.uses_xcb(env) is expected


def test_every_library_of_the_real_plugin_has_a_package() -> None:
    """A PySide6 upgrade that links a new system library must extend the table (and so the .deb)."""
    plugin = qsl.xcb_plugin()
    if plugin is None or not shutil.which("ldd"):
        pytest.skip("no xcb plugin or no ldd on this system")
    out = subprocess.run(["ldd", str(plugin)], capture_output=True, text=True, check=True).stdout
    names = set(re.findall(r"^\s*(\S+)\s*=>", out, re.MULTILINE))
    # PySide6's own Qt libraries and the C/C++ runtime come with the wheel or every system
    base = re.compile(r"^(libQt6|libpyside|libshiboken|libc\.|libm\.|libdl\.|libpthread\.|librt\.|libstdc\+\+|"
                      r"libgcc_s|ld-linux|libz\.|libzstd|libpcre|libexpat|libpng|libbrotli|libbsd|libmd\.|"
                      r"libsystemd|libcap|libgcrypt|libgpg-error|liblzma|liblz4|libXau|libXdmcp|libGLdispatch|"
                      r"libGLX|libicu)")
    system = {n for n in names if not base.match(n)}
    assert system - set(qsl.SONAME_PACKAGES) == set()
    assert set(qsl.SONAME_PACKAGES.values()) <= set(qsl.DEB_PACKAGES)
