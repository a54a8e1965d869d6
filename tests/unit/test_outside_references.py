"""The package speaks of itself alone: no file a user gets points at a path outside the repository (the
developers' working notes, the papers' text files) or at an issue number of the project's tracker.

Package code is every file in the repository outside ``tests/`` and ``benchmarks/``: the modules, their
configs and harnesses, the scripts, the README and the docs. A reference to the design reads
``docs/design.md``; a paper is cited by title, arXiv id, section and equation (``docs/papers.md``); an issue
becomes the reason itself.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXCLUDED = ("tests/", "benchmarks/")
TEXT_SUFFIXES = {".py", ".toml", ".json", ".md", ".yml", ".yaml", ".txt", ".cfg", ".ini", ".sh", ".mako", ".css",
                 ".html", ".j2", ""}

FORBIDDEN = {
    # the developers' working notes and the papers' copies live beside the repository, not in it
    "a path outside the repository": re.compile(
        r"DESIGN\.md|STYLE\.md|(?<![\w./-])shared/|\.\./shared|/work/"
        r"|\b(?:coevo_rsi|harness_s|whale|vace_and_related_abstracts|harness_learning_abstracts)\.txt"),
    # "issue 23", "Issue 25, table 1", "issues 13 and 14", "issue\n# 26", "issue #7" (a URL .../issues/N is fine)
    "an issue number": re.compile(r"\bissues?(?:[\s#*\"'`]|\band\b)*\d+", re.IGNORECASE),
}


def package_files() -> list[Path]:
    """The files a user of the repository gets, tracked by git (or, outside a checkout, found on disk)."""
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, text=True).stdout
        names = [n for n in out.split("\0") if n]
    except (OSError, subprocess.CalledProcessError):
        skip = {".git", ".venv", "site", "coevo_runs", "__pycache__", "node_modules"}
        names = [str(p.relative_to(ROOT)) for p in ROOT.rglob("*")
                 if p.is_file() and not skip & set(p.relative_to(ROOT).parts)]
    files = []
    for name in names:
        if name.startswith(EXCLUDED):
            continue
        path = ROOT / name
        if path.suffix in TEXT_SUFFIXES and path.is_file():
            files.append(path)
    return files


def offending_lines(text: str, pattern: re.Pattern[str]) -> list[str]:
    """Each match with its line number, the match itself and the line it starts on."""
    found = []
    for m in pattern.finditer(text):
        line_no = text.count("\n", 0, m.start()) + 1
        found.append(f"{line_no}: {m.group(0)!r}")
    return found


def test_the_scan_covers_the_package():
    names = {str(p.relative_to(ROOT)) for p in package_files()}
    for expected in ("strategies.py", "harnesses/spec.py", "configs/default.toml", "README.md", "docs/design.md"):
        assert expected in names
    assert not any(n.startswith(EXCLUDED) for n in names)


@pytest.mark.parametrize("what", sorted(FORBIDDEN))
def test_package_code_names_no_outside_path_and_no_issue_number(what):
    pattern = FORBIDDEN[what]
    offences = []
    for path in package_files():
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        offences += [f"{path.relative_to(ROOT)}:{hit}" for hit in offending_lines(text, pattern)]
    assert not offences, (f"package code names {what}; cite docs/design.md or docs/papers.md, or say the reason "
                          f"itself:\n" + "\n".join(offences))


@pytest.mark.parametrize("text", ["see DESIGN.md, Storage", "``shared/papers/whale.txt`` §4", "../shared/x",
                                  "(``coevo_rsi.txt``, Figure 3)", "(issue 23, item 2)", "# Issue 25, table 1",
                                  "issues 13 and 14", "(issue\n    26, item 4)", "langgraph issue #7990"])
def test_the_patterns_catch_each_form(text):
    assert any(p.search(text) for p in FORBIDDEN.values())


@pytest.mark.parametrize("text", ["docs/design.md, Storage", "arXiv:2609.00196, §4", "an issue with the seed",
                                  "https://github.com/langchain-ai/langgraph/issues/7990", "shared_prefix/x",
                                  "coevo.records.shared"])
def test_the_patterns_let_the_docs_references_through(text):
    assert not any(p.search(text) for p in FORBIDDEN.values())
