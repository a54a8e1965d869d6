"""What a table invocation cost, kept on disk while it runs, so an invocation that never writes its table
still counts in the table's cost (a table reports the CPU seconds of *every* invocation that worked on it).

``benchmarks/tables.py`` runs for hours and is stopped and continued (Ctrl-C, ``kill``, a watchdog's
``kill -9``, a machine that goes away). Only an invocation that finishes writes the results JSON with its
``Invocation``; before this ledger a stopped one left no trace, and the table under-reported its cost.
Now every invocation keeps a record, ``{stem}.{host}-{pid}-{id}.running`` (JSON) beside the results: its
id, commit, seeds, the table's key (run config, table spec, effective budget and seed count), and its wall and
CPU seconds so far.
It is written when the invocation starts, every ``INTERVAL_S`` seconds from a daemon thread, on SIGTERM
(written, then the process exits at once with status 143, as ``kill`` always made it) and when it ends by
an exception (Ctrl-C). A finished invocation removes its record once its results are written. The next
invocation of the same table reads the records of invocations that are gone (``stopped_invocations``):
each becomes an ``Invocation`` with ``stopped = True``, measured up to its last record (after a
``kill -9``, up to ``INTERVAL_S`` of wall time short, and that times the busy threads of CPU), and the
record is removed once the results that hold it are written. An invocation's results and its records share
its ``id``, so one is never counted twice.

A record is *gone* when its process is: on this host when its pid no longer exists (a pid reused by another
program keeps the record unfolded until that program ends: a cost left out for a while, never counted
twice); from another host when it has not been rewritten for ``STALE_S`` seconds. A live invocation's
record is left alone.
"""

from __future__ import annotations

import json
import logging
import os
import resource
import signal
import socket
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Sequence

from pydantic import BaseModel, Field

from coevo.app.heartbeat import pid_exists

log = logging.getLogger(__name__)

INTERVAL_S = 30.0
"""Seconds between two records of a running invocation's cost."""
STALE_S = 3 * INTERVAL_S
"""A record not rewritten for this long (seconds) belongs to an invocation that is gone."""
SUFFIX = ".running"
"""The records' file suffix (not ``.json``: a results glob such as ``table_NAME.seeds-*.json`` never meets one)."""


class Invocation(BaseModel):
    """One invocation of a table's command: the ``commit`` it ran at, its ``wall_s`` and ``cpu_s``, the
    ``seeds`` it ran when it ran only some (``benchmarks/tables.py --only-seeds``; empty: all), whether it
    was ``stopped`` before it wrote its results (its cost read from its last record: module doc), its ``id``
    (shared by its records; empty in results written before the records existed), and the ``strategies`` it
    ran when it ran only some (``--only-strategies``; empty: all)."""

    commit: str = ""
    wall_s: float = 0.0
    cpu_s: float = 0.0
    seeds: list[int] = Field(default_factory=list)
    stopped: bool = False
    id: str = ""
    strategies: list[str] = Field(default_factory=list)


def cpu_seconds() -> float:
    """User + system CPU seconds of this process and its finished children."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


class CostLedger:
    """``with CostLedger(folder, stem, commit, seeds, key) as ledger: ...`` keeps this invocation's record in
    ``folder`` (module doc): on entry, every ``interval_s`` seconds, on SIGTERM (then exits 143; installed
    on entry from the main thread, the previous handler restored on exit) and on an exception.
    ``ledger.invocation()`` is the ``Invocation`` measured now; ``ledger.done(folded)`` removes this
    record and the ``folded`` ones once the results holding their invocations are written (no record is
    written after it). ``key``: what makes two invocations the same table (JSON: the run config, the table
    spec, the effective budget and seed count), so a later invocation folds only its own table's records. A
    record that cannot be written is logged, never raised."""

    def __init__(self, folder: Path, stem: str, commit: str, seeds: list[int], key: dict[str, Any],
                 interval_s: float = INTERVAL_S, strategies: list[str] | None = None) -> None:
        self.folder, self.stem, self.commit, self.seeds, self.key = Path(folder), stem, commit, seeds, key
        self.strategies = list(strategies or [])
        self.id = uuid.uuid4().hex[:12]
        self.path = self.folder / f"{stem}.{socket.gethostname()}-{os.getpid()}-{self.id}{SUFFIX}"
        self.interval_s = interval_s
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._done = False
        self._thread: threading.Thread | None = None
        self._previous: Any = None
        self._wall0 = self._cpu0 = 0.0

    def invocation(self, stopped: bool = False) -> Invocation:
        """This invocation's ``Invocation`` as measured now."""
        return Invocation(commit=self.commit, wall_s=time.perf_counter() - self._wall0,
                          cpu_s=cpu_seconds() - self._cpu0, seeds=self.seeds, stopped=stopped, id=self.id,
                          strategies=self.strategies)

    def record(self, wait_s: float | None = None) -> bool:
        """Write the record now; False when it could not be written (logged), the ledger is done, or the
        lock was not free within ``wait_s`` seconds (None: wait; SIGTERM's handler waits 1 s, since it may
        interrupt this very thread while it holds the lock)."""
        if not self._lock.acquire(timeout=-1 if wait_s is None else wait_s):
            return False
        try:  # one writer at a time (the thread, a signal, the exit); none after done()
            if self._done:
                return False
            self.folder.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(self.path.name + ".tmp")
            tmp.write_text(json.dumps({"stem": self.stem, "host": socket.gethostname(), "pid": os.getpid(),
                                       "key": self.key,
                                       "invocation": self.invocation(stopped=True).model_dump(mode="json")}))
            tmp.replace(self.path)  # a reader never sees half a record
            return True
        except OSError as err:
            log.warning("the cost of this table invocation was not recorded in %s: %s", self.path, err)
            return False
        finally:
            self._lock.release()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.record()

    def _terminated(self, signum: int, frame: Any) -> None:
        self.record(wait_s=1.0)
        os._exit(128 + signum)  # what SIGTERM's default does, after the record (an archive is crash-safe)

    def __enter__(self) -> "CostLedger":
        self._wall0, self._cpu0 = time.perf_counter(), cpu_seconds()
        self.record()
        self._thread = threading.Thread(target=self._loop, name="table-cost-ledger", daemon=True)
        self._thread.start()
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGTERM, self._terminated)
        return self

    def __exit__(self, kind: Any, *exc: Any) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)
            self._previous = None
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if kind is not None:  # stopped before its results were written: the last record says what it cost
            self.record()

    def done(self, folded: Sequence[Path] = ()) -> None:
        """Remove this invocation's record and the ``folded`` ones (their invocations are in the results now)."""
        with self._lock:
            self._done = True
        for path in [*folded, self.path]:
            path.unlink(missing_ok=True)


def stopped_invocations(folder: Path, stem: str, key: dict[str, Any], parts: bool = False,
                        now: float | None = None) -> tuple[list[Invocation], list[Path]]:
    """The records of results stem ``stem`` (``table_NAME``, or a part's ``table_NAME.seeds-S``), and with
    ``parts`` of every part of it, in ``folder``, whose invocation is gone (module doc: on this host its pid gone;
    from another host its record older than ``STALE_S`` at ``now``, a ``time.time()``) and whose table ``key`` is
    ``key``: their ``Invocation`` (``stopped = True``, oldest record first) and their files (remove them
    once the results that hold them are written: ``CostLedger.done``). A live invocation's record and an
    unreadable one are left where they are (the second logged)."""
    found: list[tuple[float, Invocation, Path]] = []
    host, now = socket.gethostname(), time.time() if now is None else now
    for path in sorted(Path(folder).glob(f"{stem}.*{SUFFIX}")):
        try:
            record = json.loads(path.read_text())
            invocation = Invocation.model_validate(record["invocation"])
            written = path.stat().st_mtime
        except (OSError, ValueError, KeyError) as err:
            log.warning("skipped the cost record %s: %s", path, err)
            continue
        if record.get("host") == host:  # here the pid says it (a reused pid keeps a record unfolded, not counted twice)
            alive = pid_exists(int(record.get("pid", 0)))
        else:
            alive = now - written < STALE_S
        mine = record.get("stem") == stem or (parts and str(record.get("stem", "")).startswith(f"{stem}.seeds-"))
        if alive or not mine or record.get("key") != key:
            continue
        found.append((written, invocation, path))
    found.sort(key=lambda item: item[0])
    return [invocation for _, invocation, _ in found], [path for _, _, path in found]
