"""Run the real ``coevo`` command line in this process with the meta-loop tests' fakes (``test_meta_loop``:
the words env, a scripted policy, a fake trainer, offline roles): ``python fake_cli.py eval|run ARGS...``.

``coevo eval`` gets the words env and the scripted policy for any ``--env``/``--model``; ``coevo run``
gets ``setup_run``'s services on the run's own config, archive and id. Used by the concurrent-writers
test to start several real CLI processes against one archive.
"""

from __future__ import annotations

import dataclasses
import faulthandler
import signal
import sys
import tempfile
from pathlib import Path

sys.path[:0] = [str(Path(__file__).parent), str(Path(__file__).parent.parent)]

from test_meta_loop import WordEnv, policy, setup_run  # noqa: E402

import coevo.app.run as meta_run  # noqa: E402
import coevo.cli.eval as eval_cli  # noqa: E402
from coevo.app.preflight import Prepared  # noqa: E402
from coevo.cli.app import app  # noqa: E402


def main(argv: list[str]) -> None:
    """Patch the services with the fakes, then run ``coevo argv...``. SIGUSR1 prints every thread's stack
    (``faulthandler``): what a test that waited too long shows of where the process was."""
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    eval_cli.get_env = lambda ref, **kw: WordEnv()
    eval_cli.load_model = lambda ref, **kw: policy("help")

    def make_context(cfg, archive, run_id, reporter=None, **built):
        _, ctx, _ = setup_run(Path(tempfile.mkdtemp()), "help", db=cfg.db)
        ctx.trainer.archive, ctx.trainer.own_run = archive, run_id  # each run's own checkpoints, as a real trainer's
        return dataclasses.replace(ctx, config=cfg, archive=archive, run_id=run_id, reporter=reporter)

    meta_run.preflight = lambda cfg, strategy: Prepared(WordEnv(), None, None)
    meta_run.make_context = make_context
    app(argv, prog_name="coevo")


if __name__ == "__main__":
    main(sys.argv[1:])
