"""The services of a run built from its config: policies per checkpoint, the weight stage, the
meta roles (the CLI's and Studio's default ``MetaContext``)."""

from __future__ import annotations

from typing import Any, Callable, Iterable

from coevo.config import RunConfig
from coevo.envs.base import Env
from coevo.envs.registry import get_env
from coevo.evaluation.executors import Executor, make_executor
from coevo.harnesses.bpe import ArchiveExperience
from coevo.harnesses.spec import HarnessSpec
from coevo.meta.context import MetaContext
from coevo.models.adapters import check_adapter
from coevo.observe.progress import NullReporter, Reporter
from coevo.records import Checkpoint
from coevo.roles.curator import curator_for
from coevo.roles.engineer import editor_or_engineer, engineer_for
from coevo.roles.inheritor import inheritor_for
from coevo.roles.profiler import profiler_for
from coevo.roles.proposer import proposer_for
from coevo.roles.summariser import summariser_for
from coevo.roles.voter import voters_for
from coevo.storage import Archive
from coevo.strategies import Strategy, get_strategy
from coevo.training.stage import StageTrainer


def engine_options(config: RunConfig) -> dict[str, int]:
    """The engine options a ``local:`` policy is loaded with (``coevo.models.refs.ENGINE_KWARGS``): up to
    ``eval.concurrency`` rows a batch, so the requests an evaluation keeps in flight decode together, and
    ``eval.threads`` torch threads in its decoding worker when set. Empty for a server policy."""
    from coevo.models.refs import engine_settings

    return engine_settings(config.policy, config.eval.concurrency, config.eval.threads)


class PolicyCache:
    """``policy(checkpoint_id) -> BaseChatModel``: the configured ref, plus the checkpoint's adapter
    (``local:BASE+ADAPTER``) or the name it is served under (``Checkpoint.model_ref``). A checkpoint
    published on vLLM servers (``Checkpoint.vllm``, ``StageTrainer``) is loaded into them again first,
    a no-op unless a server restarted (``coevo.training.vllm_sync.publish_checkpoint``)."""

    def __init__(self, config: RunConfig, archive: Archive) -> None:
        self.config, self.archive, self.models = config, archive, {}

    def __call__(self, checkpoint_id: str):
        """The chat model of ``checkpoint_id`` (loaded once). Raises ``KeyError`` for an unknown checkpoint,
        ``coevo.models.adapters.CheckpointError`` naming the checkpoint and file for a damaged adapter."""
        if checkpoint_id not in self.models:
            from coevo.models.refs import load_model

            rec = self.archive.get(Checkpoint, checkpoint_id)
            if rec is None:
                raise KeyError(f"checkpoint {checkpoint_id!r} is not in the archive")
            if rec.adapter_path:
                check_adapter(rec.adapter_path, rec.id)  # a damaged adapter: CheckpointError naming the file
            adapted = f"{self.config.policy}+{rec.adapter_path}" if rec.adapter_path else self.config.policy
            ref = rec.model_ref or adapted
            if rec.vllm and rec.adapter_path:
                from coevo.training.vllm_sync import publish_checkpoint

                publish_checkpoint(rec, rec.vllm)  # after a server restart (a resume); else a no-op
            self.models[checkpoint_id] = load_model(ref, **engine_options(self.config))
        return self.models[checkpoint_id]


ROLES: dict[str, Callable[[RunConfig, Env], Any]] = {"curator": curator_for, "editor": editor_or_engineer,
                                                     "engineer": engineer_for, "proposer": proposer_for,
                                                     "inheritor": inheritor_for, "profiler": profiler_for,
                                                     "voter": voters_for, "summariser": summariser_for}
"""Meta role name -> the factory of the run's role (offline or an LLM per ``meta.model``; the editor is
Harness-R1's engineer with ``harness_r1.as_editor``)."""
FIELDS = {"engineer": "editor"}
"""The context field of a role whose name is not its field: Harness-R1's engineer is the editor."""


def meta_roles(config: RunConfig, env: Env, names: Iterable[str]) -> dict[str, Any]:
    """The meta roles ``names`` (a strategy's ``roles``) built for this run, by name."""
    return {FIELDS.get(name, name): ROLES[name](config, env) for name in names}


def make_context(config: RunConfig, archive: Archive, run_id: str, reporter: Reporter | None = None,
                 env: Env | None = None, executor: Executor | None = None,
                 strategy: Strategy | None = None, h0: HarnessSpec | None = None) -> MetaContext:
    """The services of a run built from its config and its strategy's row in the strategy table
    (a trainer only when it trains weights, only the meta roles it needs, the ``config.executor``'s
    workers for its evaluations and the trainer's server-backed sampling): the CLI's and Studio's
    default wiring. ``env``, ``executor``, ``strategy`` and ``h0`` (the run's start harness): what the
    caller built already (the run driver's ``preflight``); each is built here only when not given (the
    executor only when ``config.executor`` is not ``inprocess``; H0 when a node first asks for it,
    ``MetaContext.start``)."""
    env = env or get_env(config.env.ref, **config.env.settings())
    strategy = strategy or get_strategy(config.strategy)
    if executor is None and config.executor != "inprocess":
        executor = make_executor(config.executor)
    trainer = StageTrainer(config, env, archive, run_id, executor) if strategy.trains else None
    return MetaContext(config=config, env=env, archive=archive, policy=PolicyCache(config, archive), trainer=trainer,
                       reporter=reporter or NullReporter(), run_id=run_id, executor=executor,
                       experience=ArchiveExperience(archive, run_id), h0=h0, **meta_roles(config, env, strategy.roles))
