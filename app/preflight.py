"""A new run's checks before anything is stored: its paths made absolute, its env's splits sized
against its stages, its policy, H0 and executor built once (``preflight``), a user's agent factory run
once on a scripted model (``dry_run_agent``). ``coevo.app.run`` starts the run from what they built."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, NamedTuple

from coevo.app.services import engine_options
from coevo.config import RunConfig
from coevo.envs.base import Env
from coevo.errors import CoevoError
from coevo.evaluation.executors import Executor
from coevo.harnesses.spec import HarnessSpec
from coevo.storage.connection import location
from coevo.strategies import STRATEGIES, Strategy

log = logging.getLogger(__name__)


class RunError(CoevoError, ValueError):
    """A run that cannot start or resume as asked (unknown run, bad model or env reference, an
    answer to no pending question); the message names the input and the fix."""


class Prepared(NamedTuple):
    """What ``preflight`` built for a new run, each once: its env, its executor (None: in process) and
    H0 (the harness ``config.harness`` names, or the env's base harness)."""

    env: Env
    executor: Executor | None
    h0: HarnessSpec | None


def _absolute(path: str) -> str:
    return str(Path(path).expanduser().resolve())


def approving(config: RunConfig) -> RunConfig:
    """``config`` with ``gate.approve`` on: the run pauses before each gate decision."""
    return config.model_copy(update={"gate": config.gate.model_copy(update={"approve": True})})


def anchored(config: RunConfig) -> RunConfig:
    """``config`` with every path made absolute against the current directory: ``db`` (a file, not a
    URL), ``out_dir`` (adapters and reports live under it), ``harness`` when it names a file, and the
    directories of a ``local:`` policy (base and adapter) when they exist."""
    update: dict[str, Any] = {"out_dir": _absolute(config.out_dir), "db": location(config.db)}
    if config.harness and Path(config.harness).expanduser().is_file():
        update["harness"] = _absolute(config.harness)
    if config.policy.startswith("local:"):
        from coevo.models.refs import split_local

        parts = split_local(config.policy.removeprefix("local:"))
        parts = tuple(_absolute(p) if p and Path(p).expanduser().exists() else p for p in parts)
        update["policy"] = "local:" + "+".join(p for p in parts if p)
    return config.model_copy(update=update)


def check_splits(config: RunConfig, strategy: Strategy, env: Env) -> dict[str, int]:
    """The number of tasks each split of ``env`` gives the run (``env.tasks(split, n_split)``), checked
    against what its stages and evaluations take: train at least ``train.tasks_per_step`` when the
    strategy trains weights (a step samples that many) and at least one otherwise, val at least one
    (validation and the gate), test at least one unless ``env.n_test`` is 0. Returns the sizes.
    Raises ``RunError`` naming every split's size, what it falls short of and the setting to change
    (an env with too few distinct tasks: a larger ``size`` in ``env.ref``)."""
    sizes = {split: len(env.tasks(split, getattr(config.env, f"n_{split}")))  # type: ignore[arg-type]
             for split in ("train", "val", "test")}
    needs = {"train": config.train.tasks_per_step if strategy.trains else 1, "val": 1,
             "test": 1 if config.env.n_test else 0}
    short = [split for split in sizes if sizes[split] < needs[split]]
    if short:
        whats = {"train": (f"train.tasks_per_step = {config.train.tasks_per_step} per weight step" if strategy.trains
                           else "at least 1 to train on"), "val": "at least 1 to validate and gate on",
                 "test": "at least 1 for the final test (env.n_test = 0: none)"}
        got = ", ".join(f"{split} {n}" for split, n in sizes.items())
        lacks = "; ".join(f"{split} needs {whats[split]}" for split in short)
        raise RunError(f"env {config.env.ref!r} gives {got} tasks (n_train={config.env.n_train}, "
                       f"n_val={config.env.n_val}, n_test={config.env.n_test} asked): {lacks}. An env with too few "
                       "distinct tasks (e.g. a game whose start is the same for every seed) needs a larger size "
                       "in env.ref (size=N) or more varied tasks"
                       + ("; or lower train.tasks_per_step" if "train" in short and strategy.trains else "")
                       + "; nothing was started")
    return sizes


def preflight(config: RunConfig, strategy: Strategy) -> Prepared:
    """Check the references a run of ``strategy`` depends on before anything is stored: the env and
    the sizes of its splits (``check_splits``, before any model loads), the
    policy (a ``local:`` model is loaded here, once: the run's policies share its engine; a strategy
    with a weight stage needs one, since the trainer holds the weights), H0 and the executor. Returns
    them as ``Prepared`` (the env, the run's executor or None for in process, H0), each built here once
    for the whole run. Raises ``RunError``
    naming the reference and the fix, or ``HarnessError`` for a bad H0, including one whose prompt
    fits the context budget on none of the run's tasks (``coevo.harnesses.fit``: the smaller of H0's
    ``max_context_tokens`` and the policy's context, counted by its tokenizer when local; on some: a warning)."""
    from coevo.envs.registry import get_env
    from coevo.evaluation.executors import make_executor
    from coevo.harnesses.agent import start_harness
    from coevo.harnesses.fit import check_prompt_fits, meter_of
    from coevo.models.refs import ModelRefError, load_model
    from coevo.models.smollm2 import SmolLM2NotInstalledError

    try:
        env = get_env(config.env.ref, **config.env.settings())
    except (KeyError, ImportError, TypeError, ValueError) as err:
        message = err.args[0] if isinstance(err, KeyError) and err.args else err
        raise RunError(f"env {config.env.ref!r} cannot be built: {message}. Fix env.ref in the config "
                       f"(`coevo envs list` shows the suites); nothing was started") from None
    check_splits(config, strategy, env)  # before any model loads
    try:
        policy = load_model(config.policy, **engine_options(config))
    except (ModelRefError, SmolLM2NotInstalledError, OSError) as err:
        raise RunError(f"policy {config.policy!r} cannot be loaded: {err}. Fix it with --set policy=... "
                       f"or the config's policy key; nothing was started") from None
    if strategy.trains and not config.policy.startswith("local:"):
        frozen = ", ".join(s.name for s in STRATEGIES.values() if not s.trains)
        raise RunError(f"strategy {config.strategy!r} trains the policy's weights, but policy {config.policy!r} is "
                       "a server, whose weights the run cannot train: use a local: policy (local:smollm2-135m, "
                       f"local:/path/to/model; train.vllm then samples it on vLLM servers, README GPU recipe), or a "
                       f"strategy without a weight stage ({frozen}); nothing was started")
    h0 = start_harness(config.harness, env.name)
    sizes = {split: getattr(config.env, f"n_{split}") for split in ("train", "val", "test")}
    prompts = [t.prompt for split, n in sizes.items() if n for t in env.tasks(split, n)]
    # before any rollout, counted as the policy counts and against its own context where it is smaller
    fit = check_prompt_fits(h0, prompts, source=f"H0 ({config.harness or env.name})", meter=meter_of(policy))
    if not fit.fits:
        log.warning("H0: %s", fit.text())
    try:
        executor = None if config.executor == "inprocess" else make_executor(config.executor)
    except ValueError as err:  # e.g. Ray is not installed
        raise RunError(f"{err}; nothing was started") from None
    return Prepared(env, executor, h0)


async def dry_run_agent(config: RunConfig, env: Env, h0: HarnessSpec | None = None) -> None:
    """When ``config.harness`` names a user's agent factory, run it (H0: ``h0``, preflight's, else
    built from the config) once with a scripted model (``coevo.harnesses.agent_run.dry_run``) before
    anything is stored; a bad factory or a graph that raises is reported as ``AgentError`` (a
    ``HarnessError``). The caller closes what preflight started (``coevo.app.run.Start.release``)."""
    from coevo.harnesses.agent import is_agent_ref, start_harness
    from coevo.harnesses.agent_run import dry_run

    if is_agent_ref(config.harness):
        await dry_run(h0 if h0 is not None else start_harness(config.harness, env.name), env)
