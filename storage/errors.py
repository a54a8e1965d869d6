"""The archive's errors: each message says what to do."""

from __future__ import annotations

import errno
import sqlite3

from coevo.errors import CoevoError


class ArchiveError(CoevoError, RuntimeError):
    """The archive cannot be opened or a lookup failed; the message says what to do."""


class CorruptArchiveError(ArchiveError, ValueError):
    """A stored row that cannot be read back (a trajectory body whose calls reference nothing): the
    database was changed outside coevo or damaged."""


class SchemaVersionError(ArchiveError):
    """The database was written by a newer coevo schema than this code understands."""


class AmbiguousIdError(ArchiveError):
    """An id prefix that several archived ids start with; the message lists some of them, ``ids``
    holds those found (up to six)."""

    def __init__(self, message: str, ids: "list[str] | None" = None) -> None:
        super().__init__(message)
        self.ids = list(ids or [])


class ArchiveFullError(ArchiveError):
    """A write the archive's database refused for lack of space; nothing of it was stored."""

    def __init__(self, where: str, what: str, resume: str = "") -> None:
        self.where, self.what = where, what
        resume = resume or "coevo run --resume RUN_ID, or coevo eval with --run-id RUN_ID"
        super().__init__(f"the archive at {where} is full: the disk (or quota) has no room for {what}, so "
                         "nothing of that write was stored and the run stopped. Free space on that disk, then "
                         f"resume: {resume}; it continues from its last stored step")

    def resumed_with(self, resume: str) -> ArchiveFullError:
        """The same error, its message naming the command that resumes the run (``resume``)."""
        return ArchiveFullError(self.where, self.what, resume)


FULL_SQLSTATE = "53100"
"""PostgreSQL's ``disk_full``."""


def disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` (or the driver error it wraps, ``.orig``, or its cause) says the database's disk
    or quota is full: SQLite's ``SQLITE_FULL`` ("database or disk is full"), PostgreSQL's SQLSTATE
    53100, or an ``OSError`` with ``ENOSPC`` / ``EDQUOT``."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, ArchiveFullError):
            return True
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if isinstance(exc, sqlite3.Error) and (getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL
                                               or "database or disk is full" in str(exc)):
            return True
        if getattr(exc, "sqlstate", None) == FULL_SQLSTATE:
            return True
        exc = getattr(exc, "orig", None) or exc.__cause__ or exc.__context__  # type: ignore[assignment]
    return False
