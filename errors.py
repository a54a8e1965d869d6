"""Errors every layer may raise, at the bottom of the layers so none has to import upward for them.

``CoevoError`` is the base of every *user mistake*: a bad config key, model or env reference,
harness, archive path, run id or answer, a missing optional package. Its message is one paragraph
that names the input and the fix; the CLI prints it (``coevo.cli.common.user_errors``) and exits 1.
An exception that is not a ``CoevoError`` is a failure of coevo or of something it calls (a server,
a worker), printed with its traceback.
"""

from __future__ import annotations


class CoevoError(Exception):
    """A user's mistake; the message (one paragraph) names the input and the fix."""


class MissingExtraError(CoevoError, ImportError):
    """An optional package is not installed; the message names the extra (or package) to install."""
