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
    `_talker`, `_bundle`...): whatever they need has a public property (engine/synthesis/synthesizer.py CONTRACT)."""
    from pathlib import Path

    root = Path(engine.__file__).resolve().parents[1]
    files = [*sorted((root / "qwen3tts_cli").glob("*.py")), *sorted((root / "qwen3tts_gui").rglob("*.py")),
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


def test_the_cli_imports_only_the_engines_public_names():
    """qwen3tts_cli/ is a client of the engine like the GUI: it takes the names `engine` exports (and the
    `engine.store` package's), never a module inside the engine; the engine never imports the CLI or the GUI."""
    import ast
    from pathlib import Path

    root = Path(engine.__file__).resolve().parents[1]
    wrong = []
    for path in sorted((root / "qwen3tts_cli").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("engine"):
                if node.module == "engine":
                    wrong += [f"{path.name}: {a.name}" for a in node.names if a.name not in engine.__all__]
                elif node.module != "engine.store":
                    wrong.append(f"{path.name}: from {node.module}")
            elif isinstance(node, ast.Import):
                wrong += [f"{path.name}: import {a.name}" for a in node.names if a.name.startswith("engine")]
    assert not wrong, f"the CLI reaches past the engine's public API: {wrong}"
    for path in sorted((root / "engine").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        assert "qwen3tts_cli" not in text and "qwen3tts_gui" not in text, f"{path.relative_to(root)} imports upward"
