"""The persisted domain models stay low and single: ``coevo.records`` imports only pydantic and the layers
below it, the meta state, the roles and the nodes use those classes themselves (no copy), and nothing
that records through the run's context imports the archive."""

import ast
from pathlib import Path

import pytest

from coevo import records
from coevo.meta import inheritance, pool, state

ROOT = Path(__file__).resolve().parents[2]
LOW = ("coevo.records", "coevo.models", "coevo.envs", "coevo.timestamps", "pydantic", "typing", "__future__",
       "uuid", "datetime")


def imports(path: Path) -> set[str]:
    """The modules ``path`` imports (absolute names; top level or inside functions)."""
    tree = ast.parse(path.read_text())
    found = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    return found | {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}


@pytest.mark.parametrize("path", sorted((ROOT / "records").glob("*.py")), ids=lambda p: p.name)
def test_records_import_only_pydantic_and_the_layers_below(path):
    assert {m for m in imports(path) if not m.startswith(LOW)} == set()


@pytest.mark.parametrize("package", ["nodes", "roles", "graphs"])
def test_nodes_roles_and_graphs_never_import_the_archive(package):
    offenders = [p.name for p in (ROOT / package).rglob("*.py") if any(m.startswith("coevo.storage")
                                                                      for m in imports(p))]
    assert offenders == [], f"{package} records through MetaContext.record / reads through ctx.archive"


def test_the_meta_state_carries_the_persisted_classes_themselves():
    assert state.GateDecision is records.GateDecision and state.Phase is records.Phase
    assert pool.PoolMember is records.PoolMember and pool.Profile is records.Profile and pool.Ballot is records.Ballot
    assert inheritance.Promotion is records.Promotion and inheritance.BaseChoice is records.BaseChoice
    assert {records.GateDecision, records.Phase, records.Promotion, records.Profile} <= set(state.STATE_MODELS)
