"""No silent knobs (issue 22): every numeric and boolean key of the run config — configs/default.toml's
and every family section's — is flipped on small fakes, and something observable must change (the
trained adapter, advantages and groups, archive rows, a gate decision, phase lengths), or the key is
declared in ``coevo.config.knobs`` (``INERT``: no effect under a stated condition, checked to be
bit-identical there and to act elsewhere; ``PERFORMANCE``: speed, memory or logging, checked to
reach its mechanism). A new key without a probe here fails ``test_every_key_has_a_probe``."""

from __future__ import annotations

import asyncio
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pytest
from knob_kit import BASE, KnobEnv, cost_aware, grpo, harness_sft, rsft, run
from pydantic import BaseModel

from coevo.config import RunConfig, load_config
from coevo.config.knobs import INERT, PERFORMANCE
from coevo.harnesses.spec import HarnessSpec
from coevo.records import Checkpoint


def numeric(tp: Any) -> bool:
    """Whether a field annotation is a number, a boolean, an optional one, or a tuple/list of them."""
    if tp in (int, float, bool):
        return True
    args = [a for a in typing.get_args(tp) if a is not type(None) and a is not Ellipsis]
    if typing.get_origin(tp) in (typing.Union, types.UnionType, tuple, list):
        return bool(args) and all(numeric(a) for a in args)
    return False


def keys(model: type[BaseModel] = RunConfig, prefix: str = "") -> dict[str, Any]:
    """Every numeric and boolean key of the run config (dotted) -> its field."""
    out = {}
    for name, f in model.model_fields.items():
        if isinstance(f.annotation, type) and issubclass(f.annotation, BaseModel):
            out.update(keys(f.annotation, f"{prefix}{name}."))
        elif numeric(f.annotation):
            out[f"{prefix}{name}"] = f
    return out


# -- observers: what a flip may change ------------------------------------------------------------


def stage_settings(over: dict[str, Any]) -> dict[str, Any]:
    """``train.x`` keys as a stage's own keys."""
    return {k.removeprefix("train."): v for k, v in over.items()}


def grpo_stage(over: dict[str, Any]) -> dict[str, Any]:
    return grpo(stage_settings(over))


def cost_aware_stage(over: dict[str, Any]) -> dict[str, Any]:
    return cost_aware(stage_settings(over))


def rsft_stage(over: dict[str, Any]) -> dict[str, Any]:
    return rsft(stage_settings(over))


def trl_args(over: dict[str, Any]) -> dict[str, Any]:
    """The TRL ``GRPOConfig`` a stage builds (what the performance keys reach)."""
    from coevo.config.train import StageConfig
    from coevo.training.grpo.stage import grpo_args

    args = grpo_args(StageConfig(**stage_settings(over)), "/tmp/knob-args")
    return {k: getattr(args, k) for k in ("gradient_accumulation_steps", "per_device_train_batch_size",
                                          "activation_checkpointing", "use_cpu", "logging_steps")}


def memory_plan(over: dict[str, Any]) -> dict[str, Any]:
    """The micro-batch and sequence cap a GRPO stage of the tiny Llama's shape plans (what max_memory_gb reaches)."""
    from coevo.config.train import StageConfig
    from coevo.training.memory import ModelShape, plan_memory

    shape = ModelShape(params=30_000, dtype_bytes=4, hidden=32, intermediate=64, layers=2, vocab=128)
    plan = plan_memory(StageConfig(**{"max_memory_gb": 64.0, **stage_settings(over)}), shape)
    return {"micro_batches": plan.micro_batches, "max_len": plan.max_len}


def live_sampler(over: dict[str, Any]) -> dict[str, Any]:
    """A real GRPO step on the tiny chat Llama with the default live sampler: how many times its engine
    merged the LoRA adapter into the base weights (``coevo.models.merged``) and the batch sizes."""
    import tempfile

    from training_kit import NamingEnv, tiny_chat_checkpoint

    from coevo.models.merged import MergedLora
    from coevo.training.grpo.rollout import LivePolicy
    from coevo.training.grpo.stage import train_grpo

    folder = Path(tempfile.mkdtemp(prefix="knob-live-"))
    env, sampler, merges = NamingEnv(), LivePolicy(), []
    original = MergedLora.refresh
    MergedLora.refresh = lambda self: (merges.append(self.supported), original(self))[1]
    try:
        train_grpo(tiny_chat_checkpoint(folder / "base"), HarnessSpec(budget={"max_output_tokens": 4}), env,
                   env.tasks(), {"steps": 1, "output_dir": str(folder), **stage_settings(over)},
                   policy_factory=sampler)
    finally:
        MergedLora.refresh = original
    return {"merges": merges, "batches": sampler.policy.engine.batch_sizes}


def sampler_threads(over: dict[str, Any]) -> set[int]:
    """A real GRPO step on the tiny chat Llama with the stage's own default sampler: torch's thread count
    in the thread that decodes its rollouts (the engine's worker)."""
    import tempfile

    import torch
    from training_kit import NamingEnv, tiny_chat_checkpoint, torch_threads

    from coevo.models.local_engine import LocalEngine
    from coevo.training.grpo.stage import train_grpo

    folder, env, seen = Path(tempfile.mkdtemp(prefix="knob-threads-")), NamingEnv(), set()
    original = LocalEngine.generate_batch
    LocalEngine.generate_batch = lambda self, requests: (seen.add(torch.get_num_threads()),
                                                         original(self, requests))[1]
    try:
        with torch_threads(2):  # the stage's own count, unless the key sets one
            train_grpo(tiny_chat_checkpoint(folder / "base"), HarnessSpec(budget={"max_output_tokens": 4}), env,
                       env.tasks(), {"steps": 1, "output_dir": str(folder), **stage_settings(over)})
    finally:
        LocalEngine.generate_batch = original
    return seen


def training_variant(over: dict[str, Any]) -> tuple:
    """The harness as training rollouts run it (``training_spec``: temperature, output budget)."""
    from coevo.harnesses.spec import HarnessSpec
    from coevo.training.kinds import training_spec

    spec = training_spec(HarnessSpec(name="h0"), load_config(None, over).train)
    return spec.decoding.temperature, spec.budget.max_output_tokens


def eval_call(over: dict[str, Any], split: str = "val") -> dict[str, Any]:
    """The keyword arguments ``MetaContext.evaluate`` hands the evaluation engine for a ``split`` evaluation."""
    from coevo.harnesses.spec import HarnessSpec
    from coevo.meta.context import MetaContext
    from coevo.storage import Archive

    seen: dict[str, Any] = {}

    async def evaluator(spec, checkpoint, env, split, **kwargs):
        seen.update(kwargs)
        raise StopAsyncIteration

    archive = Archive("sqlite://")
    h = archive.add_harness(HarnessSpec(), [], "base", "run-1")
    ctx = MetaContext(config=load_config(None, {**BASE, **over}), env=KnobEnv(), archive=archive,
                      policy=lambda c: None, evaluator=evaluator, run_id="run-1")
    with pytest.raises(StopAsyncIteration):
        asyncio.run(ctx.evaluate(h, "w0", split))  # type: ignore[arg-type]
    return {k: v for k, v in seen.items() if k in ("concurrency", "k", "temperature", "seeds", "shared")}


def eval_call_on_test(over: dict[str, Any]) -> dict[str, Any]:
    """``eval_call`` for a test evaluation."""
    return eval_call(over, "test")


def local_engine_options(over: dict[str, Any]) -> dict[str, Any]:
    """The engine options a run's ``local:`` policy is loaded with (``coevo.app.services.engine_options``)."""
    from coevo.app.services import engine_options

    return engine_options(load_config(None, {**BASE, "policy": "local:smollm2-135m", **over}))


def timr_check(over: dict[str, Any]) -> str:
    """``check_one``'s verdict on a candidate whose smoke-run TIMR rises from 0 to 0.2."""
    from types import SimpleNamespace

    from coevo.harnesses.spec import HarnessSpec
    from coevo.meta.state import Candidate, Direction
    from coevo.nodes.refine import check_one

    config = load_config(None, {**BASE, "meta.local_check": False, **over})
    timr = {"inc": 0.0, "cand": 0.2}

    async def evaluate(harness, checkpoint, split, tasks, k=1):
        return SimpleNamespace(timr=timr[harness], mean_reward=0.0)

    def tasks(split, ids=None):
        return [t for t in KnobEnv().tasks(split, 8) if ids is None or t.id in ids]

    ctx = SimpleNamespace(config=config, evaluate=evaluate, tasks=tasks, spec=lambda harness_id: HarnessSpec(),
                          policy=lambda checkpoint: None,  # MetaContext.policy: the check counts tokens with it
                          log=lambda *args, **kwargs: None)  # both harnesses: the same fitting prompt, no warning
    cand = Candidate(id="c", direction="d", parent_id="inc", spec_id="cand")
    direction = Direction(id="d", cause="x", description="", task_ids=[])
    return asyncio.run(check_one(ctx, {"checkpoint": "w0"}, cand, direction, []))


def coverage(over: dict[str, Any]) -> list[str]:
    """Eq. 3's parents on the example where greedy and exact search disagree, under the config's B and limit."""
    from coevo.graphs.harness_s.evolution import coverage_parents

    hs = load_config(None, over).harness_s
    return coverage_parents({"A": {1, 2, 3, 4}, "B": {1, 2, 5}, "C": {3, 4, 6}, "D": {1}}, hs.parents, hs.exact_limit)


def role_settings(over: dict[str, Any]) -> tuple:
    """The LLM roles a config builds (an LLM ``meta.model``): the curator's temperature and the voter count."""
    from coevo.roles.curator import curator_for
    from coevo.roles.voter import voters_for

    config = load_config(None, {"meta.model": "openai/gpt-4o-mini", **over})
    return curator_for(config, KnobEnv()).chat.temperature, len(voters_for(config, KnobEnv()))


ENGINEER = {"harness_r1.engineer": "openai/fake-engineer?mock_response=x"}
"""An engineer reference that builds without loading a model (LiteLLM's mock)."""


def engineer_settings(over: dict[str, Any]) -> tuple:
    """Harness-R1's engineer as the config builds it: its stage (steps, episodes x G, SFT passes), its
    decoding (temperature, max tokens), its patch size, and which editor a vace run gets."""
    from types import SimpleNamespace

    from coevo.app.services import meta_roles
    from coevo.graphs.harness_r1.nodes import engineer_stage
    from coevo.harnesses.spec import HarnessSpec
    from coevo.roles.engineer import engineer_for

    config = load_config(None, {**BASE, **ENGINEER, **over})
    stage = engineer_stage(SimpleNamespace(config=config), 0)
    engineer = engineer_for(config, KnobEnv())
    editor = meta_roles(config, KnobEnv(), ["editor"])["editor"]
    return (stage.steps, stage.tasks_per_step, stage.num_generations, stage.epochs, engineer.chat.temperature,
            engineer.chat.max_tokens, engineer.reply_schema(HarnessSpec())["properties"]["patch"]["maxItems"],
            type(editor).__name__)


def engineer_episodes(over: dict[str, Any]) -> tuple:
    """The episodes ``failure_episodes`` makes of 8 failed train rollouts, and an invalid patch's reward."""
    from types import SimpleNamespace

    from coevo.graphs.harness_r1.nodes import failure_episodes
    from coevo.harnesses.spec import HarnessSpec
    from coevo.records import Trajectory
    from coevo.storage import Archive
    from coevo.training.harness_r1.edit_env import EditEnv

    config = load_config(None, {**BASE, **over})
    archive, train = Archive("sqlite://"), KnobEnv().tasks("train", 8)
    failed = [Trajectory(id=f"t{i}", task_id=t.id, split="train") for i, t in enumerate(train)]
    archive.add_trajectories(failed, None, "run-1")
    ctx = SimpleNamespace(config=config, run_id="run-1", archive=archive, tasks=lambda split: train,
                          spec=lambda harness_id: HarnessSpec())
    episodes = failure_episodes(ctx, {"train_trajectories": [t.id for t in failed], "incumbent": "h"}, 0)
    penalty = asyncio.run(EditEnv(lambda *a: [], config.harness_r1.penalty).outcome(episodes[0], "no patch")).reward
    return [len(e.tasks) for e in episodes], penalty


_ADAPTERS: dict[str, Any] = {}


def merged(over: dict[str, Any]) -> str:
    """The adapter ``materialise`` writes for a TIES merge proposal of two random adapters under ``rsi``."""
    import tempfile
    from pathlib import Path

    from knob_kit import adapter_digest, base_checkpoint
    from test_coevo_rsi import merge_context
    from training_kit import random_adapter

    from coevo.graphs.coevo_rsi.model_inheritance import materialise
    from coevo.meta.inheritance import ModelProposal

    if not _ADAPTERS:
        folder = Path(tempfile.mkdtemp(prefix="knob-adapters-"))
        _ADAPTERS.update(a=random_adapter(base_checkpoint(), folder / "a", seed=1),
                         b=random_adapter(base_checkpoint(), folder / "b", seed=2))
    a, b = _ADAPTERS["a"], _ADAPTERS["b"]
    ctx, _ = merge_context(Path(tempfile.mkdtemp(prefix="knob-merge-")), [a, b],
                           **{k.removeprefix("rsi."): v for k, v in over.items()})
    proposal = ModelProposal(id="p", harness_id="h", kind="merge", sources=[a.id, b.id], alpha=[0.5, 0.5])
    done = materialise(ctx, proposal, {})
    return adapter_digest(ctx.archive.get(Checkpoint, done.checkpoint_id).adapter_path)


def inheritance(over: dict[str, Any]) -> list[str]:
    """The kinds of model proposal the run's inheritor makes over an archive with two adapters."""
    from test_coevo_rsi import summary_of

    from coevo.roles.inheritor import inheritor_for

    inheritor = inheritor_for(load_config(None, over), KnobEnv())
    return [p.kind for p in inheritor.propose_models("h", "h", summary_of({"a": 0.5, "b": 0.4}, ["a", "b"]),
                                                     "p").proposals]


@dataclass(frozen=True)
class Probe:
    """Flip ``key`` to ``value`` on ``observer`` from ``base`` (dotted overrides); ``inert``: the
    condition (overrides) under which the key must change nothing."""

    observer: Callable[[dict[str, Any]], Any]
    value: Any
    base: dict[str, Any] = field(default_factory=dict)
    inert: dict[str, Any] | None = None


ADAPTIVE = {"strategy": "whale", "whale.schedule": "adaptive", "whale.min_epochs": 0.25, "whale.patience_epochs": 0.25,
            "whale.window_epochs": 0.125, "whale.max_epochs": 1.0, "whale.min_iterations": 2,
            "whale.search_patience": 1, "whale.max_iterations": 4}
WHALE = {"strategy": "whale", "whale.weight_epochs": 0.25, "whale.search_iterations": 1, "search.tasks": 4}
HARNESS_S = {"strategy": "harness_s", "rounds": 1, "harness_s.causes_per_candidate": 1, "harness_s.proposals": [2]}
"""Harness-S with one cause per candidate: two siblings from the two causes, so the router has a choice; one
evolution round, whose parents see all 8 train tasks (each round runs on its own share of them, §3.2)."""
RSI = {"strategy": "coevo_rsi", "meta.candidates": 2}
CLIP = {"train.num_iterations": 2, "train.steps": 2}

PROBES: dict[str, Probe] = {
    # the loop (a fake VACE run)
    "rounds": Probe(run, 1),
    "seed": Probe(run, 1),
    "env.n_train": Probe(run, 6),
    "env.n_val": Probe(run, 3),
    "env.n_test": Probe(run, 2),
    "meta.candidates": Probe(run, 2),
    "meta.min_failed_tasks": Probe(run, 5),
    "meta.smoke_tasks": Probe(run, 0),
    "meta.max_timr_increase": Probe(timr_check, 0.1),
    "meta.local_check": Probe(run, False),
    "meta.local_tasks": Probe(run, 2),
    "meta.local_controls": Probe(run, 2),
    "meta.revisions": Probe(run, 0, {"meta.candidates": 2}),
    "meta.samples": Probe(run, 2),
    "budget": Probe(run, 20),
    "updates": Probe(run, 1),
    "meta.temperature": Probe(role_settings, 0.1, inert={}),
    "gate.min_margin": Probe(run, 1.0),
    "gate.alpha": Probe(run, 0.001, {"gate.test": "bootstrap"}),
    "gate.approve": Probe(run, True),
    "eval.k": Probe(run, 2, {"eval.temperature": 0.5}),
    "eval.temperature": Probe(run, 0.5),
    "eval.concurrency": Probe(eval_call, 1),
    "eval.val_k": Probe(eval_call, 1, {"eval.k": 2, "eval.temperature": 0.5}),
    "eval.share_test": Probe(eval_call_on_test, True),
    "eval.threads": Probe(local_engine_options, 1),
    "train.rescue": Probe(run, True),
    "train.temperature": Probe(training_variant, 0.3),
    "train.max_new_tokens": Probe(training_variant, 12),
    # the GRPO stage (real, tiny Llama)
    "train.steps": Probe(grpo_stage, 2),
    "train.tasks_per_step": Probe(grpo_stage, 1),
    "train.num_generations": Probe(grpo_stage, 4),
    "train.learning_rate": Probe(grpo_stage, 1e-2),
    "train.max_grad_norm": Probe(grpo_stage, 1e-4),
    "train.lora_r": Probe(grpo_stage, 4),
    "train.lora_alpha": Probe(grpo_stage, 64),
    "train.max_len": Probe(grpo_stage, 240),  # the rows' prompts are 226 tokens: their completions are cut
    "train.num_iterations": Probe(grpo_stage, 2, {"train.steps": 2}),
    # a clip of 0.05, far wider than float rounding: with one pass the ratio is 1 up to rounding (Eq. 16's
    # old-policy log-probs come from a separate no-grad forward), so only a zero-width clip could act on it
    "train.epsilon": Probe(grpo_stage, 0.05, CLIP, inert={"train.steps": 2}),
    "train.epsilon_high": Probe(grpo_stage, 0.05, CLIP, inert={"train.steps": 2}),
    "train.importance_correction": Probe(grpo_stage, False),
    "train.is_clip": Probe(grpo_stage, (1.0, 2.0)),
    "train.resample": Probe(grpo_stage, 1, {"train.tasks_per_step": 1, "train.steps": 2}),
    "train.max_concurrency": Probe(grpo_stage, 1),
    "train.action_cost": Probe(cost_aware_stage, 0.5),  # BPE actions cost: the shaped reward's groups differ
    "train.micro_batches": Probe(trl_args, 2),
    "train.max_memory_gb": Probe(memory_plan, 0.52),  # the tiny Llama's step of 8 rows fits in 4 micro-steps
    "train.activation_checkpointing": Probe(trl_args, False),
    "train.pack_prefixes": Probe(trl_args, False),  # unpacked: one micro-step per row
    "train.merge_sampler": Probe(live_sampler, False),
    "train.sampler_threads": Probe(sampler_threads, 1),  # unmerged: no merge of the adapter per step
    "train.use_cpu": Probe(trl_args, False),
    "train.logging_steps": Probe(trl_args, 2),
    # the RSFT stage (real, tiny Llama)
    "train.lora_dropout": Probe(rsft_stage, 0.5, inert={}),
    "train.rsft_threshold": Probe(rsft_stage, 1.0),
    "train.epochs": Probe(rsft_stage, 2),
    "train.minibatch_size": Probe(rsft_stage, 1),
    "train.max_batch": Probe(rsft_stage, 2),
    # WHALE, FST, stagewise and PACE: phases and the search
    "whale.weight_epochs": Probe(run, 0.5, WHALE),
    "whale.search_iterations": Probe(run, 2, WHALE),
    "whale.min_epochs": Probe(run, 0.75, ADAPTIVE),
    "whale.patience_epochs": Probe(run, 0.5, ADAPTIVE),
    "whale.window_epochs": Probe(run, 0.5, ADAPTIVE),
    "whale.max_epochs": Probe(run, 0.25, ADAPTIVE),
    "whale.min_iterations": Probe(run, 3, ADAPTIVE),
    "whale.search_patience": Probe(run, 3, ADAPTIVE),
    "whale.max_iterations": Probe(run, 1, ADAPTIVE),
    "search.candidates": Probe(run, 1, WHALE),
    "search.tasks": Probe(run, 2, WHALE),
    "pace.patience": Probe(run, 2, {"strategy": "pace", "pace.patience": 1}),
    # Harness-S
    "harness_s.proposals": Probe(run, [1], HARNESS_S),
    "harness_s.parents": Probe(coverage, 1),
    "harness_s.exact_limit": Probe(coverage, 1, {"harness_s.parents": 2}),
    "harness_s.causes_per_candidate": Probe(run, 3, HARNESS_S),
    "harness_s.voters": Probe(role_settings, 1, inert=HARNESS_S),
    "harness_s.ballot": Probe(run, 1, HARNESS_S),
    "harness_s.ranks": Probe(run, 1, HARNESS_S),
    "harness_s.rescue_k": Probe(run, 1, HARNESS_S),
    # EvoHarness-RL
    "evoharness.sft_steps": Probe(run, 0, {"strategy": "evoharness_rl", "train.action_cost": 0.5}),
    "evoharness.teacher": Probe(harness_sft, False),
    "evoharness.sft_epochs": Probe(harness_sft, 2),
    "evoharness.sft_learning_rate": Probe(harness_sft, 1e-2),
    # Harness-R1
    "harness_r1.steps": Probe(engineer_settings, 2),
    "harness_r1.episodes_per_step": Probe(engineer_settings, 2),
    "harness_r1.group": Probe(engineer_settings, 4),
    "harness_r1.sft_epochs": Probe(engineer_settings, 3),
    "harness_r1.temperature": Probe(engineer_settings, 0.5),
    "harness_r1.max_tokens": Probe(engineer_settings, 64),
    "harness_r1.max_ops": Probe(engineer_settings, 1),
    "harness_r1.as_editor": Probe(engineer_settings, True),
    "harness_r1.batch": Probe(engineer_episodes, 3),
    "harness_r1.episodes": Probe(engineer_episodes, 1),
    "harness_r1.penalty": Probe(engineer_episodes, -0.5),
    # CoEvo-RSI
    "rsi.promotion_margin": Probe(run, 1.0, RSI),
    "rsi.merge": Probe(inheritance, False),
    "rsi.density": Probe(merged, 0.9),  # None: the merge's default, 0.5
    "rsi.adapt": Probe(run, False, RSI),
}

_seen: dict[tuple, Any] = {}


def observed(observer: Callable[[dict[str, Any]], Any], over: dict[str, Any]) -> Any:
    """``observer(over)``, memoised per (observer, overrides): a base is run once for all its flips."""
    key = (observer.__name__, tuple(sorted((k, repr(v)) for k, v in over.items())))
    if key not in _seen:
        _seen[key] = observer(over)
    return _seen[key]


def test_every_key_has_a_probe_and_every_declared_key_says_so_where_it_is_declared():
    fields = keys()
    assert set(PROBES) == set(fields), ("add a probe to tests/unit/test_knobs.py for each new key (or remove a "
                                        f"stale one): {sorted(set(fields) ^ set(PROBES))}")
    for key in INERT:
        assert key in fields and "no effect" in (fields[key].description or ""), key
        assert PROBES[key].inert is not None, f"{key} is declared inert: its probe must name the condition"
    assert set(PERFORMANCE) <= set(fields)
    assert all(reason.strip() for reason in [*INERT.values(), *PERFORMANCE.values()])


@pytest.mark.parametrize("key", sorted(PROBES))
def test_flipping_a_key_changes_what_it_governs(key):
    probe = PROBES[key]
    base = observed(probe.observer, probe.base)
    flipped = observed(probe.observer, {**probe.base, key: probe.value})
    assert base != flipped, f"{key} = {probe.value!r} changed nothing observable: a silent knob"


@pytest.mark.parametrize("key", sorted(INERT))
def test_a_key_declared_inert_changes_nothing_under_its_condition(key):
    probe = PROBES[key]
    inert_observer = {"train.epsilon": grpo_stage, "train.epsilon_high": grpo_stage, "train.lora_dropout": grpo_stage,
                      "meta.temperature": run, "harness_s.voters": run}[key]
    condition = probe.inert or {}
    assert observed(inert_observer, condition) == observed(inert_observer, {**condition, key: probe.value})
