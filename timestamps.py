"""UTC-aware timestamps for every record that crosses a boundary (docs/design.md, Storage: "Timestamps are
UTC-aware on every backend").

``UTCTime`` is a pydantic type: it accepts an aware ``datetime`` in any zone, an ISO 8601 string with
an offset, or Unix seconds (what archives before it stored), and always holds the same instant as an
aware UTC ``datetime``. A naive ``datetime`` is refused: its zone would be a guess.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from pydantic import AfterValidator, AwareDatetime


def utcnow() -> datetime:
    """Now, as an aware UTC ``datetime``."""
    return datetime.now(UTC)


UTCTime = Annotated[AwareDatetime, AfterValidator(lambda value: value.astimezone(UTC))]
"""An instant as an aware UTC ``datetime`` (see the module docstring); pydantic raises a
``ValidationError`` for a naive ``datetime``."""
