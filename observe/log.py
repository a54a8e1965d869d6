"""The one logging channel: Python logging under the logger ``coevo``.

Every module logs there (``logging.getLogger(__name__)``; the meta-loop nodes through
``MetaContext.log(topic, message)``, which logs on ``coevo.loop`` with the node's topic). Each line
has a *topic* — the record's ``topic`` (a node: ``train``, ``gate``, ...) or else the last part of
its logger's name (``router``, ``executors``) — and ``LineFormatter`` writes it as
``[HH:MM:SS] topic    message`` with the topic padded to ``TOPIC_WIDTH``, so the lines stay aligned
whoever writes them. The progress reporter (``coevo.observe.progress.RichReporter``) is one
consumer: while it runs it prints the channel's lines above its bars (``ChannelHandler``).
"""

from __future__ import annotations

import logging
import time
from typing import Callable

from coevo.masking import redact

CHANNEL = "coevo"
"""The root logger of the channel: every coevo module's logger is below it."""
TOPIC_WIDTH = 8
"""The topic column's width in characters (a longer topic widens its own line only)."""

loop = logging.getLogger(f"{CHANNEL}.loop")
"""The meta loop's logger (``MetaContext.log``): each record carries its node's ``topic``."""


def topic_of(record: logging.LogRecord) -> str:
    """The topic of ``record``: its ``topic`` attribute, else the last part of its logger's name."""
    return getattr(record, "topic", None) or record.name.rsplit(".", 1)[-1]


class LineFormatter(logging.Formatter):
    """``[HH:MM:SS] topic    message`` (local time; the topic padded to ``TOPIC_WIDTH``; warnings and
    errors say so after the topic), every secret masked (``coevo.masking.redact``)."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as one aligned line (an exception's traceback follows on its own lines)."""
        when = time.strftime("%H:%M:%S", time.localtime(record.created))
        level = "" if record.levelno < logging.WARNING else f"{record.levelname.lower()}: "
        line = f"[{when}] {topic_of(record):<{TOPIC_WIDTH}} {level}{record.getMessage()}"
        return redact(f"{line}\n{self.formatException(record.exc_info)}" if record.exc_info else line)


class ChannelHandler(logging.Handler):
    """Hands each formatted line of the channel to ``write`` (e.g. a rich console's ``print``)."""

    def __init__(self, write: Callable[[str], None], level: int = logging.INFO) -> None:
        super().__init__(level)
        self.write = write
        self.setFormatter(LineFormatter())

    def emit(self, record: logging.LogRecord) -> None:
        """Write the record's line; a failure to write is reported by ``logging`` and never raised."""
        try:
            self.write(self.format(record))
        except Exception:  # logging's contract: a handler never raises into the caller
            self.handleError(record)


def attach(handler: logging.Handler) -> Callable[[], None]:
    """Add ``handler`` to the channel and let its INFO lines through; returns the function that
    removes it and restores the channel's level."""
    channel = logging.getLogger(CHANNEL)
    level = channel.level
    channel.addHandler(handler)
    if channel.getEffectiveLevel() > handler.level:
        channel.setLevel(handler.level)

    def detach() -> None:
        channel.removeHandler(handler)
        channel.setLevel(level)

    return detach
