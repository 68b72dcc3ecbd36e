"""engine/__init__.py: every exported name exists and its docstring lists it (the list is the public API)."""

import re

import engine


def test_every_export_exists_and_is_documented():
    missing = [name for name in engine.__all__ if not hasattr(engine, name)]
    assert not missing, f"exported but not defined: {missing}"
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", engine.__doc__))
    undocumented = [name for name in engine.__all__ if name not in words]
    assert not undocumented, f"exported but not in the engine/__init__.py docstring: {undocumented}"
    assert len(set(engine.__all__)) == len(engine.__all__)


def test_the_cli_the_gui_and_the_benchmarks_use_only_public_synthesizer_members():
    """CLI subcommands may import engine modules lazily, but never the Synthesizer's private members (`_plan`,
    `_talker`, `_bundle`...): whatever they need has a public property (engine/synthesizer.py CONTRACT)."""
    from pathlib import Path

    root = Path(engine.__file__).resolve().parents[1]
    files = [root / "engine" / "cli.py", *sorted((root / "qwen3tts_gui").rglob("*.py")),
             *sorted((root / "benchmarks").glob("*.py"))]
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"\bs(ynth\w*)?\._[a-z]", text), \
            f"{path.relative_to(root)} reaches into the Synthesizer's private members"


def test_the_installer_bundles_the_modules_the_engine_loads_on_first_use():
    """PyInstaller cannot see engine/__init__.py's lazy imports: the spec must name each module (a frozen app
    without engine.demo failed its self-test)."""
    from pathlib import Path

    spec = (Path(engine.__file__).resolve().parents[1] / "packaging" / "qwen3tts.spec").read_text(encoding="utf-8")
    missing = sorted({mod for mod in engine._LAZY.values() if f'"engine.{mod}"' not in spec})
    assert not missing, f"add to the spec's hiddenimports: {missing}"
