"""The papers' missing baselines on fakes (issue 22 item 5): each runs end to end and differs from its
parent strategy in the one way its paper says — sia (VACE Table 5) refines only after every weight
stage; whale_weight_only / whale_harness_only (WHALE §5) run one phase of WHALE's cumulative budget;
pace_prompt_only / pace_control_only (PACE) run one timescale; grpo_h0_rescue, random_rescue and
mixed_harness (Harness-S Table 1, Table 2, App. 8) change only whom a GRPO group runs under."""

import asyncio
from types import SimpleNamespace

import pytest
from test_harness_s import _run_harness_s
from test_meta_loop import policy, setup_run
from test_whale import SplitWordEnv, whale_run

from coevo.app.run import run_meta
from coevo.config import RunConfig
from coevo.envs.base import Task
from coevo.graphs.harness_s.baselines import mixture_positions, random_pick
from coevo.harnesses.patch import CONTROL_FIELDS, PROMPT_FIELDS
from coevo.harnesses.runtime import arun_rollout
from coevo.harnesses.spec import HarnessSpec, Prompt
from coevo.meta.context import MetaContext
from coevo.models.trajectory import Trajectory
from coevo.records import Ballot, Checkpoint, EditRecord, PoolMember
from coevo.roles.editor import OfflineEditor
from coevo.roles.proposer import OfflineProposer
from coevo.storage import Archive
from coevo.training.grpo.rollout import HarnessRollout

# -- VACE Table 5: SIA-style -----------------------------------------------------------------------


def _stage_harnesses(archive):
    """The incumbent each weight stage trained under, in round order (FakeTrainer records it)."""
    return [c.config["incumbent_id"] for c in archive.list(Checkpoint) if c.parents]


def test_sia_trains_every_stage_under_h0_then_gates_refinements_under_the_final_weights(tmp_path):
    (tmp_path / "sia").mkdir()
    (tmp_path / "vace").mkdir()
    config, ctx, archive = setup_run(tmp_path / "sia", strategy="sia")
    state = asyncio.run(run_meta(config, run_id="run-1", context=ctx, archive=archive))
    h0, final_ckpt = state["start_harness"], state["checkpoint"]
    assert [s[0] for s in ctx.trainer.stages] == [0, 1]  # B_W: rounds weight stages first
    assert _stage_harnesses(archive) == [h0, h0]  # no revision ever reached a weight stage
    assert final_ckpt == f"{state['start_checkpoint']}+r0+r1"
    assert [h.round for h in state["history"]] == [0, 1, 2, 3]
    assert all(h.weights is not None and not h.candidates for h in state["history"][:2])
    assert all(h.weights is None and h.checkpoint == final_ckpt for h in state["history"][2:])
    accepted = [d for d in state["decisions"] if d.accepted]
    assert accepted and all(d.round >= 2 for d in state["decisions"])  # gated, after the weights
    assert state["incumbent"] == accepted[-1].candidate_id and state["test"]["final"].score == 1.0

    vconfig, vctx, varchive = setup_run(tmp_path / "vace", strategy="vace")
    vstate = asyncio.run(run_meta(vconfig, run_id="run-1", context=vctx, archive=varchive))
    # VACE, its parent: the round-0 revision passes the gate and round 1's stage trains under it
    assert _stage_harnesses(varchive) == [vstate["start_harness"], vstate["decisions"][0].candidate_id]


# -- WHALE §5: single-component baselines at matched cumulative budgets ------------------------------


def test_whale_weight_only_runs_one_rsft_phase_of_whales_cumulative_weight_budget(tmp_path):
    (tmp_path / "only").mkdir()
    (tmp_path / "whale").mkdir()
    state, trainer, calls = whale_run(tmp_path / "only", "whale_weight_only", weight_epochs=1.5, search_iterations=2)
    parent, whale_trainer, _ = whale_run(tmp_path / "whale", "whale", weight_epochs=1.5, search_iterations=2)
    assert [p.kind for p in parent["phases"]] == ["weights", "harness"] * 2
    assert [p.kind for p in state["phases"]] == ["weights"]
    assert state["phases"][0].length == 3.0 and len(trainer.phases[0]) == 12  # 2 cycles x 1.5 epochs of 4 tasks
    assert sum(map(len, whale_trainer.phases)) == 12  # the same cumulative weight budget, in one phase
    assert trainer.phases[0] == [t for phase in whale_trainer.phases for t in phase]  # the same tasks, in order
    assert state["incumbent"] == state["start_harness"] and "search" not in state
    assert "val" not in calls


def test_whale_harness_only_runs_one_search_phase_of_whales_cumulative_search_budget_under_w0(tmp_path):
    (tmp_path / "only").mkdir()
    (tmp_path / "whale").mkdir()
    state, trainer, calls = whale_run(tmp_path / "only", "whale_harness_only", weight_epochs=1.5, search_iterations=2)
    parent, _, _ = whale_run(tmp_path / "whale", "whale", weight_epochs=1.5, search_iterations=2)
    assert [p.kind for p in state["phases"]] == ["harness"] and state["phases"][0].length == 4
    assert [s.iteration for s in state["search_iterations"]] == [1, 2, 3, 4]
    assert sum(p.length for p in parent["phases"] if p.kind == "harness") == 4  # WHALE's 2 searches of 2
    assert trainer.phases == [] and state["checkpoint"] == state["start_checkpoint"]  # W0 frozen
    assert state["incumbent"] != state["start_harness"]  # the search found the rule the fake policy needs
    assert state["test"]["final"].score == 1.0 and "val" not in calls


# -- PACE: single-mode baselines ---------------------------------------------------------------------


def pace_run(tmp_path, strategy):
    h0 = HarnessSpec(name="h0", prompt=Prompt(system="Answer the task.", output_format="Reply 'Final answer: X'."))
    (tmp_path / "h0.json").write_text(h0.model_dump_json())
    config = RunConfig(strategy=strategy, rounds=2, db=str(tmp_path / "run.db"), harness=str(tmp_path / "h0.json"),
                       policy="fake:words", env={"ref": "words", "n_train": 4, "n_val": 4, "n_test": 4},
                       pace={"patience": 1}, search={"candidates": 2, "tasks": 2})  # a disjoint search split
    archive = Archive(config.db)
    model = policy("help")
    ctx = MetaContext(config=config, env=SplitWordEnv(), archive=archive, policy=lambda ckpt: model,
                      proposer=OfflineProposer(editor=OfflineEditor()))
    return asyncio.run(run_meta(config, run_id="run-1", context=ctx, archive=archive)), archive


@pytest.mark.parametrize("strategy, kind, fields", [("pace_prompt_only", "prompt", list(PROMPT_FIELDS)),
                                                    ("pace_control_only", "control", list(CONTROL_FIELDS))])
def test_pace_single_mode_baselines_run_one_timescale_through_the_val_gate(tmp_path, strategy, kind, fields):
    (tmp_path / "only").mkdir()
    (tmp_path / "pace").mkdir()
    state, archive = pace_run(tmp_path / "only", strategy)
    parent, _ = pace_run(tmp_path / "pace", "pace")
    assert [p.kind for p in parent["phases"]] == ["prompt", "control"]
    assert [p.kind for p in state["phases"]] == [kind]
    assert state["phases"][0].fields == fields and state["phases"][0].stop_reason
    assert state["decisions"], "every proposal goes through the val gate"
    for edit in archive.list(EditRecord, run_id="run-1"):
        if edit.status != "rejected":
            assert all(any(op["path"].startswith(f + "/") or op["path"] == f for f in fields) for op in edit.patch)
    if kind == "prompt":  # the offline rule lives in the prompt: the prompt timescale alone finds it
        assert any(d.accepted for d in state["decisions"]) and state["test"]["final"].score == 1.0


# -- Harness-S Table 1, Table 2, App. 8 ---------------------------------------------------------------


class OptionsTrainer:
    """Records each stage's options: the rescue pool, and for every task the policy fails under the
    stage's harness, whom the stage's route sends its rescue group to; the mixture's harness ids."""

    def __init__(self, env, model, archive):
        self.env, self.model, self.archive = env, model, archive
        self.siblings, self.routed, self.mixtures = [], [], []

    async def __call__(self, checkpoint_id, spec, tasks, round, options=None):
        new = f"{checkpoint_id}+r{round}"
        trajs = [await arun_rollout(spec, self.model, self.env, t, checkpoint_id=new) for t in tasks]
        self.siblings.append([s.id for s in options.pool()])
        self.mixtures.append([s.id for s in getattr(options, "positions", ())])
        for t, traj in zip(tasks, trajs):
            if not traj.passed and getattr(options, "route", None) is not None:
                self.routed.append(await options.route(t, 4))
        self.archive.put(Checkpoint(id=new, base_model="fake", parents=[checkpoint_id],
                                                     metrics={"reward_mean": 0.0}, run_id="run-1"))
        return new, [t.model_copy(update={"id": f"{new}-{t.task_id}"}) for t in trajs]


def test_grpo_h0_rescue_rerolls_an_all_failure_group_under_h0_itself_with_no_pool(tmp_path):
    config, ctx, archive = setup_run(tmp_path, strategy="grpo_h0_rescue")
    trainer = OptionsTrainer(ctx.env, policy("help"), archive)
    ctx.trainer = trainer
    state = asyncio.run(run_meta(config, run_id="run-1", context=ctx, archive=archive))
    h0 = state["start_harness"]
    assert trainer.siblings == [[h0], [h0]]  # Harness-S's stage gets the pool's siblings
    assert trainer.routed and all(r == [h0] for r in trainer.routed)  # Harness-S routes to a sibling
    assert not archive.list(PoolMember, run_id="run-1") and not archive.list(Ballot, run_id="run-1")
    assert state["incumbent"] == h0 and state["test"]["final"].score == 0.0


def test_random_pick_is_seeded_per_task_and_round_and_covers_the_pool():
    ids = [f"h{i}" for i in range(6)]
    assert random_pick(ids, 0, 1, "t", 4) == random_pick(ids, 0, 1, "t", 4)
    draws = {tuple(random_pick(ids, 0, r, f"t{i}", 4)) for r in range(3) for i in range(10)}
    assert len(draws) > 10 and all(len(set(d)) == 4 for d in draws)
    assert {h for d in draws for h in d} == set(ids)
    assert sorted(random_pick(ids[:2], 0, 0, "t", 4)) == ["h0", "h1"]  # fewer members than K: all, cycled later


def test_random_rescue_draws_pool_members_without_asking_the_router(tmp_path):
    (tmp_path / "r").mkdir()
    (tmp_path / "h").mkdir()
    state, archive, trainer = _run_harness_s(tmp_path / "r", "random_rescue", trainer_cls=OptionsTrainer)
    h0 = state["start_harness"]
    siblings = [m.harness_id for m in archive.list(PoolMember, run_id="run-1") if m.harness_id != h0]
    assert trainer.siblings == [siblings] and trainer.routed
    assert all(set(r) <= set(siblings) and h0 not in r for r in trainer.routed)
    assert "rescue" not in {v.purpose for v in archive.list(Ballot, run_id="run-1")}  # no ballot decided a rescue
    assert "rank1" in state["test"]  # the routed test is Harness-S's
    hstate, harchive, _ = _run_harness_s(tmp_path / "h", "harness_s")
    assert "rescue" in {v.purpose for v in harchive.list(Ballot, run_id="run-1")}  # Harness-S: the router's top-K


def test_mixed_harness_mixes_h0_with_the_selected_siblings_in_every_group_and_never_rescues(tmp_path):
    state, archive, trainer = _run_harness_s(tmp_path, "mixed_harness", trainer_cls=OptionsTrainer)
    h0 = state["start_harness"]
    child = [m.harness_id for m in archive.list(PoolMember, run_id="run-1") if m.harness_id != h0]
    k = RunConfig().train.num_generations
    assert trainer.mixtures == [[h0] * (k // 2) + child * (k - k // 2)] and state["mixture"] == child
    assert trainer.siblings == [[]] and trainer.routed == []  # no rescue pool, no route
    assert "rescue" not in {v.purpose for v in archive.list(Ballot, run_id="run-1")}


def test_mixture_positions_put_half_the_group_under_h0_and_one_rollout_under_each_sibling():
    h0, *sibs = [HarnessSpec(name=n) for n in ("h0", "a", "b", "c", "d")]
    assert [s.name for s in mixture_positions(h0, sibs, 8)] == ["h0"] * 4 + ["a", "b", "c", "d"]  # DSH H0 + Top-4
    assert [s.name for s in mixture_positions(h0, sibs[:1], 4)] == ["h0", "h0", "a", "a"]
    assert [s.name for s in mixture_positions(h0, [], 4)] == ["h0"] * 4


def test_a_mixed_group_runs_each_position_under_its_harness_from_the_first_rollout():
    h0, a = HarnessSpec(name="h0"), HarnessSpec(name="a")
    tasks = [Task(id="t", env="e", split="train", prompt="t")]

    async def rollout_fn(spec, policy, env, task, seed=0, checkpoint_id=""):
        return Trajectory(task_id=task.id, split="train", harness_id=spec.id, seed=seed, reward=0.0, passed=False)

    rollout = HarnessRollout(h0, object(), tasks, policy_factory=lambda tr: None, rollout_fn=rollout_fn,
                             mixture=[h0, h0, a, a])
    rollout(["t"] * 4, SimpleNamespace(num_generations=4, state=SimpleNamespace(global_step=0),
                                       model=SimpleNamespace(eval=lambda: None)))
    assert [t.harness_id for t in rollout.trajectories] == [h0.id, h0.id, a.id, a.id]  # no rescue: 4 rollouts

