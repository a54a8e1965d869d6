"""Errors every layer may raise, at the bottom of the layers so none has to import upward for them.

The convention: which error a user sees.

- ``CoevoError`` is the base of every *user mistake*: whatever is wrong with what a user gave — a
  config file or key, a CLI argument, an env or model reference, a harness spec or agent factory, an
  archive path, run id or the state stored in it, an answer — or a missing optional package. It is
  raised as the ``CoevoError`` of the room that checks the input (``ConfigError``, ``RunError``,
  ``EnvRefError``, ``HarnessError``, ``ModelRefError``, ``ArchiveError``, ``MissingExtraError``, ...;
  ``InputError`` where no room's own fits), whose message is one paragraph that names the input and
  the fix; the CLI prints it so (``coevo.cli.common.user_errors``) and exits 1. Each also subclasses the
  built-in it stands for (mostly ``ValueError``), so ``except ValueError`` keeps working.
- A pydantic validator raises ``ValueError``, as pydantic asks: pydantic gathers them into a
  ``ValidationError``, which the loaders report as ``ConfigError`` or ``HarnessError``.
- Anything else is a failure of coevo or of something it calls: a broken precondition between coevo's
  own modules (``ValueError``, ``TypeError``), a server or worker (``RuntimeError``), a model's bad tool
  call inside a rollout (a tool's ``ValueError``, which the model reads as the tool's reply). The CLI
  prints those with their traceback.

``tests/unit/test_error_convention.py`` walks the user-facing rooms (config, CLI, app, archive,
reports, the strategy table, tracker names, env references and every env's constructor, harness
loading and registration) and fails on a bare ``raise ValueError`` there.
"""

from __future__ import annotations


class CoevoError(Exception):
    """A user's mistake; the message (one paragraph) names the input and the fix."""


class InputError(CoevoError, ValueError):
    """A value a user gave that coevo cannot use (a strategy or tracker name, a run to export, a file of
    the wrong kind) where no room has an error of its own; the message names the input and the fix."""


class MissingExtraError(CoevoError, ImportError):
    """An optional package is not installed; the message names the extra (or package) to install."""
