"""The import layering of docs/architecture.md, held against the code: every import inside engine/ points to a
lower floor of the table there (a room on floor N imports only rooms on floors below N; none on its own floor but
itself), and the front ends stack as drawn (the server imports neither the command line nor the app). The table
in the doc is what is checked, so the doc and the code cannot drift apart: moving a room means moving its row."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENGINE = ROOT / "engine"


def floors() -> dict[str, int]:
    """{"synthesis/": 6, "types.py": 4, ...} from the floor table in docs/architecture.md."""
    doc = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    found: dict[str, int] = {}
    for number, rooms in re.findall(r"^\s*\|\s+(\d)\s+(.*?)\s*\|\s*$", doc, re.M):
        for room in rooms.split():
            assert room not in found, f"{room} stands on two floors of docs/architecture.md"
            found[room] = int(number)
    return found


def room_of(module: str) -> str:
    """engine.synthesis.jobs -> "synthesis/", engine.types -> "types.py", engine -> "__init__.py"."""
    parts = module.split(".")
    if len(parts) == 1:
        return "__init__.py"
    return parts[1] + "/" if (ENGINE / parts[1]).is_dir() else parts[1] + ".py"


def engine_imports(path: Path) -> set[str]:
    """The engine modules `path` imports (relative or absolute, at the top or inside a function)."""
    rel = path.with_suffix("").relative_to(ROOT).parts
    package = ".".join(rel[:-1]) if path.name != "__init__.py" else ".".join(rel[:-1])
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
            if node.module:
                out.add(".".join([*base, node.module]))
            else:
                out.update(".".join([*base, a.name]) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "engine":
            out.add(node.module or "engine")
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.split(".")[0] == "engine")
    return out


def test_every_engine_room_has_a_floor():
    table = floors()
    rooms = {p.name + "/" for p in ENGINE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    rooms |= {p.name for p in ENGINE.glob("*.py") if p.name != "__init__.py"}
    assert not rooms - set(table), f"engine rooms missing from the floor table of docs/architecture.md: {rooms - set(table)}"
    assert not set(table) - rooms, f"the floor table names rooms that are gone: {set(table) - rooms}"


def against_the_floors(mine: str, modules: set[str], table: dict[str, int]) -> list[str]:
    """The modules a file in room `mine` may not import: any on its floor or above (its own room aside)."""
    return [m for m in sorted(modules) if room_of(m) != mine
            and (room_of(m) == "__init__.py" or table[room_of(m)] >= table[mine])]


def test_engine_imports_point_down_the_floors():
    table = floors()
    wrong = []
    for path in sorted(ENGINE.rglob("*.py")):
        mine = room_of(".".join(path.with_suffix("").relative_to(ROOT).parts))
        if mine == "__init__.py":
            continue  # the public API sits above every floor
        wrong += [f"{path.relative_to(ROOT)} (floor {table[mine]}) imports {m}"
                  for m in against_the_floors(mine, engine_imports(path), table)]
    assert not wrong, "imports running up or across the floors of docs/architecture.md:\n" + "\n".join(wrong)


def test_the_server_imports_neither_the_command_line_nor_the_app():
    wrong = [f"{path.relative_to(ROOT)}: {module}" for path in sorted((ROOT / "qwen3tts_server").rglob("*.py"))
             for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
             for module in ([node.module or ""] if isinstance(node, ast.ImportFrom) else
                            [a.name for a in node.names] if isinstance(node, ast.Import) else [])
             if module.split(".")[0] in ("qwen3tts_cli", "qwen3tts_gui")]
    assert not wrong, f"the speech server reaches up into a front end: {wrong}"


def test_an_arrow_up_or_across_is_caught():
    """The check can fail: io/ importing synthesis/ runs up, convert/ importing longform/ runs across a floor."""
    table = floors()
    assert against_the_floors("io/", {"engine.synthesis.synthesizer"}, table) == ["engine.synthesis.synthesizer"]
    assert against_the_floors("convert/", {"engine.longform.runner"}, table) == ["engine.longform.runner"]
    assert against_the_floors("voice.py", {"engine"}, table) == ["engine"]
    assert against_the_floors("synthesis/", {"engine.longform.runner", "engine.synthesis.jobs"}, table) == []
