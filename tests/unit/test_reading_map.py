"""The reader's map (docs/design.md, Reading a family) says where each paper family lives, and is read
from the doc itself so it cannot drift: every file it lists exists, every module of a family's package
(``graphs/<family>/``) and of its own training code (``training/<family>/`` or ``training/<family>.py``)
is listed in that family's row, and *reads* is exactly what the family's strategy module imports from
``graphs/`` and ``nodes/`` (transitively), so its file count is the one a reader meets."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from coevo.strategies import STRATEGIES

ROOT = Path(__file__).resolve().parents[2]
DESIGN = ROOT / "docs" / "design.md"
HEADING = "## Reading a family"
PATH = re.compile(r"`([\w./-]+)`")


def read_map(text: str) -> list[dict[str, str]]:
    """The rows of the first markdown table after ``HEADING`` in ``text``, as {column: cell}."""
    if HEADING not in text:
        raise AssertionError(f"docs/design.md has no '{HEADING}' section: the reader's map is missing")
    lines = text.split(HEADING, 1)[1].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    table = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        table.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    header, rows = table[0], table[2:]  # table[1] is the |---| rule
    return [dict(zip(header, row)) for row in rows]


def paths(cell: str) -> list[str]:
    """The backticked paths of one cell, in order."""
    return PATH.findall(cell)


def imported_modules(start: Path, root: Path) -> set[str]:
    """``start`` and every module under ``graphs/`` or ``nodes/`` it imports, transitively (paths
    relative to ``root``; package ``__init__`` modules left out)."""
    seen: set[Path] = set()
    todo = [start]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(
                    ("coevo.graphs.", "coevo.nodes.")):
                target = root / (node.module.split(".", 1)[1].replace(".", "/") + ".py")
                if target.exists():
                    todo.append(target)
    return {str(p.relative_to(root)) for p in seen}


def problems(rows: list[dict[str, str]], root: Path) -> list[str]:
    """Every way the map ``rows`` disagrees with the tree under ``root`` (empty: it agrees)."""
    found: list[str] = []
    for row in rows:
        family, package = row["family"], paths(row["package"])[0].rstrip("/")
        name = package.rsplit("/", 1)[-1]
        reads, also, training = paths(row["reads"]), paths(row["also"]), paths(row["training"])
        for listed in reads + also + training:
            if not (root / listed).is_file():
                found.append(f"{family}: {listed} is listed but missing")
        listed = set(reads + also)
        for module in sorted((root / package).glob("*.py")):
            rel = str(module.relative_to(root))
            if module.name != "__init__.py" and rel not in listed:
                found.append(f"{family}: {rel} is not listed")
        own = [p for p in sorted((root / "training" / name).glob("*.py")) if p.name != "__init__.py"]
        own += [root / "training" / f"{name}.py"] if (root / "training" / f"{name}.py").is_file() else []
        for module in own:
            if str(module.relative_to(root)) not in training:
                found.append(f"{family}: {module.relative_to(root)} is not listed")
        if reads and (root / reads[0]).is_file():
            actual = imported_modules(root / reads[0], root)
            if actual != set(reads):
                found.append(f"{family}: {reads[0]} reads {sorted(actual)}, the map says {sorted(reads)}")
        if row["files"] != str(len(reads)):
            found.append(f"{family}: files says {row['files']}, reads lists {len(reads)}")
    return found


def test_the_map_has_a_row_per_paper_family():
    rows = read_map(DESIGN.read_text())
    packages = [paths(r["package"])[0] for r in rows]
    assert sorted(packages) == sorted(f"graphs/{f}/" for f in {s.family for s in STRATEGIES.values()})
    assert [r["family"] for r in rows] == ["VACE", "WHALE", "PACE", "Harness-S", "CoEvo-RSI", "EvoHarness-RL",
                                           "Harness-R1"]


def test_the_map_agrees_with_the_tree():
    assert problems(read_map(DESIGN.read_text()), ROOT) == []


def test_each_reads_starts_at_a_strategy_module_of_its_family():
    for row in read_map(DESIGN.read_text()):
        first = paths(row["reads"])[0]
        assert first in {f"graphs/{s.family}/{s.name}.py" for s in STRATEGIES.values()}, row["family"]
        assert first.startswith(paths(row["package"])[0]), row["family"]


def test_the_check_catches_a_missing_file_an_unlisted_module_and_a_wrong_reads(tmp_path):
    for rel, text in {"graphs/fam/fam.py": "from coevo.nodes.loop import x\n", "graphs/fam/extra.py": "",
                      "nodes/loop.py": "", "nodes/refine.py": "", "training/fam/own.py": ""}.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    good = {"family": "Fam", "package": "`graphs/fam/`", "files": "2",
            "reads": "`graphs/fam/fam.py`, `nodes/loop.py`", "also": "`graphs/fam/extra.py`",
            "training": "`training/fam/own.py`"}
    assert problems([good], tmp_path) == []
    assert problems([{**good, "also": "`graphs/fam/extra.py`, `graphs/fam/gone.py`"}], tmp_path) == [
        "Fam: graphs/fam/gone.py is listed but missing"]
    assert problems([{**good, "also": "–"}], tmp_path) == ["Fam: graphs/fam/extra.py is not listed"]
    assert problems([{**good, "training": "–"}], tmp_path) == ["Fam: training/fam/own.py is not listed"]
    wrong = problems([{**good, "files": "3", "reads": "`graphs/fam/fam.py`, `nodes/loop.py`, `nodes/refine.py`"}],
                     tmp_path)
    assert wrong == ["Fam: graphs/fam/fam.py reads ['graphs/fam/fam.py', 'nodes/loop.py'], the map says "
                     "['graphs/fam/fam.py', 'nodes/loop.py', 'nodes/refine.py']"]
    assert problems([{**good, "files": "5"}], tmp_path) == ["Fam: files says 5, reads lists 2"]


def test_a_design_without_the_map_says_so():
    with pytest.raises(AssertionError, match="Reading a family"):
        read_map("# Design\n\nno map here\n")
