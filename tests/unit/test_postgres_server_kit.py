"""The test PostgreSQL server: without one the [postgresql] tests skip with the reason, and under
``COEVO_REQUIRE_POSTGRES=1`` (what ``.ci/run`` sets) the same situation fails them instead."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]


def pytest_without_a_server(tmp_path: Path, **env: str) -> str:
    """One [postgresql] test run by pytest in a subprocess whose only PostgreSQL binaries are none."""
    environ = {**os.environ, "COEVO_PG_BIN": str(tmp_path), "OMP_NUM_THREADS": "1", **env}
    environ.pop("COEVO_TEST_POSTGRES_URL", None)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                           "tests/unit/test_archive_parity.py", "-k", "timestamp and postgresql"],
                          cwd=ROOT, env=environ, capture_output=True, text=True, timeout=300)
    return done.stdout + done.stderr


def test_without_a_server_the_postgres_tests_skip_naming_the_reason(tmp_path):
    out = pytest_without_a_server(tmp_path, COEVO_REQUIRE_POSTGRES="0")
    assert "1 skipped" in out and "PostgreSQL tests skipped: no PostgreSQL server binaries" in out, out


def test_ci_turns_that_skip_into_a_failure(tmp_path):
    out = pytest_without_a_server(tmp_path, COEVO_REQUIRE_POSTGRES="1")
    assert "1 error" in out and "PostgreSQL is required (COEVO_REQUIRE_POSTGRES=1) but could not start" in out, out
    test_line = next(line for line in (ROOT / ".ci" / "run").read_text().splitlines() if "-m pytest" in line)
    assert "COEVO_REQUIRE_POSTGRES=1 " in test_line
