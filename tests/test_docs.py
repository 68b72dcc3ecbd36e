"""The user documents: the README stays short, every link in it and in docs/ resolves, and docs/cli.md is the
command's real --help text."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tools import cli_doc

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
README_MAX_LINES = 300

_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
_CODE_BLOCK = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(markdown: str) -> set[str]:
    text = _CODE_BLOCK.sub("", markdown)
    return {_slug(m) for m in re.findall(r"^#{1,6}\s+(.+)$", text, re.MULTILINE)}


def _links(markdown: str) -> list[str]:
    return _LINK.findall(_CODE_BLOCK.sub("", markdown))


def test_slug_follows_github() -> None:
    assert _slug("From source (Linux, Python 3.11 or newer)") == "from-source-linux-python-311-or-newer"
    assert _slug("The `qwen3tts` command") == "the-qwen3tts-command"


def test_readme_is_short() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; keep it to {README_MAX_LINES}"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_links_resolve(doc: Path) -> None:
    text = doc.read_text(encoding="utf-8")
    broken = []
    for link in _links(text):
        if re.match(r"^[a-z]+:", link):  # http(s), mailto: not checked offline
            continue
        path, _, anchor = link.partition("#")
        target = (doc.parent / path).resolve() if path else doc
        if not target.exists():
            broken.append(link)
        elif anchor and target.suffix == ".md" and anchor not in _anchors(target.read_text(encoding="utf-8")):
            broken.append(link)
    assert broken == [], f"{doc.name}: links to nothing: {broken}"


def test_link_check_finds_a_broken_link(tmp_path: Path) -> None:
    """The check above must be able to fail: a missing file and a missing anchor are both caught."""
    text = "# Title\n\n[a](missing.md) [b](#nowhere) [c](#title)\n```\n[d](inside-code.md)\n```\n"
    links = _links(text)
    assert links == ["missing.md", "#nowhere", "#title"]
    assert not (tmp_path / "missing.md").exists()
    assert "nowhere" not in _anchors(text) and "title" in _anchors(text)


def test_cli_reference_matches_help() -> None:
    current = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert current == cli_doc.render(), "docs/cli.md is out of date: run python tools/cli_doc.py"


def test_cli_reference_covers_every_command() -> None:
    text = cli_doc.render()
    for command in ("convert", "synth", "batch", "decode", "speakers", "demo-model", "bench", "split",
                    "voice create", "models list", "models download", "models remove"):
        assert f"## `qwen3tts {command}`" in text


def test_readme_synopsis_names_real_commands() -> None:
    """Every `qwen3tts X` in the README is a command docs/cli.md documents."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^## `qwen3tts ([a-z -]+)`", cli_doc.render(), re.MULTILINE))
    used = set(re.findall(r"qwen3tts ((?:models|voice) [a-z]+|[a-z][a-z-]+)", readme))
    assert used - documented - {"models", "voice"} == set()


_SECTION_REF = re.compile(r"""docs/(\w+\.md)[,:]?\s*["']?([A-Z0-9][\w -]*?)["')]""")


def test_code_references_to_doc_sections_resolve() -> None:
    """A comment or --help text that names a section of a document (docs/performance.md, "Decoder") names a real
    heading, so the measurement it points at can be found."""
    headings = {doc.name: {re.sub(r"\s+", " ", h.strip().lower())
                           for h in re.findall(r"^#{1,6}\s+(.+)$", _CODE_BLOCK.sub("", doc.read_text("utf-8")),
                                               re.MULTILINE)}
                for doc in DOCS}
    missing = []
    for folder in ("engine", "qwen3tts_cli", "qwen3tts_gui", "benchmarks", "tools", "tests"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            text = re.sub(r'"\s*\n\s*"', "", path.read_text(encoding="utf-8"))  # join wrapped string literals
            for doc, section in _SECTION_REF.findall(text):
                if section.strip().lower() not in headings.get(doc, set()):
                    missing.append(f"{path.relative_to(ROOT)}: docs/{doc} {section!r}")
    assert missing == [], missing


def test_readme_speed_rows_are_todays_figures_from_performance_md() -> None:
    """Each CPU row of the README's speed table gives today's engine (no row "from an older version"), and its
    q8 / fp32 / official figures are the ones docs/performance.md reports with their commit."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    performance = (ROOT / "docs" / "performance.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Speed"):]
    rows = [line for line in section.splitlines() if line.startswith("| AMD") or line.startswith("| Intel")]
    assert {r.split("|")[1].split()[0] for r in rows} == {"AMD", "Intel"}
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert "older" not in cells[-1], f"a speed row from an older version: {row}"
        for figure in cells[1:4]:
            value = figure.split()[0]
            assert value in performance, f"{cells[0]}: {value} is not in docs/performance.md"
