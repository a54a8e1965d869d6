"""What a table invocation cost, kept on disk while it runs, so an invocation that never writes its table
still counts in the table's cost (issue 39: CPU seconds summed over *every* invocation).

``benchmarks/tables.py`` runs for hours and is stopped and continued (Ctrl-C, ``kill``, a watchdog's
``kill -9``, a machine that goes away). Only an invocation that finishes writes the results JSON with its
``Invocation``; before this ledger a stopped one left no trace, and the table under-reported its cost.
Now every invocation writes ``{stem}.running-{host}-{pid}.json`` beside the results (its commit, seeds,
run config, and its wall and CPU seconds so far) when it starts, every ``INTERVAL_S`` seconds from a
daemon thread, and once more when it ends by an exception (SIGTERM is turned into one by
``benchmarks/tables.py``). A finished invocation removes its own file. The next invocation of the same
table (its seeds' part or the plain one that writes the table) reads the files of processes that are gone
(``stopped_invocations``): each becomes an ``Invocation`` with ``stopped = True``, measured up to its last
record (at most ``INTERVAL_S`` short after a ``kill -9``), and its file is removed once the results that
hold it are written.
"""

from __future__ import annotations

import json
import logging
import os
import resource
import socket
import threading
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from coevo.app.heartbeat import pid_exists

log = logging.getLogger(__name__)

INTERVAL_S = 30.0
"""Seconds between two records of a running invocation's cost."""


class Invocation(BaseModel):
    """One invocation of a table's command: the ``commit`` it ran at, its ``wall_s`` and ``cpu_s``, the
    ``seeds`` it ran when it ran only some (``benchmarks/tables.py --only-seeds``; empty: all), and whether
    it was ``stopped`` before it wrote its results (its cost read from its last record: module doc)."""

    commit: str = ""
    wall_s: float = 0.0
    cpu_s: float = 0.0
    seeds: list[int] = Field(default_factory=list)
    stopped: bool = False


def cpu_seconds() -> float:
    """User + system CPU seconds of this process and its finished children."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


class CostLedger:
    """``with CostLedger(folder, stem, commit, seeds, config) as ledger: ...`` records this invocation's
    cost in ``folder / f"{stem}.running-{host}-{pid}.json"`` (module doc): on entry, every ``interval_s``
    seconds, and on an exception. ``ledger.invocation()`` is the ``Invocation`` measured now (wall and CPU
    seconds since entry); ``ledger.done()`` removes the file once the results holding that invocation are
    written. ``config``: the run config as JSON (``TableResult.config``), so a later invocation counts only
    its own table's stopped invocations. A record that cannot be written is logged, never raised."""

    def __init__(self, folder: Path, stem: str, commit: str, seeds: list[int], config: dict[str, Any],
                 interval_s: float = INTERVAL_S) -> None:
        self.path = Path(folder) / f"{stem}.running-{socket.gethostname()}-{os.getpid()}.json"
        self.commit, self.seeds, self.config, self.interval_s = commit, seeds, config, interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._wall0 = self._cpu0 = 0.0

    def invocation(self, stopped: bool = False) -> Invocation:
        """This invocation's ``Invocation`` as measured now."""
        return Invocation(commit=self.commit, wall_s=time.perf_counter() - self._wall0,
                          cpu_s=cpu_seconds() - self._cpu0, seeds=self.seeds, stopped=stopped)

    def _record(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "config": self.config,
                                       "invocation": self.invocation(stopped=True).model_dump(mode="json")}))
            tmp.replace(self.path)  # a reader never sees half a record
        except OSError as err:
            log.warning("the cost of this table invocation was not recorded in %s: %s", self.path, err)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._record()

    def __enter__(self) -> "CostLedger":
        self._wall0, self._cpu0 = time.perf_counter(), cpu_seconds()
        self._record()
        self._thread = threading.Thread(target=self._loop, name="table-cost-ledger", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, kind: Any, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if kind is not None:  # stopped before its results were written: the last record says what it cost
            self._record()

    def done(self) -> None:
        """Remove this invocation's record (its results, which hold its ``Invocation``, are written)."""
        self.path.unlink(missing_ok=True)


def stopped_invocations(folder: Path, stem: str, config: dict[str, Any],
                        parts: bool = False) -> tuple[list[Invocation], list[Path]]:
    """The recorded invocations of results stem ``stem`` (``table_NAME``, or a part's ``table_NAME.seeds-S``),
    and with ``parts`` of every part of it, in ``folder`` whose process is gone and whose run config is
    ``config``: their
    ``Invocation`` (``stopped = True``, oldest record first) and their files (remove them once the results
    that hold them are written). A process still alive on this host (another part running now) and an
    unreadable file are left where they are."""
    found: list[tuple[float, Invocation, Path]] = []
    host = socket.gethostname()
    patterns = [f"{stem}.running-*.json"] + ([f"{stem}.seeds-*.running-*.json"] if parts else [])
    for pattern in patterns:
        for path in Path(folder).glob(pattern):
            try:
                record = json.loads(path.read_text())
                invocation = Invocation.model_validate(record["invocation"])
            except (OSError, ValueError, KeyError) as err:
                log.warning("skipped the cost record %s: %s", path, err)
                continue
            alive = record.get("host") == host and (record.get("pid") == os.getpid() or pid_exists(record["pid"]))
            if alive or record.get("config") != config:
                continue
            found.append((path.stat().st_mtime, invocation, path))
    found.sort(key=lambda item: item[0])
    return [invocation for _, invocation, _ in found], [path for _, _, path in found]
