"""The services of a run built from its config: policies per checkpoint, the weight stage, the
meta roles, the evaluator (the CLI's and Studio's default ``MetaContext``)."""

from __future__ import annotations

from typing import Any

from coevo.config import RunConfig
from coevo.envs.base import Env
from coevo.envs.registry import get_env
from coevo.evaluation.engine import evaluate
from coevo.meta.context import MetaContext
from coevo.report.progress import NullReporter, Reporter
from coevo.roles.offline import OfflineCurator, OfflineEditor
from coevo.training.stage import StageTrainer


class PolicyCache:
    """``policy(checkpoint_id) -> BaseChatModel``: the configured ref, plus the checkpoint's adapter
    (``local:BASE+ADAPTER``) or the name it is served under (``config["model_ref"]``)."""

    def __init__(self, config: RunConfig, archive: Any) -> None:
        self.config, self.archive, self.models = config, archive, {}

    def __call__(self, checkpoint_id: str):
        if checkpoint_id not in self.models:
            from coevo.models.refs import load_model

            rec = self.archive.get_checkpoint(checkpoint_id)
            if rec is None:
                raise KeyError(f"checkpoint {checkpoint_id!r} is not in the archive")
            ref = rec.config.get("model_ref") or (f"{self.config.policy}+{rec.adapter_path}" if rec.adapter_path else self.config.policy)
            self.models[checkpoint_id] = load_model(ref)
        return self.models[checkpoint_id]


def meta_roles(config: RunConfig, env: Env) -> tuple[Any, Any]:
    """Curator and editor: offline rules (``meta.model = "offline"``) or LiteLLM roles."""
    if config.meta.model == "offline":
        return OfflineCurator(config.meta.min_failed_tasks), OfflineEditor(demo_answer=getattr(env, "demonstration_answer", None))
    from coevo.roles.llm import LLMCurator, LLMEditor

    return (LLMCurator(config.meta.model, config.meta.min_failed_tasks, temperature=config.meta.temperature),
            LLMEditor(config.meta.model, temperature=config.meta.temperature))


def make_context(config: RunConfig, archive: Any, run_id: str, reporter: Reporter | None = None,
                 approve: bool = False, env: Env | None = None) -> MetaContext:
    """The services of a run built from its config (the CLI's and Studio's default wiring)."""
    env = env or get_env(config.env.ref, **config.env.settings())
    curator, editor = meta_roles(config, env)
    trains = config.strategy in ("vace", "rl_only", "ungated")
    return MetaContext(config=config, env=env, archive=archive, policy=PolicyCache(config, archive),
                       trainer=StageTrainer(config, env, archive, run_id) if trains else None, curator=curator,
                       editor=editor, reporter=reporter or NullReporter(), evaluate=evaluate, approve=approve)
