"""EvoHarness-RL's BPE harness state (issue 26): the harness actions read and update the state, the
state reaches the context only when read, experience persists across episodes of a lineage and is
consolidated (dedup, cap), the cost-aware GRPO reward, and the spec component is optional, patchable
and leaves existing harness ids unchanged."""

import asyncio
import itertools
from types import SimpleNamespace

import pytest
import torch
from harness_kit import ToyEnv, call, make_task, run
from langchain_core.messages import AIMessage

from coevo.harnesses.bpe import InMemoryExperience, apply_action, initial_state, merge_lessons, render_state
from coevo.harnesses.errors import HarnessError
from coevo.harnesses.patch import apply_patch
from coevo.harnesses.runtime import arun_rollout
from coevo.harnesses.spec import BPE, HarnessSpec, validate_spec
from coevo.harnesses.view import diff
from coevo.models.fake import ScriptedChatModel
from coevo.models.trajectory import ModelCall, Trajectory
from coevo.training.grpo.harness_cost import harness_metrics, shaped_reward
from coevo.training.grpo.rollout import HarnessRollout

BPE_SPEC = {"bpe": {}}
FINAL = AIMessage(content="Final answer: 42")


# --- the spec component -------------------------------------------------------------------------------


def test_a_spec_without_bpe_leaves_it_out_of_its_json_and_keeps_its_id():
    plain = HarnessSpec(name="h0")
    assert "bpe" not in plain.model_dump(mode="json") and '"bpe"' not in plain.canonical_json()
    assert validate_spec(plain.model_dump(mode="json")).id == plain.id
    with_bpe = validate_spec({**plain.model_dump(mode="json"), "bpe": {}})
    assert with_bpe.bpe == BPE() and with_bpe.id != plain.id
    assert validate_spec(with_bpe.model_dump(mode="json")).id == with_bpe.id


def test_bpe_is_patchable_and_validated_like_every_component():
    plain = HarnessSpec(name="h0")
    child = apply_patch(plain, [{"op": "add", "path": "/bpe", "value": {"render": "always"}}])
    assert child.bpe.render == "always" and child.parents == [plain.id]
    grand = apply_patch(child, [{"op": "replace", "path": "/bpe/costs/read", "value": 0.5}])
    assert grand.bpe.costs.read == 0.5 and "== bpe ==" in diff(child, grand)
    with pytest.raises(HarnessError) as err:
        apply_patch(child, [{"op": "replace", "path": "/bpe/costs/read", "value": -1}])
    assert "/bpe/costs/read" in str(err.value)
    with pytest.raises(HarnessError, match="/bpe/bogus"):
        validate_spec({"bpe": {"bogus": 1}})


# --- the harness actions --------------------------------------------------------------------------------


def test_the_actions_update_belief_progress_and_experience_and_read_renders_them():
    settings = BPE(max_belief=2)
    state = initial_state(["keys are under the mat"])
    state, reply = apply_action(settings, state, "bpe_update_belief", {"hypothesis": "the door is locked"})
    assert reply == "belief updated" and state["belief"] == ["the door is locked"]
    for h in ("the lamp is off", "the key is in the box"):
        state, _ = apply_action(settings, state, "bpe_update_belief", {"hypothesis": h})
    assert state["belief"] == ["the lamp is off", "the key is in the box"]  # capped: the oldest dropped
    state, _ = apply_action(settings, state, "bpe_update_progress", {"subgoal": "open door", "status": "pending"})
    before = state
    state, _ = apply_action(settings, state, "bpe_update_progress", {"subgoal": "Open  door", "status": "done"})
    assert state["progress"] == {"done": ["Open door"], "pending": []}
    assert before["progress"] == {"done": [], "pending": ["open door"]}  # the action is pure
    state, _ = apply_action(settings, state, "bpe_consolidate", {"lesson": "check the mat first"})
    assert state["experience"] == ["keys are under the mat", "check the mat first"]
    assert state["consolidated"] == ["check the mat first"]
    _, text = apply_action(settings, state, "bpe_read", {})
    assert text == render_state(state)
    assert "- the lamp is off" in text and "[done] Open door" in text and "- check the mat first" in text
    _, belief_only = apply_action(settings, state, "bpe_read", {"part": "belief"})
    assert "Belief:" in belief_only and "Experience:" not in belief_only
    state, _ = apply_action(settings, state, "bpe_update_belief", {"why": "a guess", "hypothesis": "it is 42"})
    assert state["belief"][-1] == "it is 42"  # the entry is the named argument, whatever else comes first
    for name, args in (("bpe_update_belief", {"hypothesis": "  "}), ("bpe_read", {"part": "everything"}),
                       ("bpe_update_progress", {"subgoal": "x", "status": "maybe"}), ("bpe_forget", {"x": "y"})):
        with pytest.raises(ValueError):
            apply_action(settings, state, name, args)


def test_consolidation_deduplicates_up_to_case_and_whitespace_and_keeps_the_newest():
    assert merge_lessons(["A  lesson", "b"], ["a lesson", "c", " "], cap=5) == ["b", "a lesson", "c"]
    assert merge_lessons(["a", "b", "c"], ["d"], cap=2) == ["c", "d"]
    with pytest.raises(ValueError):
        merge_lessons([], ["a"], cap=0)


def test_the_state_enters_the_context_only_when_read():
    script = [call("bpe_update_belief", hypothesis="the number is 42"), call("lookup", key="x"),
              call("bpe_read"), FINAL]
    r = run(BPE_SPEC, script)
    assert r.state["answer"] == "42"
    assert all("the number is 42" not in r.seen_text(i) for i in (1, 2))  # written, never shown unread
    assert "Belief:\n- the number is 42" in r.seen_text(3)  # shown as bpe_read's output
    assert [a["action"] for a in r.state["harness_actions"]] == ["update_belief", "read"]
    assert [a["turn"] for a in r.state["harness_actions"]] == [1, 3]
    assert r.state["env_actions"] == 1  # harness actions are not env actions
    assert r.log == [("lookup", {"key": "x"})]


def test_render_always_shows_the_state_after_every_turn():
    r = run({"bpe": {"render": "always"}}, [call("bpe_update_progress", subgoal="find it", status="pending"),
                                            call("lookup", key="x"), FINAL])
    assert "[pending] find it" in r.seen_text(1) and "[pending] find it" in r.seen_text(2)


def test_without_bpe_the_actions_are_unknown_tools():
    r = run({}, [call("bpe_read"), FINAL])
    assert r.state["violations"] == 1 and "unknown tool 'bpe_read'" in r.seen_text(1)
    assert not r.state.get("harness_actions")


def test_experience_persists_across_episodes_of_a_lineage():
    spec, env, store = validate_spec(BPE_SPEC), ToyEnv(), InMemoryExperience()
    first = ScriptedChatModel(script=[call("bpe_consolidate", lesson="the answer is always 42"), FINAL])
    traj = asyncio.run(arun_rollout(spec, first, env, make_task(), experience=store.lessons("h0")))
    assert traj.harness_state["consolidated"] == ["the answer is always 42"]
    assert traj.harness_cost == pytest.approx(spec.bpe.costs.consolidate) and traj.harness_writes == 1
    store.consolidate("h0", traj.harness_state["consolidated"], cap=spec.bpe.max_experience)
    store.consolidate("h0", ["The answer is  always 42"], cap=spec.bpe.max_experience)  # a duplicate
    assert store.lessons("h0") == ["The answer is always 42"] and store.lessons("other") == []
    second = ScriptedChatModel(script=[call("bpe_read", part="experience"), FINAL])
    traj2 = asyncio.run(arun_rollout(spec, second, env, make_task(), experience=store.lessons("h0")))
    assert "- The answer is always 42" in "\n".join(str(m.content) for m in second.calls[1])
    assert "always 42" not in "\n".join(str(m.content) for m in second.calls[0])  # only once read
    assert traj2.harness_reads == 1 and traj2.passed


# --- cost-aware GRPO ----------------------------------------------------------------------------------


def _traj(reward, actions=()):
    acts = [{"action": a, "kind": "read" if a == "read" else "write", "cost": c, "turn": 1, "error": ""}
            for a, c in actions]
    call = ModelCall(input=[], output={}, prompt_token_ids=[1, 2], completion_token_ids=[3, 4], logprobs=[-0.5, -0.5])
    return Trajectory(task_id="t", reward=reward, passed=reward > 0, harness_actions=acts, model_turns=2, calls=[call],
                      harness_state={"belief": ["abcd"], "progress": {"done": [], "pending": []},
                                     "experience": [], "consolidated": []})


def test_the_cost_aware_reward_is_the_task_reward_less_lambda_times_the_action_cost():
    t = _traj(1.0, [("read", 0.05), ("update_belief", 0.1)])
    assert t.harness_cost == pytest.approx(0.15) and t.reward == 1.0  # the task reward stays apart
    assert shaped_reward(t, 2.0) == pytest.approx(0.7) and shaped_reward(t, 0.0) == 1.0
    with pytest.raises(ValueError, match="action_cost"):
        shaped_reward(t, -1.0)
    m = harness_metrics([t, _traj(0.0)], action_cost=2.0)
    assert m["task_reward"] == 0.5 and m["harness_cost"] == pytest.approx(0.075)
    assert m["shaped_reward"] == pytest.approx(0.35) and m["action_rate"] == pytest.approx(2 / 4)
    assert m["harness_reads"] == 0.5 and m["harness_writes"] == 0.5 and m["state_chars"] == 4.0


@pytest.mark.parametrize("action_cost, contrast", [(0.0, 0.0), (1.0, 1.0)])
def test_grpo_advantages_see_the_action_cost_only_when_lambda_is_set(action_cost, contrast):
    made = itertools.count()

    async def rollout(spec, policy, env, task, seed=0, checkpoint_id=""):  # all pass; every other one pays a read
        return _traj(1.0, [("read", 0.05)] * (next(made) % 2))

    env = ToyEnv()
    trainer = SimpleNamespace(num_generations=4, state=SimpleNamespace(global_step=0), model=torch.nn.Linear(1, 1))
    hr = HarnessRollout(HarnessSpec(), env, env.tasks("train"), policy_factory=lambda tr: None, rollout_fn=rollout,
                        action_cost=action_cost)
    m = hr(["toy-1"] * 4, trainer)["metrics"]
    assert m["nonzero_std_rate"] == contrast
    assert m["task_reward"] == 1.0 and m["harness_cost"] == pytest.approx(0.025)
    assert m["shaped_reward"] == pytest.approx(1.0 - action_cost * 0.025)


def test_a_cost_aware_grpo_stage_learns_from_the_cost_alone_and_records_both_parts(tmp_path):
    """Every rollout solves its task; half also write a belief. With lambda > 0 the cost is the only
    contrast, so the stage has a learning signal on the same GRPO objective, and the checkpoint's
    metrics keep task reward, harness cost and the shaped reward apart."""
    from training_kit import LookupEnv, belief_policy, tiny_llama_checkpoint

    from coevo.training.grpo.stage import train_grpo

    spec, policy = HarnessSpec(parser={"mode": "python_call"}, bpe={}), belief_policy()
    env = LookupEnv()
    cfg = {"steps": 1, "learning_rate": 1e-2, "output_dir": str(tmp_path / "runs"), "action_cost": 1.0}
    new, trajs = train_grpo(tiny_llama_checkpoint(tmp_path / "base"), spec, env, env.tasks(), cfg,
                            policy_factory=lambda tr: policy)
    assert all(t.passed for t in trajs) and sorted(t.harness_writes for t in trajs) == [0] * 4 + [1] * 4
    m = new.metrics
    assert m["reward_mean"] == 1.0 and m["task_reward"] == 1.0
    assert m["harness_cost"] == pytest.approx(spec.bpe.costs.update_belief / 2)
    assert m["shaped_reward"] == pytest.approx(1.0 - spec.bpe.costs.update_belief / 2)
    assert m["nonzero_std_rate"] == 1.0 and m["effective_token_share"] > 0 and m["loss"] is not None
    assert m["history"][0]["harness_writes"] == 0.5 and new.config["action_cost"] == 1.0


def test_the_editors_patch_schema_adds_bpe_whole_when_absent_and_edits_its_fields_when_set():
    import jsonschema

    from coevo.harnesses.patch_schema import patch_schema

    def reply(patch):
        return {"rationale": "r", "patch": patch}

    plain = HarnessSpec()
    schema = patch_schema(plain)
    add = [{"op": "add", "path": "/bpe", "value": {"render": "always", "costs": {"read": 0.2}}}]
    jsonschema.validate(reply(add), schema)
    with pytest.raises(jsonschema.ValidationError):  # /bpe does not exist yet: no replace is offered
        jsonschema.validate(reply([{"op": "replace", "path": "/bpe/max_belief", "value": 3}]), schema)
    child = apply_patch(plain, add)
    edit = [{"op": "replace", "path": "/bpe/max_belief", "value": 3}]
    jsonschema.validate(reply(edit), patch_schema(child))
    assert apply_patch(child, edit).bpe.max_belief == 3


# --- supervised harness fine-tuning -------------------------------------------------------------------


def test_the_harness_sft_rows_hold_only_the_policy_tokens_of_bpe_using_turns():
    from coevo.training.grpo.harness_cost import bpe_turns, harness_sft_rows

    spec, env = validate_spec(BPE_SPEC), ToyEnv()
    model = ScriptedChatModel(script=[call("lookup", key="x"), call("bpe_update_belief", hypothesis="it is 42"),
                                      call("bpe_read", part="nothing"), FINAL], with_tokens=True)
    traj = asyncio.run(arun_rollout(spec, model, env, make_task()))
    assert bpe_turns(traj) == {2}  # turn 3's read failed (bad part): not a correct use of the action
    rows = harness_sft_rows(traj)
    trained = [tok for r in rows for tok, m in zip(r.completion_ids, r.env_mask) if m]
    assert trained == traj.calls[1].completion_token_ids
    assert sum(r.policy_tokens for r in rows) < sum(len(c.completion_token_ids) for c in traj.calls)
    plain = asyncio.run(arun_rollout(spec, ScriptedChatModel(script=[FINAL], with_tokens=True), env, make_task()))
    assert harness_sft_rows(plain) == []


def test_a_harness_sft_stage_runs_rsft_on_bpe_turns_whatever_the_algorithm(tmp_path, monkeypatch):
    from training_kit import LookupEnv

    from coevo.config import RunConfig
    from coevo.models.checkpoint import Checkpoint
    from coevo.storage import Archive
    from coevo.training import rsft
    from coevo.training.evoharness.sft import HarnessSFT
    from coevo.training.grpo.harness_cost import harness_sft_rows
    from coevo.training.stage import StageTrainer

    calls = []

    def stage(checkpoint, spec, env, tasks, config, archive=None, *, run_id=None, rows_fn=None, rollout_fn=None):
        calls.append((config.steps, config.epochs, config.learning_rate, rows_fn, rollout_fn))
        new = Checkpoint(id="ck-sft", base_model="base", parents=[checkpoint.id], run_id=run_id)
        archive.put(new)
        return new, []

    monkeypatch.setattr(rsft, "train_rsft", stage)
    config = RunConfig(out_dir=str(tmp_path), train={"algorithm": "grpo", "steps": 5, "learning_rate": 3e-4},
                       evoharness={"teacher": False, "sft_epochs": 3, "sft_learning_rate": 1e-3})
    env = LookupEnv()
    options = HarnessSFT(rounds=2, experience=("a lesson",))
    with Archive(tmp_path / "a.db") as archive:
        archive.put(Checkpoint(id="ck0", base_model="base"))
        trainer = StageTrainer(config, env, archive, "r1")
        new_id, _ = asyncio.run(trainer("ck0", HarnessSpec(bpe={}), env.tasks(), 0, options))
        taught = StageTrainer(RunConfig(out_dir=str(tmp_path)), env, archive, "r1")  # teacher: the default
        with pytest.raises(TypeError, match="neither walkthrough.*nor reveal.*evoharness.teacher = false"):
            asyncio.run(taught("ck0", HarnessSpec(bpe={}), env.tasks(), 0, options))
    ((steps, epochs, lr, rows_fn, rollout_fn),) = calls  # the teacher's refusal came before the stage
    assert new_id == "ck-sft" and steps == 2 and rows_fn is harness_sft_rows and rollout_fn is not None
    assert (epochs, lr) == (3, 1e-3)  # evoharness's SFT settings, not train's (which GRPO keeps)


def test_eq5_rescue_reads_task_success_while_the_advantages_read_the_cost_shaped_reward():
    """Under cost-aware GRPO the rescue trigger stays on the task reward (``needs_rescue``'s doc says
    why): a group that passed everywhere at one cost (shaped rewards equal and < 1) is not rescued; a
    group that failed everywhere is rescued although its action costs differ (a shaped-only contrast);
    the rescue group's advantages are then computed on its shaped rewards."""
    from training_kit import LookupEnv

    made, rescued = itertools.count(), []

    async def rollout(spec, policy, env, task, seed=0, checkpoint_id=""):
        n = next(made)
        if task.id == "lookup-a":  # every rollout passes and pays one read
            return _traj(1.0, [("read", 0.05)]).model_copy(update={"task_id": task.id})
        return _traj(0.0, [("read", 0.05)] * (n % 2)).model_copy(update={"task_id": task.id})

    def rescue(task, group):
        rescued.append(task.id)
        return [_traj(1.0, [("read", 0.05)] * (j % 2)).model_copy(update={"task_id": task.id}) for j in range(4)]

    env = LookupEnv()
    trainer = SimpleNamespace(num_generations=4, state=SimpleNamespace(global_step=0), model=torch.nn.Linear(1, 1))
    hr = HarnessRollout(HarnessSpec(), env, env.tasks(), rescue=rescue, policy_factory=lambda tr: None,
                        rollout_fn=rollout, action_cost=1.0)
    out = hr(["lookup-a"] * 4 + ["lookup-b"] * 4, trainer)
    assert rescued == ["lookup-b"]
    advantages = {x: a for x, a in zip(out["task_index"], out["advantages"])}
    assert advantages[0] == 0.0  # the all-pass group: equal shaped rewards, no signal, and no rescue
    by_group = [a for x, a in zip(out["task_index"], out["advantages"]) if x == 1]
    assert max(by_group) > 0 > min(by_group)  # the rescue group: cost-shaped contrast (1.0 vs 0.95)
