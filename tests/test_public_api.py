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
             *sorted((root / "qwen3tts_server").glob("*.py")), *sorted((root / "benchmarks").glob("*.py"))]
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


def test_the_cli_and_the_server_import_only_the_engines_public_names():
    """qwen3tts_cli/ and qwen3tts_server/ are clients of the engine like the GUI: they take the names `engine`
    exports (and the `engine.store` package's), never a module inside the engine; the engine never imports the
    CLI, the GUI or the server."""
    import ast
    from pathlib import Path

    root = Path(engine.__file__).resolve().parents[1]
    wrong = []
    for path in [*sorted((root / "qwen3tts_cli").glob("*.py")), *sorted((root / "qwen3tts_server").glob("*.py"))]:
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
        assert all(f"qwen3tts_{part}" not in text for part in ("cli", "gui", "server")), \
            f"{path.relative_to(root)} imports upward"


# Benchmarks that time or check one network or one converter variant on its own: the engine's public API has no
# door to a single network (the Synthesizer runs them together), so these load them from their modules, as the unit
# tests do. They may import public names from engine subpackages; every other benchmark takes only `engine`'s names.
COMPONENT_BENCHMARKS = {
    "batch_speed.py": "the frame loop's side-by-side primitive (synthesize_many) with EOS ignored, no runaway guard",
    "speak_many_cost.py": "speak_many against the side-by-side primitive under it (synthesize_many)",
    "code_predictor_profile.py": "the code predictor's layers one by one",
    "codec_decoder_speed.py": "the speech decoder alone, whole and streaming, against the official one",
    "codec_encoder_speed.py": "the speech encoder alone against the official one",
    "gpu_round_trips.py": "ncnn attention layers alone, shaped by a bundle's typed manifest parts",
    "precision_speed.py": "talker and code predictor steps of several bundles, call by call",
    "q8_error_sources.py": "each network's 8-bit error apart, the talker of one bundle with the other's code predictor",
    "q8_accuracy.py": "converter variants (8-bit with and without smoothing, block format) of the talker",
    "speaker_speed.py": "the speaker encoder alone, converted from a random checkpoint",
    "talker_fullsize_parity.py": "the talker and code predictor teacher-forced against the official ones",
    "talker_speed.py": "talker and code predictor per precision, converted talker-only",
}
# run in the reference environment against torch / transformers objects, whose private fields they set
OFFICIAL_SIDE = {"codec_encoder_official.py"}


def _private_reaches(tree, allowed_owners: set[str]) -> list[str]:
    """`x._name` where x is not self/cls: another object's private member (dunders are not private)."""
    import ast

    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                and not (isinstance(node.value, ast.Name) and node.value.id in allowed_owners)):
            found.append(f"line {node.lineno}: .{node.attr}")
    return found


def test_the_benchmarks_use_only_public_interfaces():
    """A benchmark that reaches into a private member breaks silently when the code behind it is reshaped (the GUI
    benchmark waited on a MainWindow attribute that had gone): benchmarks take the engine's public names, the app's
    public methods and signals, and never another object's `_private` member or a `_private` import."""
    import ast
    from pathlib import Path

    root = Path(engine.__file__).resolve().parents[1]
    scripts = sorted((root / "benchmarks").glob("*.py"))
    assert set(COMPONENT_BENCHMARKS) <= {p.name for p in scripts}, "a listed component benchmark is gone"
    wrong = []
    for path in scripts:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                top = node.module.split(".")[0]
                names = [a.name for a in node.names]
                if node.module == "engine":
                    wrong += [f"{path.name}: from engine import {n} (not in engine.__all__)"
                              for n in names if n not in engine.__all__]
                elif top == "engine" and node.module != "engine.store" and path.name not in COMPONENT_BENCHMARKS:
                    wrong.append(f"{path.name}: from {node.module} (an end-to-end benchmark: engine's names only)")
                if top in ("engine", "qwen3tts_gui", "qwen3tts_cli"):
                    wrong += [f"{path.name}: from {node.module} import {n} (private)" for n in names
                              if n.startswith("_")]
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("engine.") and path.name not in COMPONENT_BENCHMARKS:
                        wrong.append(f"{path.name}: import {alias.name} (an end-to-end benchmark: engine's names only)")
        if path.name not in OFFICIAL_SIDE:
            wrong += [f"{path.name}: {r}" for r in _private_reaches(tree, {"self", "cls"})]
    assert not wrong, "benchmarks reach past the public interfaces:\n" + "\n".join(wrong)
