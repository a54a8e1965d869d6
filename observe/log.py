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

import contextlib
import logging
import os
import time
from pathlib import Path
from typing import Callable, Iterator

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


FRAMEWORKS = ("transformers", "trl", "peft", "accelerate", "datasets", "huggingface_hub", "torch", "py.warnings")
"""The loggers of the frameworks under coevo, and ``py.warnings`` (Python warnings, captured): what they say
is for the log file, not the run's console (e.g. transformers' ``is_gradient_checkpointing`` FutureWarning,
TRL's "experimental rollout_func" UserWarning)."""
QUIET_BARS = {"HF_HUB_DISABLE_PROGRESS_BARS": "1", "HF_DATASETS_DISABLE_PROGRESS_BARS": "1"}
"""Environment settings that keep the hub's and datasets' progress bars off the console."""


@contextlib.contextmanager
def framework_noise_to(path: str | os.PathLike) -> Iterator[Path]:
    """While open, write the channel's lines and everything the frameworks log or warn to the file
    ``path`` (appended), and keep the frameworks' messages and progress bars (transformers' weight-loading
    bar) off the console; on exit every setting is restored. Yields the file's path."""
    path = Path(path)
    handler = _LazyFile(path, encoding="utf-8", delay=True)
    handler.setFormatter(LineFormatter())
    handler.setLevel(logging.INFO)
    detach = attach(handler)
    saved = {name: (logging.getLogger(name).propagate, list(logging.getLogger(name).handlers)) for name in FRAMEWORKS}
    env = {key: os.environ.get(key) for key in QUIET_BARS}
    os.environ.update(QUIET_BARS)
    captured = getattr(logging, "_warnings_showwarning", None) is not None  # a caller's captureWarnings(True)
    logging.captureWarnings(True)
    hf = _transformers_logging()
    bars = hf.is_progress_bar_enabled() if hf else None
    try:
        for name in FRAMEWORKS:
            logger = logging.getLogger(name)
            logger.handlers = [h for h in logger.handlers if not isinstance(h, logging.StreamHandler)
                               or isinstance(h, logging.FileHandler)] + [handler]
            logger.propagate = False
        if hf:
            hf.disable_progress_bar()
        yield path
    finally:
        if not captured:  # a capture the caller (or an enclosing call) set stays on
            logging.captureWarnings(False)
        for name, (propagate, handlers) in saved.items():
            logger = logging.getLogger(name)
            logger.handlers, logger.propagate = handlers, propagate
        if hf and bars:
            hf.enable_progress_bar()
        for key, value in env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        detach()
        handler.close()


class _LazyFile(logging.FileHandler):
    """A log file (and its folder) made by its first line: a command that logs nothing leaves nothing."""

    def _open(self):  # noqa: ANN202  (logging's own signature)
        Path(self.baseFilename).parent.mkdir(parents=True, exist_ok=True)
        return super()._open()


def _transformers_logging():  # noqa: ANN202  (the module, or None)
    """transformers' logging module, once imported here so that its default console handler exists and can
    be set aside (the run imports transformers anyway); None when transformers is not installed."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:
        return None
    hf_logging.get_logger()  # installs transformers' default handler, which framework_noise_to sets aside
    return hf_logging
