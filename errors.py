"""Errors every layer may raise, at the bottom of the layers so none has to import upward for them."""

from __future__ import annotations


class MissingExtraError(ImportError):
    """An optional package is not installed; the message names the extra (or package) to install."""
