"""One logging channel (``coevo.observe.log``): every writer's lines (the loop's nodes, library modules)
come out aligned on the topic column, and the progress reporter consumes the channel only while it runs."""

import io
import logging
import re

from rich.console import Console

from coevo.observe.log import CHANNEL, TOPIC_WIDTH, ChannelHandler, attach, loop
from coevo.observe.progress import RichReporter


def test_lines_of_every_writer_share_one_aligned_topic_column():
    lines: list[str] = []
    detach = attach(ChannelHandler(lines.append))
    try:
        loop.info("round 0: kept", extra={"topic": "gate"})
        loop.info("round 0: 2 candidates", extra={"topic": "validate"})
        logging.getLogger("coevo.models.router").warning("server %s failed", "http://a")
        logging.getLogger("coevo.training.grpo.stage").debug("below INFO: not on the channel")
    finally:
        detach()
    assert len(lines) == 3, lines
    starts = {line.index(text) for line, text in zip(lines, ("round 0: kept", "round 0: 2 ", "warning: server"))}
    assert starts == {len("[00:00:00] ") + TOPIC_WIDTH + 1}, lines  # the message column is the same in each
    assert re.match(r"\[\d\d:\d\d:\d\d\] router +warning: server http://a failed$", lines[2])


def test_the_rich_reporter_prints_the_channel_above_its_bars_only_while_it_runs():
    out = io.StringIO()
    handlers = list(logging.getLogger(CHANNEL).handlers)
    with RichReporter(console=Console(file=out, width=120, force_terminal=False)):
        loop.info("round 1: H0=abc", extra={"topic": "setup"})
    loop.info("after the run: not printed", extra={"topic": "setup"})
    assert "setup    round 1: H0=abc" in out.getvalue() and "after the run" not in out.getvalue()
    assert logging.getLogger(CHANNEL).handlers == handlers


def test_framework_messages_and_warnings_go_to_the_log_file_not_the_console(tmp_path, capsys):
    import warnings

    from transformers.utils import logging as hf_logging

    from coevo.observe.log import framework_noise_to

    hf_logger = logging.getLogger("transformers")
    before = (list(hf_logger.handlers), hf_logger.propagate, hf_logging.is_progress_bar_enabled())
    with framework_noise_to(tmp_path / "logs" / "run.log") as path:
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.warn("You are using 'rollout_func', which is an experimental feature.", UserWarning)
            warnings.warn("`is_gradient_checkpointing` is deprecated", FutureWarning)
        logging.getLogger("transformers.modeling_utils").warning("some weights were not initialized")
        logging.getLogger("trl.trainer").warning("a TRL notice")
        logging.getLogger("coevo.loop").info("round 0: a loop line", extra={"topic": "train"})
        assert not hf_logging.is_progress_bar_enabled()  # the weight-loading bar stays off the console
    captured = capsys.readouterr()
    assert "rollout_func" not in captured.err + captured.out and "not initialized" not in captured.err + captured.out
    text = path.read_text()
    for expected in ("rollout_func", "is_gradient_checkpointing", "not initialized", "a TRL notice", "a loop line"):
        assert expected in text, text
    assert (list(hf_logger.handlers), hf_logger.propagate, hf_logging.is_progress_bar_enabled()) == before
    assert not logging.getLogger("py.warnings").handlers


def test_framework_noise_to_leaves_a_library_users_warning_capture_and_handlers_as_they_were(tmp_path):
    import warnings

    from coevo.observe.log import framework_noise_to

    user_file = logging.FileHandler(tmp_path / "mine.log")
    logging.getLogger("py.warnings").addHandler(user_file)
    logging.captureWarnings(True)  # the user routes warnings to their own log
    try:
        for n in range(2):  # two coevo calls in one process
            with framework_noise_to(tmp_path / "logs" / f"run{n}.log") as path:
                warnings.warn(f"inside call {n}", UserWarning, stacklevel=1)
            assert f"inside call {n}" in path.read_text()
            assert logging.getLogger("py.warnings").handlers == [user_file]
            assert not logging.getLogger(CHANNEL).handlers
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.warn("after the calls", UserWarning, stacklevel=1)
        user_file.flush()
        assert "after the calls" in (tmp_path / "mine.log").read_text()  # still captured into the user's log
    finally:
        logging.captureWarnings(False)
        logging.getLogger("py.warnings").removeHandler(user_file)
        user_file.close()
