"""Training Harness-R1's harness engineer: cold-start SFT on accepted edits, then GRPO on the
outcomes of its own patches (Harness-R1 ("Learning to Edit Executable Runtime Harnesses from Agent Failure
Trajectories", arXiv:2608.02276), abstract: "cold-start supervised fine-tuning initializes this editing policy,
which is then trained online with group-relative policy optimization"; "training updates only the engineer").

- ``train_engineer_sft``: LoRA SFT on ``coevo.training.harness_r1.engineer_data.accepted_examples`` (the reply's
  tokens carry the loss; the prompt's do not), with RSFT's masked, token-normalised NLL steps
  (``coevo.training.rsft.sft_epochs``).
- ``train_engineer_grpo``: the *same* GRPO stage as the target's (``coevo.training.grpo.stage.train_grpo``:
  TRL's ``GRPOTrainer`` + PEFT LoRA, Eq. 6 group advantages), with ``EngineerRollout`` as its rollout
  function: each of the G rollouts of an episode is one engineer reply decoded under the episode's
  ``patch_schema`` (JSON-schema-constrained on a local model), rewarded by ``EditEnv`` (patched minus
  unpatched rerun of the frozen target on the episode's train batch, same fresh seed; an invalid
  patch gets the penalty). The "task" of a GRPO group is the episode (its id is the dataset prompt).

Deviation: under constrained decoding the sampler's log-probs are those of the masked distribution,
while TRL's loss scores the unmasked one; with ``num_iterations = 1`` the ratio is 1 either way and the
gradient is that of the sampled tokens' log-probs (the mask only decides which tokens are sampled).
"""

from __future__ import annotations

import random
import statistics
import time
from typing import Any, Sequence

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage, messages_to_dict

from coevo.config.train import StageConfig
from coevo.envs.base import Task
from coevo.harnesses.patch_schema import patch_schema
from coevo.harnesses.spec import Decoding, HarnessSpec
from coevo.models.adapters import stage_folder, writing_adapter
from coevo.models.base import record_call
from coevo.models.checkpoint import Checkpoint, new_checkpoint_id
from coevo.models.messages import messages_to_chat, text_of
from coevo.models.refs import split_local, split_settings
from coevo.models.structured import response_format
from coevo.models.trajectory import Trajectory
from coevo.training.checkpoint import load_policy, record_checkpoint
from coevo.training.grpo.samples import Row
from coevo.training.harness_r1.edit_env import EditEnv, EditEpisode, EditReply, engineer_messages
from coevo.training.harness_r1.engineer_data import EngineerExample
from coevo.training.memory import releasing

ENV_NAME = "harness_r1"
"""The ``env`` name of the engineer's trajectories and episode tasks."""


def episode_task(episode: EditEpisode) -> Task:
    """The GRPO "task" of ``episode``: its id, split train, the engineer's user prompt."""
    return Task(id=episode.id, env=ENV_NAME, split="train",
                prompt=engineer_messages(episode.spec, episode.evidence, episode.tasks)[1])


def engineer_checkpoint(reference: str, id: str = "engineer-base") -> Checkpoint:
    """The checkpoint a ``local:BASE[+ADAPTER]`` engineer reference names (what SFT and GRPO start
    from). Raises ``ValueError`` for another kind of reference: only a local model trains here."""
    if not reference.startswith("local:"):
        raise ValueError(f"harness_r1.engineer = {reference!r} cannot be trained in this process: use a local "
                         "reference (local:smollm2-135m, local:/path/to/model[+/path/to/adapter]) or set "
                         "harness_r1.steps = 0 and sft_epochs = 0 to use it untrained")
    base, adapter = split_local(split_settings(reference)[0].removeprefix("local:"))
    return Checkpoint(id=id, base_model=base, adapter_path=adapter)


def engineer_reference(checkpoint: Checkpoint) -> str:
    """The model reference of an engineer ``checkpoint``: ``local:BASE`` or ``local:BASE+ADAPTER``."""
    return f"local:{checkpoint.base_model}" + (f"+{checkpoint.adapter_path}" if checkpoint.adapter_path else "")


def engineer_spec(temperature: float = 1.0) -> HarnessSpec:
    """The engineer's own sampling settings as a spec (what ``train_grpo`` reads: the temperature)."""
    return HarnessSpec(name="harness-engineer", decoding=Decoding(temperature=temperature))


class EngineerRollout:
    """``train_grpo``'s ``rollout_fn`` for the engineer: ``(spec, policy, env, task, seed=,
    checkpoint_id=) -> Trajectory`` where ``task`` is an ``episode_task`` of one of ``episodes``;
    ``spec.decoding.temperature`` is the sampling temperature, ``max_tokens`` the reply budget,
    ``max_ops`` the most operations a patch may have (``patch_schema``). The trajectory holds the one
    model call (its tokens train the engineer), ``reward`` the ``EditEnv`` reward, ``passed`` whether
    the patch was valid and raised success, and ``score_detail`` the outcome (valid, reason, patched,
    unpatched). ``outcomes`` lists (episode id, seed, ``EditOutcome``) in the order they finished."""

    def __init__(self, env: EditEnv, episodes: Sequence[EditEpisode], max_tokens: int = 384, max_ops: int = 2) -> None:
        self.env, self.max_tokens, self.max_ops = env, max_tokens, max_ops
        self.episodes = {e.id: e for e in episodes}
        self.outcomes: list[tuple[str, int, Any]] = []

    def messages(self, episode: EditEpisode) -> list[BaseMessage]:
        """The engineer's prompt messages for ``episode``."""
        system, user = engineer_messages(episode.spec, episode.evidence, episode.tasks)
        return [SystemMessage(system), HumanMessage(user)]

    async def __call__(self, spec: Any, policy: Any, env: Any, task: Task, seed: int = 0, checkpoint_id: str = "",
                       **_: Any) -> Trajectory:
        """One engineer reply for the episode of ``task``, decoded under its patch schema, and its reward."""
        episode = self.episodes[task.id]
        messages = self.messages(episode)
        fmt = response_format(EditReply, patch_schema(episode.spec, max_ops=self.max_ops))
        started = time.perf_counter()
        reply = await policy.ainvoke(messages, response_format=fmt, seed=seed, max_tokens=self.max_tokens,
                                     temperature=spec.decoding.temperature)
        latency = time.perf_counter() - started
        text = text_of(reply.content)
        outcome = await self.env.outcome(episode, text)
        self.outcomes.append((episode.id, seed, outcome))
        return Trajectory(task_id=task.id, env=ENV_NAME, split="train", harness_id=episode.spec.id,
                          checkpoint_id=checkpoint_id, seed=seed, messages=messages_to_dict([*messages, reply]),
                          calls=[record_call(messages, reply, latency, seed)], final_answer=text,
                          stop_reason="final_answer", model_turns=1, reward=outcome.reward,
                          passed=outcome.valid and outcome.reward > 0, latency_s=latency,
                          score_detail={"valid": outcome.valid, "reason": outcome.reason, "patched": outcome.patched,
                                        "unpatched": outcome.unpatched})


def grpo_rollouts(config: StageConfig, episodes: Sequence[EditEpisode]) -> int:
    """The most rollouts of the frozen target an engineer GRPO stage over ``episodes`` with stage
    settings ``config`` can make — its declared size under a rollout cap (``coevo.meta.budget``):
    each of ``steps`` x ``tasks_per_step`` x ``num_generations`` patches rerun on its episode's batch
    (an invalid one is not rerun), plus each episode's unpatched control once (``EditEnv.control``),
    at most one per episode a step can draw; a batch counted at the largest episode's size."""
    batch = max((len(e.tasks) for e in episodes), default=0)
    drawn = config.steps * config.tasks_per_step
    return drawn * config.num_generations * batch + min(len(episodes), drawn) * batch


@releasing
def train_engineer_grpo(checkpoint: Checkpoint, episodes: Sequence[EditEpisode], env: EditEnv,
                        config: StageConfig | dict | None = None, temperature: float = 1.0, max_tokens: int = 384,
                        max_ops: int = 2, archive: Any = None, run_id: str | None = None,
                        **kwargs: Any) -> tuple[Checkpoint, list[Trajectory], EngineerRollout]:
    """GRPO on the engineer from ``checkpoint`` over ``episodes`` (``tasks_per_step`` episodes x
    ``num_generations`` = G patches per step; module doc), through ``train_grpo``. ``kwargs`` go to
    ``train_grpo`` (``policy_factory``, ``callbacks``). Returns the new engineer checkpoint (its
    ``metrics["history"]``: the reward curve per step; ``config["stage"]``: ``engineer_grpo``, so a
    report tells it from the target's stages), every engineer trajectory, and the rollout (its
    ``outcomes``). Raises ``SplitLeakError`` (at episode construction) for a non-train task and
    what ``train_grpo`` raises. Like every weight stage, it hands the memory it freed back to the operating
    system when it ends (``coevo.training.memory.releasing``)."""
    from coevo.training.grpo.stage import train_grpo

    rollout = EngineerRollout(env, episodes, max_tokens, max_ops)
    new, trajectories = train_grpo(checkpoint, engineer_spec(temperature), env,  # type: ignore[arg-type]
                                   [episode_task(e) for e in episodes], config, archive=None,  # stored once, tagged
                                   rollout_fn=rollout, run_id=run_id, **kwargs)
    new = new.model_copy(update={"config": {**new.config, "stage": "engineer_grpo"}})
    record_checkpoint(archive, new)
    return new, trajectories, rollout


def example_row(example: EngineerExample, tokenizer: Any) -> Row:
    """``example`` as an SFT row: the chat-templated prompt (as the local engine builds it,
    ``coevo.models.local_engine``) without loss, the reply's tokens and an end-of-sequence token with it."""
    chat = messages_to_chat([SystemMessage(example.system), HumanMessage(example.user)])
    prompt = tokenizer(tokenizer.apply_chat_template(chat, add_generation_prompt=True, tokenize=False),
                       add_special_tokens=False)["input_ids"]
    reply = list(tokenizer(example.reply, add_special_tokens=False)["input_ids"]) + [tokenizer.eos_token_id]
    return Row(list(prompt), reply, [1] * len(reply), [0.0] * len(reply), 0.0, 0)


@releasing
def train_engineer_sft(checkpoint: Checkpoint, examples: Sequence[EngineerExample],
                       config: StageConfig | dict | None = None, archive: Any = None,
                       run_id: str | None = None) -> Checkpoint:
    """Cold-start SFT of the engineer from ``checkpoint`` on ``examples`` (``accepted_examples``):
    ``epochs`` passes of ``minibatch_size``-row steps at ``learning_rate`` with a new LoRA adapter
    (``lora_r``, ``lora_alpha``; or the checkpoint's own, trained further). Returns the new checkpoint
    (adapter under ``<output_dir>/<id>/adapter``; metrics: loss, steps, examples, wall seconds).
    Raises ``ValueError`` when there is no example (an archive without accepted edits). Hands the memory it
    freed back to the operating system when it ends (``coevo.training.memory.releasing``)."""
    import torch
    from peft import get_peft_model

    from coevo.training.grpo.stage import lora_config
    from coevo.training.rsft import sft_epochs

    if not examples:
        raise ValueError("train_engineer_sft got no example: the archive holds no accepted edit with stored train "
                         "failures of its parent; run a gated strategy first or skip the cold start")
    cfg = StageConfig.parse(config)
    new_id = new_checkpoint_id()
    out_dir = stage_folder(cfg.output_dir, new_id, run_id)
    model, tokenizer = load_policy(checkpoint, trainable=True)
    if not checkpoint.adapter_path:
        model = get_peft_model(model, lora_config(cfg))
    rows = [example_row(e, tokenizer) for e in examples]
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=cfg.learning_rate)
    torch.manual_seed(cfg.seed)
    started = time.perf_counter()
    losses = sft_epochs(model, optimizer, rows, cfg, random.Random(cfg.seed))
    adapter_dir = out_dir / "adapter"
    with writing_adapter(adapter_dir, new_id) as partial:
        model.save_pretrained(str(partial))
    new = Checkpoint(id=new_id, base_model=checkpoint.base_model, adapter_path=str(adapter_dir),
                     parents=[checkpoint.id],
                     config={"stage": "engineer_sft", "edits": [e.edit_id for e in examples],
                             **cfg.model_dump(mode="json")},
                     metrics={"loss": statistics.fmean(losses) if losses else None, "steps": len(losses),
                              "examples": len(examples), "history": [{"step": i + 1, "loss": v}
                                                                      for i, v in enumerate(losses)],
                              "wall_time_s": time.perf_counter() - started}, run_id=run_id)
    record_checkpoint(archive, new)
    return new
