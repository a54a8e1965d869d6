"""A run's heartbeat: which process runs it, and whether that process is still alive, so a killed run
is not listed as running.

A run killed with ``kill -9`` (or on a machine that lost power) never gets to write ``failed``: its
status stays ``running``. While a meta-loop run (``coevo.app.run.run_meta``) or a ``coevo eval`` runs,
a ``Heartbeat`` thread writes the process's host, pid and the time to the archive every
``INTERVAL_S`` seconds (a ``coevo.records.RunHeartbeat``, the ``run_heartbeats`` table); ``liveness`` reads it back:
on the same host a run whose pid is gone is dead; on another host, one that has not beaten for
``STALE_S`` seconds is presumed dead. ``coevo archive list`` and ``show`` print the verdict beside a
``running`` status. A resume (``coevo.app.run.resume_run``), or a start under a stored run id, holds a ``Claim`` on
the run: it refuses a run that is running and alive, and claims the run before it loads anything (``take``:
its heartbeat and status in one transaction, each only if no other process changed it since it was read), so a
second process meanwhile, or one that checked at the same moment, is refused too. A new run is stored the same way
(its row only if no row has its id), and a run answered after a gate question goes on only if no other process took
it over while it waited (``keep``).
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import socket
import threading
from dataclasses import dataclass
from typing import Any

from coevo.records import RunHeartbeat, RunRecord
from coevo.timestamps import utcnow

log = logging.getLogger(__name__)

INTERVAL_S = 15.0
"""Seconds between two beats of a running process."""
STALE_S = 120.0
"""A heartbeat older than this (seconds) means the process stopped beating: dead (another host) or hung."""

_beating: set[str] = set()
"""Run ids this process beats for now (tells this process's own finished runs from its live ones)."""


class Heartbeat:
    """``with Heartbeat(archive, run_id): ...`` beats for ``run_id`` once on entry, then every
    ``interval_s`` seconds from a daemon thread until the block ends (an archive held in memory, which
    no other process can read, gets the first beat only). A beat that fails (a locked or full
    database) is logged and retried at the next interval, never raised into the run. ``driving``: whether this
    process drives the run meanwhile (then ``liveness`` reads this process's own heartbeat as alive); a ``Claim``'s
    beats, while the run loads, are not driving it."""

    def __init__(self, archive: Any, run_id: str, interval_s: float = INTERVAL_S, driving: bool = True) -> None:
        self.archive, self.run_id, self.interval_s, self.driving = archive, run_id, interval_s, driving
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _beat(self) -> None:
        beat(self.archive, self.run_id)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._beat()

    def __enter__(self) -> "Heartbeat":
        self._beat()
        if self.driving:
            _beating.add(self.run_id)
        if getattr(self.archive, "url", "") != "sqlite://":  # "sqlite://": in memory (coevo.storage.connection)
            self._thread = threading.Thread(target=self._loop, name=f"heartbeat-{self.run_id}", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self.driving:
            _beating.discard(self.run_id)


def own(run_id: str) -> RunHeartbeat:
    """This process's heartbeat for ``run_id``: this host, this pid, now."""
    return RunHeartbeat(id=run_id, host=socket.gethostname(), pid=os.getpid())


def beat(archive: Any, run_id: str) -> None:
    """Write one heartbeat of this process for ``run_id`` now (``Heartbeat``'s beats; a run is claimed with
    ``take``). A beat that fails is logged, never raised."""
    try:
        archive.put(own(run_id))
    except Exception as err:  # a heartbeat never fails the run it reports on
        log.warning("heartbeat of run %s not written: %s", run_id, err)


def take(archive: Any, run_id: str, status: str | RunRecord) -> tuple[RunHeartbeat | None, RunHeartbeat]:
    """Make run ``run_id`` this process's before it loads or runs anything (a model can take minutes), in one
    transaction (``Archive.claim_run``): its heartbeat replaces the one read here, and its status goes from
    ``status`` (the stored status read with the run) to ``running``, or (a ``RunRecord``: a new run) its row is
    stored, each only if no other process changed them since. Returns the heartbeat it replaced (None: none) and
    this process's. Raises ``RunError``, nothing changed, when the run is running (or new) and its heartbeat alive,
    or when another process claimed it first (two resumes, or two ``coevo compare`` starting one seed's run)."""
    from coevo.app.preflight import RunError  # the user's error for a run; loaded only to refuse one

    previous = archive.get(RunHeartbeat, run_id)
    verdict = liveness(previous)
    if (isinstance(status, RunRecord) or status == "running") and verdict.alive:
        raise RunError(f"run {run_id} is running now ({verdict.text}): a second process would write the same run. "
                       "Wait for it to end, or stop that process and run the same command again (a pid that is no "
                       "longer a coevo process was reused: its heartbeat goes stale within 2 minutes); nothing was "
                       "changed")
    mine = own(run_id)
    if not archive.claim_run(mine, previous, status if isinstance(status, RunRecord) else (status, "running")):
        raise RunError(f"run {run_id} was claimed by another process while this one checked it: a second process "
                       "would write the same run. `coevo archive list` shows that process; once it has ended, run "
                       "the same command again; nothing was changed")
    return previous, mine


def keep(archive: Any, run_id: str) -> None:
    """Go on driving run ``run_id``, which this process claimed (``Claim``) or drove before (a run paused at a gate
    question, answered here): its status back to ``running`` only if its heartbeat is still this process's, in
    one transaction. Raises ``RunError``, nothing changed, when another process took the run over meanwhile (a
    ``coevo run --resume RUN --answer`` from another terminal while this one waited for the answer)."""
    mine = own(run_id)
    if not archive.claim_run(mine, mine, (archive.get(RunRecord, run_id).status, "running"), on=("host", "pid")):
        from coevo.app.preflight import RunError

        raise RunError(f"run {run_id} was taken over by another process while this one waited: a second process "
                       "would write the same run. `coevo archive list` shows which process runs it now; nothing "
                       "was changed")


class Claim:
    """``with Claim(archive, found) as claimed: ...; claimed.hand_over()``: the stored run ``found`` (a
    ``coevo.records.RunRecord`` in ``archive``, a ``coevo.storage.Archive``; None: a new run, nothing to claim)
    claimed for this process while it opens (``take``; its heartbeat beats meanwhile, so a slow load does not let
    the claim go stale), so a second process meanwhile is refused. Raises ``RunError``, nothing changed, when the
    run is running and its heartbeat alive, or another process claimed it first: two processes would write one
    run (a second resume, or a second ``coevo compare`` starting the same run id again before its first
    checkpoint). Leaving with an exception before ``hand_over`` (the run's graph open: from then its driver keeps
    its status and heartbeat) gives the run back its status and heartbeat, unless another process holds them."""

    def __init__(self, archive: Any, found: Any) -> None:
        self.archive, self.found = archive, found
        self.previous: RunHeartbeat | None = None
        self.held = False
        self._mine: RunHeartbeat | None = None
        self._beating: Heartbeat | None = None

    def __enter__(self) -> "Claim":
        if self.found is None:
            return self
        self.previous, self._mine = take(self.archive, self.found.id, self.found.status)
        self.held = True
        self._beating = Heartbeat(self.archive, self.found.id, driving=False).__enter__()
        return self

    def hand_over(self) -> None:
        """The run's driver keeps its status and heartbeat from here: an exception no longer undoes the claim."""
        self.held = False
        if self._beating is not None:
            self._beating.__exit__(None, None, None)
            self._beating = None

    def __exit__(self, kind: Any, *exc: Any) -> None:
        held = self.held
        self.hand_over()
        if kind is not None and held:  # back as found, if this process still holds the run
            self.archive.claim_run(self.previous or self._mine, self._mine, ("running", self.found.status),
                                   on=("host", "pid"))


@dataclass(frozen=True)
class Liveness:
    """What a ``running`` run's heartbeat says: ``alive`` True (beating), False (dead) or None (no
    heartbeat, or a process that exists but stopped beating), and ``text``, the verdict in words."""

    alive: bool | None
    text: str


def pid_exists(pid: int) -> bool:
    """Whether a process with id ``pid`` exists on this machine (another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: it exists
        return True
    return True


def heartbeats(archive: Any) -> dict[str, RunHeartbeat]:
    """Every run's last heartbeat in ``archive`` (a ``coevo.storage.Archive``), by run id (runs that never
    beat are absent)."""
    return {beat.id: beat for beat in archive.list(RunHeartbeat)}


def liveness(beat: RunHeartbeat | None, now: dt.datetime | None = None, host: str | None = None) -> Liveness:
    """The verdict on a ``running`` run from its last heartbeat ``beat`` (None: it never beat, e.g. it
    was started by a coevo without heartbeats), at ``now`` (default: now, UTC) seen from ``host``
    (default: this machine's name). Same host: dead when the pid is gone (or, for this very process,
    when it no longer beats for the run), stalled when it exists but has not beaten for ``STALE_S``;
    another host: presumed dead after ``STALE_S`` without a beat."""
    if beat is None:
        return Liveness(None, "no heartbeat recorded (started by an older coevo?)")
    age = ((now or utcnow()) - beat.at).total_seconds()
    when = beat.at.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S")
    ago = f"{age / 60:.0f} min" if age >= 120 else f"{max(age, 0):.0f} s"
    if beat.host == (host or socket.gethostname()):
        gone = not pid_exists(beat.pid) or (beat.pid == os.getpid() and beat.id not in _beating)
        if gone:
            return Liveness(False, f"DEAD: its process (pid {beat.pid} on this host) is gone; last heartbeat "
                                   f"{when} UTC. Resume it")
        if age > STALE_S:
            return Liveness(None, f"pid {beat.pid} on this host exists but has not beaten for {ago}: hung, "
                                  "or the pid was reused")
        return Liveness(True, f"alive: pid {beat.pid} on this host, last heartbeat {ago} ago")
    if age > STALE_S:
        return Liveness(False, f"presumed DEAD: no heartbeat from pid {beat.pid} on {beat.host} for {ago} "
                               f"(last {when} UTC). Resume it once you know that process is gone")
    return Liveness(True, f"alive: pid {beat.pid} on {beat.host}, last heartbeat {ago} ago")
