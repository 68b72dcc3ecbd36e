"""The launcher's check for Qt's X11 libraries: ldd parsing, the apt-get line, coverage of the real plugin, and the
offer to run the install line (only on a terminal, only after a yes), with a fake ldd and a fake apt-get."""

from __future__ import annotations

import io
import os
import pty
import re
import shutil
import subprocess
import sys
from pathlib import Path

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


# --- the offer to run the install line (studio.sh) ------------------------------------------------------------

MISSING = ["libxcb-icccm.so.4", "libxcb-keysyms.so.1"]


class FakeApt:
    """Records the commands it is asked to run and answers with a chosen exit status."""

    def __init__(self, status: int = 0):
        self.status = status
        self.commands: list[list[str]] = []

    def __call__(self, cmd: list[str]) -> int:
        self.commands.append(cmd)
        return self.status


def _never_asked(question: str) -> bool:
    raise AssertionError(f"asked {question!r} without a terminal")


def test_no_terminal_prints_the_line_and_fails_without_running_apt(capsys) -> None:
    apt = FakeApt()
    assert qsl.offer_install(MISSING, interactive=False, have_apt=True, root=False, ask=_never_asked, run=apt) == 1
    assert apt.commands == []
    err = capsys.readouterr().err
    assert "libxcb-icccm.so.4" in err
    assert "sudo apt-get install " + " ".join(qsl.APT_PACKAGES) in err


def test_a_no_runs_nothing() -> None:
    apt = FakeApt()
    asked = []
    status = qsl.offer_install(MISSING, interactive=True, have_apt=True, root=False,
                               ask=lambda q: asked.append(q) or False, run=apt)
    assert (status, apt.commands, len(asked)) == (1, [], 1)


def test_a_yes_runs_the_install_line_and_starts_when_the_libraries_are_there() -> None:
    apt = FakeApt()
    status = qsl.offer_install(MISSING, interactive=True, have_apt=True, root=False, ask=lambda q: True, run=apt,
                               recheck=lambda: [])
    assert status == 0
    assert apt.commands == [["sudo", "apt-get", "install", *qsl.APT_PACKAGES]]


def test_root_runs_apt_without_sudo() -> None:
    apt = FakeApt()
    qsl.offer_install(MISSING, interactive=True, have_apt=True, root=True, ask=lambda q: True, run=apt)
    assert apt.commands == [["apt-get", "install", *qsl.APT_PACKAGES]]


def test_a_failed_apt_stops_the_launcher(capsys) -> None:
    rechecked = []
    status = qsl.offer_install(MISSING, interactive=True, have_apt=True, root=False, ask=lambda q: True,
                               run=FakeApt(status=100), recheck=lambda: rechecked.append(1) or [])
    assert status == 1 and rechecked == []
    assert "exit status 100" in capsys.readouterr().err


def test_libraries_still_missing_after_apt_stop_the_launcher(capsys) -> None:
    status = qsl.offer_install(MISSING, interactive=True, have_apt=True, root=False, ask=lambda q: True,
                               run=FakeApt(), recheck=lambda: ["libfoo-unknown.so.3"])
    assert status == 1
    assert "libfoo-unknown.so.3" in capsys.readouterr().err.splitlines()[-2]


def test_without_apt_get_nothing_is_offered() -> None:
    apt = FakeApt()
    assert qsl.offer_install(MISSING, interactive=True, have_apt=False, root=False, ask=_never_asked, run=apt) == 1
    assert apt.commands == []


@pytest.mark.parametrize(("typed", "yes"), [
    ("y\n", True), ("Y\n", True), ("yes\n", True), (" y \n", True),
    ("\n", False), ("", False), ("n\n", False), ("no\n", False), ("sure\n", False), ("yy\n", False),
])
def test_only_an_explicit_yes_is_a_yes(monkeypatch: pytest.MonkeyPatch, typed: str, yes: bool) -> None:
    monkeypatch.setattr(qsl.sys, "stdin", io.StringIO(typed))
    assert qsl.ask_yes_no("Run it now?") is yes


def test_readme_install_line_is_the_launchers() -> None:
    """The README's one apt-get line names every package the launcher checks for (and python3-venv)."""
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    joined = readme.replace("\\\n", " ")
    lines = [ln.split() for ln in joined.splitlines() if ln.startswith("sudo apt-get install python3-venv")]
    assert len(lines) == 1, "the README should show the install line once"
    assert lines[0][3:] == qsl.APT_PACKAGES


# --- the whole check as studio.sh runs it, with a fake ldd and a fake apt-get on PATH -------------------------

FAKE_LDD = """#!/bin/sh
if [ -e "$STATE/installed" ]; then echo "	libxcb.so.1 => /lib/libxcb.so.1 (0x1)"; exit 0; fi
echo "	libxcb-icccm.so.4 => not found"
echo "	libxcb-keysyms.so.1 => not found"
"""
FAKE_APT = """#!/bin/sh
echo "$0 $*" >> "$STATE/apt-calls"
touch "$STATE/installed"
"""
FAKE_SUDO = """#!/bin/sh
exec "$@"
"""


@pytest.fixture
def fake_system(tmp_path: Path) -> dict[str, str]:
    if qsl.xcb_plugin() is None:
        pytest.skip("no PySide6 xcb plugin here")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("ldd", FAKE_LDD), ("apt-get", FAKE_APT), ("sudo", FAKE_SUDO)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    root = Path(__file__).resolve().parent.parent
    return dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", STATE=str(tmp_path), QT_QPA_PLATFORM="xcb",
                PYTHONPATH=os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])))


def _launcher_check(env: dict[str, str], typed: str | None) -> tuple[int, str]:
    """Run `python -m qwen3tts_gui.qt_system_libs`; typed=None: no terminal, else a pseudo-terminal fed `typed`."""
    cmd = [sys.executable, "-m", "qwen3tts_gui.qt_system_libs"]
    if typed is None:
        res = subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
        return res.returncode, res.stderr
    master, slave = pty.openpty()
    proc = subprocess.Popen(cmd, env=env, stdin=slave, stdout=slave, stderr=slave)
    os.close(slave)
    out = b""
    while b"[y/N]" not in out:
        chunk = os.read(master, 4096)
        assert chunk, out.decode()
        out += chunk
    os.write(master, typed.encode())
    status = proc.wait(timeout=60)
    try:
        while chunk := os.read(master, 4096):
            out += chunk
    except OSError:  # the pty closes with the process
        pass
    os.close(master)
    return status, out.decode(errors="replace")


def test_launcher_without_terminal_exits_1_and_leaves_apt_alone(fake_system, tmp_path: Path) -> None:
    status, err = _launcher_check(fake_system, typed=None)
    assert status == 1
    assert "libxcb-icccm.so.4" in err and "apt-get install python3-venv" in err
    assert not (tmp_path / "apt-calls").exists()


def test_launcher_on_terminal_answered_no_leaves_apt_alone(fake_system, tmp_path: Path) -> None:
    status, out = _launcher_check(fake_system, typed="n\n")
    assert status == 1 and "[y/N]" in out
    assert not (tmp_path / "apt-calls").exists()


def test_launcher_on_terminal_answered_yes_runs_apt_and_goes_on(fake_system, tmp_path: Path) -> None:
    status, out = _launcher_check(fake_system, typed="y\n")
    assert status == 0, out
    calls = (tmp_path / "apt-calls").read_text().split()
    assert calls[1:3] == ["install", "python3-venv"] and calls[3:] == qsl.DEB_PACKAGES
    assert os.path.basename(calls[0]) == "apt-get"
