"""Group diversity owned by training (issue 29, item 6), with a scripted policy that records the seed
of every model call it gets.

Pins: every rollout of a GRPO step samples with its own seed — across a group's rollouts, across the
step's tasks, across steps, in rescue groups and RSFT rounds — whatever the harness's
``decoding.seed`` says; the seed a trajectory and each of its calls record is the one the model was
called with; the rows of one batched ``generate`` call are seeded apart; and a fixed harness seed is
a warning in ``coevo harness validate`` and the ``check`` node.
"""

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from training_kit import LookupEnv, lookup_policy, tiny_llama_checkpoint

from coevo.config import RunConfig
from coevo.harnesses.engine import call_seed
from coevo.harnesses.runtime import arun_rollout
from coevo.harnesses.spec import HarnessSpec
from coevo.meta.state import Candidate
from coevo.models.fake import ScriptedChatModel
from coevo.training.grpo.rollout import HarnessRollout, sibling_rescue

HOOK = {"nudge": {"event": "after_tool", "condition": "always", "action": "inject", "message": "HOOK-TEXT"}}


class SeedRecorder(ScriptedChatModel):
    """``ScriptedChatModel`` that records the ``seed`` keyword of every call it gets, in call order."""

    seeds: list[Any] = []

    def _next_seeded(self, messages, kwargs):
        self.seeds.append(kwargs.get("seed"))
        return self._next(messages)

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        return self._next_seeded(messages, kwargs)

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):
        return self._next_seeded(messages, kwargs)


def recording_policy(right_every: int = 2, hint: str | None = None) -> SeedRecorder:
    return SeedRecorder(script=lookup_policy(right_every, hint).script, with_tokens=True, seeds=[])


def fixed_seed_spec(**extra) -> HarnessSpec:
    return HarnessSpec(parser={"mode": "python_call"}, hooks=HOOK, decoding={"temperature": 1.0, "seed": 42}, **extra)


def trainer(k=4, step=0):
    return SimpleNamespace(num_generations=k, state=SimpleNamespace(global_step=step), model=torch.nn.Linear(1, 1))


def test_a_step_seeds_every_rollout_apart_across_a_group_and_across_tasks_whatever_the_harness_fixes():
    env, policy = LookupEnv(keys=("a", "b", "c")), recording_policy()
    rollout = HarnessRollout(fixed_seed_spec(), env, env.tasks(), policy_factory=lambda tr: policy, max_concurrency=1)
    rollout([t.id for t in env.tasks() for _ in range(4)], trainer())
    trajs = rollout.trajectories
    assert len(trajs) == 12 and len({t.seed for t in trajs}) == 12  # 4 per group x 3 tasks, no two alike
    firsts = [t.calls[0].seed for t in trajs]
    assert len(set(firsts)) == 12, "with the harness's seed 42 every rollout's first call sampled one seed"
    assert 42 not in {t.seed for t in trajs} and call_seed(42, 0) not in firsts
    rollout([t.id for t in env.tasks() for _ in range(4)], trainer(step=1))
    assert len({t.seed for t in rollout.trajectories}) == 24  # the next step samples afresh too


def test_the_seed_a_trajectory_and_its_calls_record_is_the_seed_the_model_was_called_with():
    env, policy = LookupEnv(), recording_policy()
    rollout = HarnessRollout(fixed_seed_spec(), env, env.tasks(), policy_factory=lambda tr: policy, max_concurrency=1)
    rollout([t.id for t in env.tasks() for _ in range(4)], trainer())
    recorded = [c.seed for t in rollout.trajectories for c in t.calls]
    assert recorded == policy.seeds and len(recorded) == 16  # two calls per rollout, in rollout order
    assert all(c.seed == call_seed(t.seed, i) for t in rollout.trajectories for i, c in enumerate(t.calls))
    # outside training a harness's fixed seed is what samples, and each call records that, not the rollout's seed
    evaluated = recording_policy()
    traj = asyncio.run(arun_rollout(fixed_seed_spec(), evaluated, env, env.tasks()[0], seed=3))
    assert traj.seed == 3 and [c.seed for c in traj.calls] == evaluated.seeds == [call_seed(42, 0), call_seed(42, 1)]


def test_rescue_groups_sample_with_seeds_of_their_own_in_every_step():
    env = LookupEnv(keys=("a", "b"))
    sibling = fixed_seed_spec(prompt={"system": "HINT: answer it."})
    policy = recording_policy(right_every=2, hint="HINT")  # H0 never right: both groups are rescued
    rollout = HarnessRollout(fixed_seed_spec(), env, env.tasks(), rescue=sibling_rescue([sibling], env, seed=5),
                             policy_factory=lambda tr: policy, max_concurrency=1)
    rollout([t.id for t in env.tasks() for _ in range(4)], trainer())
    rollout([t.id for t in env.tasks() for _ in range(4)], trainer(step=1))
    rescued = [t for t in rollout.trajectories if t.harness_id != rollout.spec.id]
    assert len(rescued) == 16 and len({t.seed for t in rollout.trajectories}) == 32
    assert len({t.calls[0].seed for t in rollout.trajectories}) == 32


def test_an_rsft_round_seeds_every_rollout_apart_across_tasks_and_rounds(tmp_path):
    from coevo.training.rsft import train_rsft

    env, policy = LookupEnv(keys=("a", "b")), recording_policy(right_every=1)
    cfg = {"steps": 2, "tasks_per_step": 2, "num_generations": 3, "minibatch_size": 6, "output_dir": str(tmp_path)}
    _, trajs = train_rsft(tiny_llama_checkpoint(tmp_path / "base"), fixed_seed_spec(), env, env.tasks(), cfg,
                          policy_factory=lambda model, tok: policy)
    assert len(trajs) == 12 and len({t.seed for t in trajs}) == 12
    assert [c.seed for t in trajs for c in t.calls] == [call_seed(t.seed, i) for t in trajs for i in range(2)]
    assert sorted(policy.seeds) == sorted(c.seed for t in trajs for c in t.calls)


def test_the_rows_of_a_step_s_one_generate_call_are_each_seeded_with_their_own_rollout_s_seed(tmp_path, monkeypatch):
    """The weight stage decodes a step's rollouts in one batched call (issue 24): the decoding loop
    seeds each row's generator from that row's request, so the rows sample apart."""
    from training_kit import NamingEnv, tiny_chat_checkpoint

    import coevo.models.decode as decode
    from coevo.training.grpo.rollout import LivePolicy
    from coevo.training.grpo.stage import train_grpo

    batches = []

    class Recording(decode.RowSampler):
        def __init__(self, requests, device, rng):
            batches.append([r.seed for r in requests])
            super().__init__(requests, device, rng)

    monkeypatch.setattr(decode, "RowSampler", Recording)
    ckpt = tiny_chat_checkpoint(tmp_path / "base")
    env = NamingEnv()
    spec = HarnessSpec(budget={"max_output_tokens": 6}, decoding={"temperature": 1.0, "seed": 42})
    sampler = LivePolicy()
    _, trajs = train_grpo(ckpt, spec, env, env.tasks(), {"steps": 1, "resample": 0, "output_dir": str(tmp_path)},
                          policy_factory=sampler)
    assert sampler.policy.engine.batch_sizes == [8] and len(batches) == 1
    assert len(set(batches[0])) == 8 and sorted(batches[0]) == sorted(t.calls[0].seed for t in trajs)
    assert len({tuple(t.calls[0].completion_token_ids) for t in trajs}) > 1  # the rows sampled apart


def test_harness_validate_warns_about_a_fixed_seed(tmp_path):
    from typer.testing import CliRunner

    from coevo.cli.app import app

    fixed, free = tmp_path / "fixed.json", tmp_path / "free.json"
    fixed.write_text(fixed_seed_spec().model_dump_json())
    free.write_text(HarnessSpec().model_dump_json())
    out = CliRunner().invoke(app, ["harness", "validate", str(fixed)], env={"COLUMNS": "200"})
    assert out.exit_code == 0 and "valid" in out.output
    assert "warning" in out.output and "/decoding/seed" in out.output and "fixed at 42" in out.output
    clean = CliRunner().invoke(app, ["harness", "validate", str(free)], env={"COLUMNS": "200"})
    assert clean.exit_code == 0 and "warning" not in clean.output


def test_the_check_node_passes_a_fixed_seed_candidate_with_a_warning_recorded_and_logged():
    from coevo.nodes.refine import check_one

    specs = {"h0": HarnessSpec(), "h1": fixed_seed_spec()}
    logged = []
    config = RunConfig()
    config.meta.smoke_tasks, config.meta.local_check = 0, False
    ctx = SimpleNamespace(config=config, spec=specs.__getitem__, tasks=lambda split, ids=None: [],
                          log=lambda topic, message: logged.append((topic, message)))
    cand = Candidate(id="c1", direction="d", parent_id="h0", spec_id="h1")
    assert asyncio.run(check_one(ctx, {}, cand, None, [])) == ""
    assert len(cand.checks.warnings) == 1 and "/decoding/seed: fixed at 42" in cand.checks.warnings[0]
    assert logged and logged[0][0] == "check" and "c1: warning /decoding/seed" in logged[0][1]
    plain = Candidate(id="c0", direction="d", parent_id="h1", spec_id="h0")
    asyncio.run(check_one(ctx, {}, plain, None, []))
    assert plain.checks.warnings == []


@pytest.mark.parametrize("parts", [(0, "group", 0, "t", 0), (1, "draw", 0, 2, "t", 3)])
def test_rollout_seeds_are_pure_and_fit_every_backend(parts):
    from coevo.training.grpo.seeds import rollout_seed

    assert rollout_seed(7, *parts) == rollout_seed(7, *parts) != rollout_seed(8, *parts)
    assert 0 <= rollout_seed(7, *parts) < 2**31
