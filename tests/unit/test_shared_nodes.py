"""Shared nodes know no strategy: no module of ``coevo/nodes`` names a strategy of the table or reads a
key only one paper family's state has (a family's special behaviour is its own node, in its package)."""

import ast
import importlib
import re
import typing
from pathlib import Path

from coevo.graphs.registry import STRATEGIES
from coevo.meta.search import SearchState

NODES = Path(__file__).resolve().parents[2] / "nodes"


def _code_words(path: Path) -> set[str]:
    """The identifiers and the words of the string constants of ``path``, docstrings left out (a
    docstring may cite a paper)."""
    tree = ast.parse(path.read_text())
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                  and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    words: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            words |= set(re.findall(r"\w+", node.value))
        elif isinstance(node, ast.Name):
            words.add(node.id)
        elif isinstance(node, ast.Attribute):
            words.add(node.attr)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            words.add(node.name)
        elif isinstance(node, ast.arg):
            words.add(node.arg)
    return words


def _family_keys() -> set[str]:
    """State keys that only a family's state declares (not the core or the shared search state)."""
    shared = set(typing.get_type_hints(SearchState))
    keys: set[str] = set()
    for strategy in STRATEGIES.values():
        schema = importlib.import_module(strategy.module).build().state_schema
        keys |= set(typing.get_type_hints(schema)) - shared
    return keys


def test_no_shared_node_module_mentions_a_strategy_name():
    for path in sorted(NODES.glob("*.py")):
        named = set(STRATEGIES) & _code_words(path)
        assert not named, f"{path.name} names strategies {sorted(named)}: make that behaviour the family's own node"


def test_no_shared_node_module_reads_a_family_state_key():
    family = _family_keys()
    assert {"plan", "pool", "archive_view", "phase_kind"} <= family  # the check sees the families' keys
    for path in sorted(NODES.glob("*.py")):
        used = {c.value for c in ast.walk(ast.parse(path.read_text()))
                if isinstance(c, ast.Constant) and isinstance(c.value, str)}
        assert not family & used, f"{path.name} reads family state keys {sorted(family & used)}"


def test_the_check_catches_a_node_that_branches_on_a_strategy(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text('"""Cites VACE (a docstring may)."""\n\ndef plan(state):\n    return state["strategy"] == "pace"\n')
    assert "pace" in _code_words(bad) and "VACE" not in _code_words(bad)
