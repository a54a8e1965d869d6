"""Harness-R1's harness engineer as an editor role: the model Harness-R1 trains
(``coevo.training.harness_r1.engineer``) proposing the edits of any strategy that refines.

``EngineerEditor`` is an ``LLMEditor`` whose prompt is the engineer's own (``engineer_messages``:
the harness, the direction's failed *train* episodes — its evidence, with the tasks' prompts — and
the direction as what they share), the prompt it was trained on, and whose reply is decoded under
``patch_schema(spec, max_ops=...)`` (JSON-schema-constrained on a local model). Its model is a
model reference with its adapter (``local:smollm2-135m+/path/to/adapter``, or any reference on a
GPU host); ``use`` switches it to a newly trained adapter. ``engineer_for`` builds it from the run
config's ``[harness_r1]`` section (the ``harness_r1`` strategy's editor); with ``harness_r1.as_editor``
it is the editor of any other strategy too (``editor_or_engineer``).
"""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel

from coevo.config import RunConfig
from coevo.envs.base import Env, Task
from coevo.harnesses.patch_schema import patch_schema
from coevo.harnesses.spec import HarnessSpec
from coevo.meta.roles import Editor
from coevo.meta.state import Direction
from coevo.models.refs import as_reference, load_model, split_settings
from coevo.roles.editor import LLMEditor, editor_for
from coevo.roles.llm import DEFAULT_SETTINGS, LOCAL_SETTINGS
from coevo.training.harness_r1.edit_env import engineer_messages


class EngineerEditor(LLMEditor):
    """The trained harness engineer as the editor (module doc). ``model``: a reference (with its
    adapter) or a chat model; ``max_ops``: the most operations a patch may have; ``settings``: its
    decoding settings (``temperature``, ``max_tokens``)."""

    role = "engineer"

    def __init__(self, model: str | BaseChatModel, max_ops: int = 2, **settings: Any) -> None:
        super().__init__(model, **settings)
        self.max_ops, self.settings = max_ops, settings

    def use(self, reference: str) -> None:
        """Edit with the model ``reference`` from now on (e.g. the engineer's newly trained adapter,
        ``local:BASE+ADAPTER``). Raises ``ModelRefError`` for a malformed reference."""
        ref = as_reference(reference)
        defaults = {**DEFAULT_SETTINGS, **(LOCAL_SETTINGS if ref.startswith("local:") else {}), **self.settings}
        self.chat, self.model = load_model(ref, **defaults), split_settings(reference)[0]

    def messages(self, direction: Direction, spec: HarnessSpec, tasks: dict[str, Task]) -> tuple[str, str]:
        """The engineer's prompt: the harness, the direction's failed train episodes, the direction's id."""
        evidence = [e.model_dump(mode="json") for e in direction.evidence]
        shown = [tasks[i] for i in direction.task_ids if i in tasks and tasks[i].split == "train"]
        return engineer_messages(spec, evidence, shown, focus=direction.id)

    def reply_schema(self, spec: HarnessSpec) -> dict[str, Any]:
        """``patch_schema`` with at most ``max_ops`` operations."""
        return patch_schema(spec, max_ops=self.max_ops)


def engineer_for(config: RunConfig, env: Env) -> EngineerEditor:
    """The run's harness engineer: ``harness_r1.engineer`` (a model reference; the untrained base
    until the strategy trains an adapter) at ``harness_r1.temperature`` with ``harness_r1.max_tokens``
    and ``harness_r1.max_ops``."""
    cfg = config.harness_r1
    return EngineerEditor(cfg.engineer, max_ops=cfg.max_ops, temperature=cfg.temperature, max_tokens=cfg.max_tokens)


def editor_or_engineer(config: RunConfig, env: Env) -> Editor:
    """The run's editor: the engineer (``engineer_for``) when ``harness_r1.as_editor``, else ``editor_for``'s."""
    return engineer_for(config, env) if config.harness_r1.as_editor else editor_for(config, env)
