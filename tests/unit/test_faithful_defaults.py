"""Issue 22's "defaults that change an algorithm" (items 1-11), each pinned: Eq. 5's trigger on the
rewards the advantage uses, dynamic sampling off, the group size K configurable, sampled evaluation
with pass@k and mean@k intervals, RSFT on passed rollouts, CoEvo-RSI's persistent sampler, WHALE's
disjoint search split, rescue under accepted harnesses only, ungated adoption without a check, and
the gate's multiplicity rule. Item 3 (the clip with one pass) is pinned by ``test_knobs.py``
(``train.epsilon``/``epsilon_high`` at 0.05: bit-identical with ``num_iterations = 1``, acting with 2)."""

from __future__ import annotations

import asyncio
import tomllib
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from test_meta_loop import WordEnv, _run, setup_run
from test_whale import PhaseTrainer, whale_run

from coevo.config import ConfigError, RunConfig, TrainConfig, load_config
from coevo.config.train import StageConfig
from coevo.envs.base import Task
from coevo.evaluation.engine import evaluate
from coevo.evaluation.gate import bootstrap_p, decide
from coevo.harnesses.spec import HarnessSpec
from coevo.models.trajectory import ModelCall, Trajectory
from coevo.records import BudgetRecord, Checkpoint, EvaluationRecord, GatePair
from coevo.training.grpo.advantages import needs_rescue, rescued_better
from coevo.training.grpo.rollout import HarnessRollout
from coevo.training.kinds import grpo_phase
from coevo.training.rsft import accepted
from coevo.training.schedule import PersistentSampler, WeightPhase

ROOT = Path(__file__).resolve().parents[2]
DEFAULT = tomllib.loads((ROOT / "configs" / "chain_sum.toml").read_text())  # RunConfig()'s own values


def trainer_stub(k: int) -> SimpleNamespace:
    return SimpleNamespace(num_generations=k, state=SimpleNamespace(global_step=0), model=torch.nn.Linear(1, 1))


def scripted(rewards: dict[str, list[float]], full: float = 1.0):
    """A rollout function giving task ``t``'s successive rollouts the rewards ``rewards[t]`` in turn
    (``passed`` at ``full``), each with one model call carrying sampled tokens (training's seeds are
    hashed, so the order is the call order, not the seed's)."""
    made: dict[str, int] = {}

    async def rollout(spec, policy, env, task, seed=0, checkpoint_id="", **kw):
        j = made[task.id] = made.get(task.id, -1) + 1
        r = rewards[task.id][j % len(rewards[task.id])]
        call = ModelCall(input=[], output={}, prompt_token_ids=[1, 2], completion_token_ids=[3, 4],
                         logprobs=[-0.5, -0.5], seed=seed)
        return Trajectory(task_id=task.id, split="train", harness_id=spec.id, seed=seed, reward=r, passed=r >= full,
                          calls=[call], model_turns=1)

    return rollout


def tasks(*ids: str) -> list[Task]:
    return [Task(id=i, env="e", split="train", prompt=i) for i in ids]


# item 1 --------------------------------------------------------------------------------------------


def test_rescue_triggers_on_the_rewards_the_advantage_uses_not_on_passed():
    assert needs_rescue([0.0, 0.0, 0.0, 0.0]) and needs_rescue([0.5, 0.5, 0.5, 0.5])
    assert not needs_rescue([0.0, 0.5, 0.0, 0.0])  # partial-credit contrast: Eq. 6 already has a signal
    assert not needs_rescue([1.0, 1.0, 1.0, 1.0]) and not needs_rescue([0.0, 1.0, 0.0, 0.0])  # Eq. 5's max R = 1
    assert rescued_better([0.5] * 4, [0.5, 0.75]) and not rescued_better([0.0] * 4, [0.0, 0.0])
    called = []

    def rescue(task, group):
        called.append(task.id)
        return [t.model_copy(update={"reward": 1.0, "passed": True}) for t in group]

    rewards = {"contrast": [0.0, 0.5], "flat": [0.5, 0.5], "zero": [0.0, 0.0], "passed": [1.0, 0.0]}
    rollout = HarnessRollout(HarnessSpec(), object(), tasks(*rewards), rescue=rescue, policy_factory=lambda tr: None,
                             rollout_fn=scripted(rewards))
    out = rollout([t for t in rewards for _ in range(2)], trainer_stub(2))
    assert sorted(called) == ["flat", "zero"]  # the partial-credit group with contrast keeps its own rollouts
    assert out["metrics"]["rescue_rate"] == 0.5 and out["metrics"]["rescue_success"] == 1.0


# item 2 --------------------------------------------------------------------------------------------


def test_dynamic_sampling_is_off_by_default_and_draws_only_when_asked():
    assert TrainConfig().resample == 0 and DEFAULT["train"]["resample"] == 0
    rewards = {"flat": [0.0, 0.0], "spread": [0.0, 1.0]}

    def batch(resample: int) -> dict:
        rollout = HarnessRollout(HarnessSpec(), object(), tasks("flat", "spread"), policy_factory=lambda tr: None,
                                 rollout_fn=scripted(rewards), resample=resample)
        return rollout(["flat", "flat"], trainer_stub(2))["metrics"]

    assert batch(TrainConfig().resample)["resampled_groups"] == 0.0  # the flat group stays, as Eq. 5 retains it
    assert batch(1)["resampled_groups"] == 1.0 and batch(1)["resampled_retained"] == 1.0


# item 4 --------------------------------------------------------------------------------------------


def test_group_size_k_is_the_configs_num_generations():
    from coevo.training.grpo.stage import grpo_args

    cfg = TrainConfig(num_generations=8).stage(0, 0, "/tmp/coevo-k")
    assert grpo_args(cfg, "/tmp/coevo-k").num_generations == 8
    rollout = HarnessRollout(HarnessSpec(), object(), tasks("a"), policy_factory=lambda tr: None,
                             rollout_fn=scripted({"a": [0.0, 1.0]}))
    rollout(["a"] * 8, trainer_stub(8))
    assert len(rollout.trajectories) == 8 and DEFAULT["train"]["num_generations"] == 4  # stated in chain_sum.toml
    assert "8" in TrainConfig.model_fields["num_generations"].description


# item 5 --------------------------------------------------------------------------------------------


class Recorder:
    """An executor that runs rollouts in process and records each one's decoding temperature."""

    def __init__(self) -> None:
        self.temperatures: list[float] = []

    async def rollout(self, spec, model, env, task, seed=0, checkpoint_id="", split=""):
        from coevo.harnesses.runtime import arun_rollout

        self.temperatures.append(spec.decoding.temperature)
        return await arun_rollout(spec, model, env, task, seed=seed, checkpoint_id=checkpoint_id, split=split)


def test_sampled_evaluation_decodes_at_the_eval_temperature_and_reports_pass_and_mean_at_k(tmp_path):
    from rich.console import Console

    from coevo.report.terminal import summary_table

    greedy = HarnessSpec(decoding={"temperature": 0.0})
    env, model = WordEnv(), setup_run(tmp_path)[1].policy("w0")
    recorder = Recorder()
    result = asyncio.run(evaluate(greedy, "w0", env, "val", k=3, model=model, executor=recorder, temperature=0.6))
    assert recorder.temperatures == [0.6] * 12 and result.temperature == 0.6 and result.harness_id == greedy.id
    plain = asyncio.run(evaluate(greedy, "w0", env, "val", k=3, model=model))
    assert plain.evaluation_id != result.evaluation_id and plain.temperature is None
    with pytest.raises(ConfigError, match="copies of one"):
        load_config(None, {"eval.k": 3, "eval.temperature": 0.0})
    (tmp_path / "run").mkdir()
    config, ctx, archive = setup_run(tmp_path / "run", "help")
    config.eval.k, config.eval.temperature = 2, 0.5
    state = asyncio.run(_run(config, ctx, archive))
    stored = {(e.split, e.k, (e.aggregates or {}).get("temperature"))
              for e in archive.list(EvaluationRecord, run_id="run-1")}
    assert {("val", 2, 0.5), ("test", 2, 0.5)} <= stored  # the gate and the test sample; train checks do not
    assert all(t is None for s, _, t in stored if s == "train")
    final = state["test"]["final"]
    assert final.k == 2 and final.pass_estimate.n == 4
    console = Console(record=True, width=250)
    console.print(summary_table(state))
    assert f"pass@2 {final.pass_estimate}" in console.export_text()  # pass@k with its interval beside mean@k
    assert DEFAULT["eval"]["k"] == 1 and "deviation" in (ROOT / "configs" / "default.toml").read_text()


# item 6 --------------------------------------------------------------------------------------------


def test_rsft_keeps_passed_rollouts_unless_a_threshold_is_set():
    trajs = [Trajectory(task_id="t", reward=r, passed=r == 1.0) for r in (0.0, 0.6, 0.9, 1.0)]
    assert TrainConfig().rsft_threshold is None
    assert [t.reward for t in accepted(trajs, TrainConfig().rsft_threshold)] == [1.0]  # 0.9 partial credit: no
    assert [t.reward for t in accepted(trajs, 0.5)] == [0.6, 0.9, 1.0]


# item 7 --------------------------------------------------------------------------------------------


class PositionTrainer(PhaseTrainer):
    """``PhaseTrainer`` that also records where each phase's sampler started."""

    starts: list[int]

    async def __call__(self, checkpoint_id, spec, tasks, round, options):
        self.starts = [*getattr(self, "starts", []), options.phase.position]
        self.resumes = [*getattr(self, "resumes", []), options.phase.options()["resume"]]
        return await super().__call__(checkpoint_id, spec, tasks, round, options)


def test_coevo_rsi_adapt_continues_one_persistent_sampler_across_rounds(tmp_path):
    from coevo.roles.inheritor import OfflineInheritor

    config, ctx, archive = setup_run(tmp_path, strategy="coevo_rsi")
    config.train.steps, config.train.tasks_per_step = 2, 1
    ctx.inheritor = OfflineInheritor()
    ctx.trainer = PositionTrainer(archive, 1, [0.5])
    state = asyncio.run(_run(config, ctx, archive))
    ends = [c.metrics["sampler_position"] for c in archive.list(Checkpoint, run_id="run-1")
            if "sampler_position" in c.metrics]  # the adapt stages' checkpoints (not W0), oldest first
    assert ctx.trainer.starts == [0, ends[0]] and state["sampler_position"] == ends[1] > ends[0] >= 2
    assert ctx.trainer.resumes == [False, False]  # each round's SFT is its own run: a fresh AdamW
    assert WeightPhase(PersistentSampler(0), [], 0, 1).options()["resume"]  # WHALE's phases: one online run
    stream = ctx.tasks("train")  # round 1 continues the stream where round 0 stopped, passing over sealed tasks
    walked = [t.id for t in PersistentSampler(config.seed).draw(stream, 0, ends[1])]
    assert ctx.trainer.phases[0] + ctx.trainer.phases[1] == [t for t in walked if t in ctx.trainer.phases[0]
                                                             + ctx.trainer.phases[1]]


def test_a_grpo_stage_draws_its_tasks_from_the_phases_sampler():
    stream = tasks(*"abcdef")
    phase = WeightPhase(sampler=PersistentSampler(3), stream=stream, position=4, max_steps=4)
    drawn, position, cfg = grpo_phase(phase, stream, StageConfig(tasks_per_step=2, num_iterations=2))
    assert position == 8 and cfg.steps == 4 and len(drawn) == 4  # 4 steps, 2 passes each: 2 batches of 2
    assert [t.id for t in drawn] == [t.id for t in PersistentSampler(3).draw(stream, 4, 4)]
    with pytest.raises(ValueError, match="adaptive"):
        grpo_phase(WeightPhase(PersistentSampler(3), stream, 0, 2, stop=lambda r: None), stream, StageConfig())


# item 8 --------------------------------------------------------------------------------------------


def test_whale_scores_its_search_on_a_split_disjoint_from_the_weight_phases(tmp_path):
    state, trainer, _ = whale_run(tmp_path, weight_epochs=1.0, search_iterations=1, search_tasks=2)
    weights = {t for phase in trainer.phases for t in phase}
    archive = __import__("coevo.storage", fromlist=["Archive"]).Archive(str(tmp_path / "run.db"))
    searched = {t for e in archive.list(EvaluationRecord, run_id="run-1") if e.split == "train" for t in e.task_ids}
    assert weights == {"w-apple", "w-pear", "w-plum", "w-fig"} and searched == {"w-mango", "w-melon"}
    assert RunConfig().search.tasks > 0
    (tmp_path / "short").mkdir()
    with pytest.raises(ConfigError, match="search.tasks"):
        whale_run(tmp_path / "short", search_tasks=9)


# item 9 --------------------------------------------------------------------------------------------


def test_rescue_runs_under_accepted_harnesses_never_a_gate_rejected_candidate(tmp_path):
    (tmp_path / "help").mkdir()
    (tmp_path / "regress").mkdir()
    config, ctx, archive = setup_run(tmp_path / "help", "help")
    config.train.rescue = True
    state = asyncio.run(_run(config, ctx, archive))
    (_, _, first), (_, _, second) = ctx.trainer.stages
    assert first == [] and second == [state["start_harness"]]  # after the candidate was accepted, H0 is its sibling
    config, ctx, archive = setup_run(tmp_path / "regress", "regress")
    config.train.rescue, config.meta.local_check = True, False
    state = asyncio.run(_run(config, ctx, archive))
    rejected = {d.candidate_id for d in state["decisions"] if not d.accepted}
    assert rejected and all(not set(siblings) & rejected for _, _, siblings in ctx.trainer.stages)


# item 10 -------------------------------------------------------------------------------------------


def test_ungated_adopts_the_edit_with_no_check_and_no_validation(tmp_path):
    from coevo.graphs.vace.ungated import build

    assert "check" not in build().nodes and "validate" not in build().nodes
    config, ctx, archive = setup_run(tmp_path, "regress", strategy="ungated")  # local_check on: VACE would reject
    state = asyncio.run(_run(config, ctx, archive))
    assert state["incumbent"] != state["start_harness"] and not state["decisions"]
    assert state["history"][0].candidates[0].fate == "adopted"
    assert not [b for b in archive.list(BudgetRecord, run_id="run-1") if b.phase == "check"]


# item 11 -------------------------------------------------------------------------------------------


def test_several_candidates_are_gated_under_bonferroni_and_one_under_vaces_rule():
    diffs = [1, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0]
    pairs = [GatePair(task_id=f"t{i}", b=0.0, c=float(d), b_passed=False, c_passed=bool(d))
             for i, d in enumerate(diffs)]
    cfg = RunConfig().gate
    assert cfg.multiplicity == "bonferroni" and 0.025 < bootstrap_p(diffs) < 0.05
    c = sum(diffs) / len(diffs)
    assert decide(0.0, c, pairs, cfg, m=1)[0]  # one candidate: c > b (VACE Alg. 1)
    accepted, reason = decide(0.0, c, pairs, cfg, m=2)
    assert not accepted and "Bonferroni over 2 candidates" in reason  # p >= 0.05 / 2
    assert decide(0.0, c, pairs, cfg.model_copy(update={"multiplicity": "none"}), m=2)[0]
    assert RunConfig().meta.candidates == 1
