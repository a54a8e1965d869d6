"""Longest test files first: the order in which README command 2 hands files to its workers.

``pytest -n auto --dist loadfile`` gives each worker whole files (a file's module fixtures, such as a loaded
model or a started server, are built once). By default pytest-xdist hands them out by number of tests, most
first, which put the slow integration files (a few tests each) last: on the 2-core box one worker could
finish a 90-second file while the other sat idle. ``tests/conftest.py`` turns that reordering off and puts
the files in the order of their measured seconds, longest first (the longest-processing-time-first rule of
list scheduling: R. L. Graham, "Bounds on Multiprocessing Timing Anomalies", SIAM J. Appl. Math. 17(2),
1969), so the last files handed out are the short ones.

The seconds are ``tests/durations.json`` (test file -> seconds of setup, call and teardown summed over its
tests, from a full run on the 2-core box). Refresh it after adding a slow file::

    PYTEST_ADDOPTS="--junitxml=/tmp/junit.xml" .venv/bin/python -m pytest -q -n auto --dist loadfile
    .venv/bin/python tests/order_kit.py /tmp/junit.xml

A file the table does not list goes after the listed ones, in collection order: nothing fails when it is stale.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

DURATIONS = Path(__file__).with_name("durations.json")
ROOT = Path(__file__).resolve().parent.parent

T = TypeVar("T")


def file_of(nodeid: str) -> str:
    """The test file of a pytest node id (``tests/unit/test_x.py::test_y[p]`` -> ``tests/unit/test_x.py``)."""
    return nodeid.split("::", 1)[0]


def load_durations(path: Path = DURATIONS) -> dict[str, float]:
    """The committed table (file -> seconds); empty when the file is missing or does not parse, so the
    collection order is then kept."""
    try:
        table = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): float(v) for k, v in table.items()} if isinstance(table, dict) else {}


def longest_first(items: Sequence[T], seconds: dict[str, float], nodeid: Callable[[T], str]) -> list[T]:
    """``items`` grouped by test file, the files in descending ``seconds``, then the files the table does not
    list in their collection order; within a file the collection order is kept. Stable: two files with the
    same seconds keep their collection order."""
    files: dict[str, list[T]] = {}
    for item in items:
        files.setdefault(file_of(nodeid(item)), []).append(item)
    known = sorted((f for f in files if f in seconds), key=lambda f: -seconds[f])
    unknown = [f for f in files if f not in seconds]
    return [item for f in known + unknown for item in files[f]]


def durations_from_junit(xml_path: Path, root: Path = ROOT) -> dict[str, float]:
    """Seconds per test file from a pytest JUnit XML report (each testcase's ``time`` is its setup, call and
    teardown), rounded to 0.1 s, longest first. A testcase's ``classname`` (``tests.unit.test_x`` or
    ``tests.unit.test_x.TestClass``) is mapped to the file that exists under ``root``."""
    totals: dict[str, float] = {}
    for case in ET.parse(xml_path).iter("testcase"):
        parts = case.get("classname", "").split(".")
        for end in range(len(parts), 0, -1):
            candidate = "/".join(parts[:end]) + ".py"
            if (root / candidate).is_file():
                totals[candidate] = totals.get(candidate, 0.0) + float(case.get("time") or 0.0)
                break
    return {f: round(s, 1) for f, s in sorted(totals.items(), key=lambda kv: -kv[1])}


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python tests/order_kit.py JUNIT.xml  (writes tests/durations.json)")
    table = durations_from_junit(Path(sys.argv[1]))
    DURATIONS.write_text(json.dumps(table, indent=1) + "\n")
    print(f"{len(table)} files, {sum(table.values()):.0f} s in all, written to {DURATIONS}")
