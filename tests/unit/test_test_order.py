"""The order README command 2 hands test files to its workers (``tests/order_kit.py``): longest first by the
committed table, unlisted files after, a file's tests together and in their own order; the table refreshed
from a JUnit report; and the conftest hook applied to this very session."""

import json
import os
import sys

import pytest
from order_kit import DURATIONS, durations_from_junit, file_of, load_durations, longest_first

IDS = ["tests/unit/a.py::t1", "tests/unit/b.py::t1", "tests/unit/a.py::t2", "tests/unit/c.py::t1[x]",
       "tests/unit/d.py::t1", "tests/unit/c.py::t1[y]", "tests/integration/e.py::T::t1"]


def test_files_go_longest_first_then_unlisted_ones_in_collection_order_each_file_kept_whole():
    seconds = {"tests/unit/c.py": 40.0, "tests/integration/e.py": 90.0, "tests/unit/a.py": 5.0}
    ordered = longest_first(IDS, seconds, lambda i: i)
    assert ordered == ["tests/integration/e.py::T::t1", "tests/unit/c.py::t1[x]", "tests/unit/c.py::t1[y]",
                       "tests/unit/a.py::t1", "tests/unit/a.py::t2", "tests/unit/b.py::t1", "tests/unit/d.py::t1"]
    assert sorted(ordered) == sorted(IDS)  # nothing lost or repeated
    assert longest_first(IDS, {}, lambda i: i) == [  # no table: grouped by file, files as first collected
        "tests/unit/a.py::t1", "tests/unit/a.py::t2", "tests/unit/b.py::t1", "tests/unit/c.py::t1[x]",
        "tests/unit/c.py::t1[y]", "tests/unit/d.py::t1", "tests/integration/e.py::T::t1"]


def test_a_tie_keeps_the_collection_order():
    assert longest_first(["b.py::t", "a.py::t"], {"a.py": 3.0, "b.py": 3.0}, lambda i: i) == ["b.py::t", "a.py::t"]


def test_the_table_is_read_back_and_a_missing_or_broken_one_keeps_the_collection_order(tmp_path):
    assert load_durations(tmp_path / "none.json") == {}
    (tmp_path / "bad.json").write_text("{not json")
    assert load_durations(tmp_path / "bad.json") == {}
    (tmp_path / "list.json").write_text("[1, 2]")
    assert load_durations(tmp_path / "list.json") == {}
    (tmp_path / "ok.json").write_text(json.dumps({"tests/unit/a.py": 2}))
    assert load_durations(tmp_path / "ok.json") == {"tests/unit/a.py": 2.0}


def test_the_committed_table_names_only_files_that_exist():
    table = load_durations(DURATIONS)
    root = DURATIONS.parent.parent
    assert table, "tests/durations.json is missing or empty"
    assert [f for f in table if not (root / f).is_file()] == []


def test_seconds_per_file_are_summed_from_a_junit_report(tmp_path):
    (tmp_path / "tests" / "unit").mkdir(parents=True)
    for name in ("test_a.py", "test_b.py"):
        (tmp_path / "tests" / "unit" / name).write_text("")
    (tmp_path / "junit.xml").write_text("""<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
<testcase classname="tests.unit.test_a" name="test_one" time="1.25"/>
<testcase classname="tests.unit.test_a.TestGroup" name="test_two" time="0.5"/>
<testcase classname="tests.unit.test_b" name="test_three[p]" time="7.0"><skipped/></testcase>
</testsuite></testsuites>""")
    table = durations_from_junit(tmp_path / "junit.xml", root=tmp_path)
    assert table == {"tests/unit/test_b.py": 7.0, "tests/unit/test_a.py": 1.8}
    assert list(table) == ["tests/unit/test_b.py", "tests/unit/test_a.py"]


def test_this_session_collected_its_files_longest_first(request):
    """The conftest hook ran: the session's files, as collected, follow the committed table."""
    table = load_durations(DURATIONS)
    files = list(dict.fromkeys(file_of(item.nodeid) for item in request.session.items))
    listed = [f for f in files if f in table]
    if len(listed) < 2:
        pytest.skip("fewer than two listed files collected in this session")
    assert listed == sorted(listed, key=lambda f: -table[f])
    assert files[:len(listed)] == listed  # the unlisted ones come after


def test_the_test_run_writes_the_bytecode_of_what_it_imports():
    """scripts/setup.sh does not byte-compile the venv for the tests; tests/conftest.py lifts
    PYTHONDONTWRITEBYTECODE for the run and the processes it starts, so each import is compiled once."""
    assert "PYTHONDONTWRITEBYTECODE" not in os.environ and not sys.dont_write_bytecode
