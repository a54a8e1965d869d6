"""Harness-R1 (issue 27) with fakes: the edit environment's reward compares the patched and unpatched
reruns on the same tasks and seeds, invalid patches get the stated penalty, no val/test task reaches
the engineer, cold-start SFT data comes only from accepted edits, and the engineer trains with the
target's GRPO stage (tiny random Llama, scripted engineer)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from safetensors.torch import load_file
from training_kit import tiny_chat_checkpoint, tiny_llama_checkpoint

from coevo.envs.base import Task
from coevo.harnesses.spec import HarnessSpec
from coevo.models.fake import ScriptedChatModel
from coevo.models.trajectory import Trajectory
from coevo.records import EditRecord, GateDecision, HarnessRecord
from coevo.storage import Archive
from coevo.training.harness_r1.edit_env import PENALTY, EditEnv, EditEpisode, SplitLeakError
from coevo.training.harness_r1.engineer import EngineerRollout, episode_task, train_engineer_grpo, train_engineer_sft
from coevo.training.harness_r1.engineer_data import accepted_examples, reply_text

RULE = [{"op": "add", "path": "/prompt/rules/show_work", "value": {"slot": "output_format",
                                                                  "text": "Write the final answer after 'Answer:'."}}]
GOOD = json.dumps({"rationale": "state the answer", "patch": RULE})


def tasks(split: str = "train", n: int = 3) -> list[Task]:
    return [Task(id=f"{split}-{i}", env="toy", split=split, prompt=f"what is {i}+{i}?") for i in range(n)]


def failure(task: Task, harness_id: str = "", passed: bool = False) -> Trajectory:
    return Trajectory(task_id=task.id, env="toy", split=task.split, harness_id=harness_id, final_answer="7",
                      reward=float(passed), passed=passed, stop_reason="final_answer",
                      score_detail={"expected": "SECRET", "public": {"error": "wrong value"}},
                      messages=[{"type": "ai", "data": {"content": "It is 7"}}])


class FakeTarget:
    """A frozen target: each task passes under a spec with the rule and on odd seeds under any spec
    (rerun noise the control takes out); records every rerun (spec id, task ids, seed)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str], int]] = []

    async def __call__(self, spec: HarnessSpec, batch, seed: int) -> list[float]:
        self.calls.append((spec.id, [t.id for t in batch], seed))
        ruled = "show_work" in spec.prompt.rules
        return [float(ruled or (seed + i) % 2 == 1) for i in range(len(batch))]


@pytest.fixture
def episode() -> EditEpisode:
    spec = HarnessSpec()
    batch = tasks()
    return EditEpisode.of_failures("ep-0", spec, [failure(t, spec.id) for t in batch], {t.id: t for t in batch}, seed=5)


def test_reward_is_patched_minus_unpatched_rerun_on_the_same_tasks_and_seed(episode):
    target = FakeTarget()
    env = EditEnv(target)

    async def two():
        return await asyncio.gather(env.outcome(episode, GOOD), env.outcome(episode, GOOD))

    first, second = asyncio.run(two())
    # under seed 5: tasks 0 and 2 pass by noise unpatched (2/3); the rule makes all pass (3/3)
    assert first.valid and first.patched == 1.0 and first.unpatched == pytest.approx(2 / 3)
    assert first.reward == pytest.approx(1 / 3) and second.reward == first.reward
    control = [c for c in target.calls if c[0] == episode.spec.id]
    patched = [c for c in target.calls if c[0] == first.child.id]
    assert len(control) == 1  # the noise control runs once per episode and seed, shared by the group
    assert len(patched) == 2
    assert {(tuple(ids), seed) for _, ids, seed in target.calls} == {(("train-0", "train-1", "train-2"), 5)}


@pytest.mark.parametrize("reply, why", [
    ("not json", "does not parse"),
    (json.dumps({"rationale": "x", "patch": []}), "does not parse"),
    (json.dumps({"rationale": "x", "patch": [{"op": "replace", "path": "/nope", "value": 1}]}), "does not apply"),
    (json.dumps({"rationale": "x", "patch": [{"op": "add", "path": "/hooks/h", "value": {
        "event": "after_model", "condition": "no_such_condition", "action": "warn", "message": "m"}}]}),
     "fails its check"),
    (json.dumps({"rationale": "x", "patch": [{"op": "replace", "path": "/name", "value": "harness"}]}),
     "no-op: the patch leaves the harness unchanged"),
])
def test_invalid_patch_gets_the_penalty_and_no_rerun(episode, reply, why):
    target = FakeTarget()
    out = asyncio.run(EditEnv(target, penalty=-0.5).outcome(episode, reply))
    assert not out.valid and out.reward == -0.5 and why in out.reason
    assert target.calls == [] and out.patched is None and out.child is None
    assert asyncio.run(EditEnv(FakeTarget()).outcome(episode, reply)).reward == PENALTY == -1.0


def test_no_val_or_test_task_reaches_the_engineer():
    spec = HarnessSpec()
    with pytest.raises(SplitLeakError, match="val"):
        EditEpisode("e", spec, tasks("val"))
    mixed = tasks() + tasks("test", 1)
    with pytest.raises(SplitLeakError, match="test"):
        EditEpisode.of_failures("e", spec, [failure(t) for t in mixed], {t.id: t for t in mixed}, seed=1)
    with pytest.raises(SplitLeakError, match="outside its train batch"):
        EditEpisode("e", spec, tasks(), evidence=[{"task_id": "val-0"}])
    train = tasks()
    ep = EditEpisode.of_failures("e", spec, [failure(t) for t in train], {t.id: t for t in train}, seed=1)
    prompt = episode_task(ep).prompt
    assert "SECRET" not in prompt and "wrong value" in prompt and "what is 1+1?" in prompt
    assert "val-" not in prompt and "test-" not in prompt
    with pytest.raises(SplitLeakError):  # a rerun is refused val tasks too
        asyncio.run(EditEnv(FakeTarget())._run(spec, tasks("val"), 0))


def _archive_with_edits(path: Path) -> tuple[Archive, HarnessSpec]:
    archive = Archive(path)
    parent = HarnessSpec()
    children = {name: HarnessSpec(prompt={"rules": {name: {"text": "r"}}}) for name in ("kept", "gated_out", "ungated")}
    train = tasks()
    archive.put(*train, *tasks("val"))
    archive.put(HarnessRecord.of(parent, run_id="r"), *(HarnessRecord.of(c, [parent.id], run_id="r")
                                                        for c in children.values()))
    archive.add_trajectories([failure(t, parent.id) for t in train] + [failure(train[0], parent.id, passed=True)]
                             + [failure(t, parent.id) for t in tasks("val")], None, "r")
    for name, child in children.items():
        archive.put(EditRecord(id=f"edit-{name}", run_id="r", parent_id=parent.id, child_id=child.id, status="checked",
                               rationale=f"why {name}", direction="format@toy",
                               patch=[{"path": f"/prompt/rules/{name}", "value": {"text": "r"}, "op": "add"}]))
    archive.put(GateDecision(id="g1", run_id="r", candidate_id=children["kept"].id, accepted=True),
                GateDecision(id="g2", run_id="r", candidate_id=children["gated_out"].id, accepted=False))
    return archive, parent


def test_sft_data_comes_only_from_accepted_edits_with_train_evidence(tmp_path):
    archive, parent = _archive_with_edits(tmp_path / "a.db")
    with archive:
        (example,) = accepted_examples(archive)
    assert example.edit_id == "edit-kept" and example.gate_id == "g1"
    assert json.loads(example.reply) == {"rationale": "why kept", "patch": [
        {"op": "add", "path": "/prompt/rules/kept", "value": {"text": "r"}}]}
    op = {"path": "/prompt/rules/kept", "value": {"text": "r"}, "op": "add"}
    assert example.reply == reply_text("why kept", [op])
    assert "train-0" in example.user and "train-2" in example.user and "format@toy" in example.user
    assert "val-" not in example.user and "SECRET" not in example.user and "wrong value" in example.user
    assert "gated_out" not in example.user + example.reply and "ungated" not in example.reply


def test_sft_on_accepted_edits_trains_an_adapter(tmp_path, monkeypatch):
    from coevo.training import memory

    released = []
    monkeypatch.setattr(memory, "release_freed_memory", lambda: released.append(1) or True)
    archive, _ = _archive_with_edits(tmp_path / "a.db")
    ckpt = tiny_chat_checkpoint(tmp_path / "base")
    with archive:
        examples = accepted_examples(archive)
        new = train_engineer_sft(ckpt, examples, {"epochs": 2, "learning_rate": 1e-2, "minibatch_size": 1,
                                                   "output_dir": str(tmp_path / "runs")}, archive=archive)
    assert new.metrics["examples"] == 1 and new.metrics["steps"] == 2 and new.parents == ["ckpt-tiny"]
    assert new.config["edits"] == ["edit-kept"]
    weights = load_file(str(Path(new.adapter_path) / "adapter_model.safetensors"))
    assert any(v.abs().max() > 0 for k, v in weights.items() if "lora_B" in k)
    with pytest.raises(ValueError, match="no example"):
        train_engineer_sft(ckpt, [], {})
    assert released == [1, 1]  # the engineer's stages hand their freed memory back too, failed or not


def test_engineer_grpo_trains_on_its_patch_rewards_through_the_target_trainer(tmp_path, episode):
    ckpt = tiny_llama_checkpoint(tmp_path / "base")
    replies = iter([GOOD, "not json"] * 8)
    engineer = ScriptedChatModel(script=[lambda messages: next(replies)], with_tokens=True)
    target = FakeTarget()
    second = EditEpisode("ep-1", episode.spec, episode.tasks, episode.evidence, seed=6)
    cfg = {"steps": 2, "tasks_per_step": 2, "num_generations": 2, "learning_rate": 1e-2,
           "output_dir": str(tmp_path / "runs")}
    new, trajs, rollout = train_engineer_grpo(ckpt, [episode, second], EditEnv(target), cfg,
                                              policy_factory=lambda trainer: engineer)
    assert len(trajs) == 8 and sorted(t.score_detail["valid"] for t in trajs) == [False] * 4 + [True] * 4
    assert {t.reward for t in trajs if not t.score_detail["valid"]} == {PENALTY}
    # seed 6: tasks 1 passes by noise (1/3), the rule makes all pass: +2/3; seed 5: +1/3
    assert sorted(round(t.reward, 4) for t in trajs if t.score_detail["valid"]) == [0.3333] * 2 + [0.6667] * 2
    assert new.config["stage"] == "engineer_grpo"  # told apart from the target's stages (the report's train curve)
    assert new.metrics["steps"] == 2 and new.metrics["history"][0]["reward"] == pytest.approx(
        sum(t.reward for t in trajs[:4]) / 4)
    assert len(rollout.outcomes) == 8 and all(t.calls[0].completion_token_ids for t in trajs)
    assert sum(c[0] == episode.spec.id for c in target.calls) == 2  # one control per episode, kept across steps
    weights = load_file(str(Path(new.adapter_path) / "adapter_model.safetensors"))
    assert any(v.abs().max() > 0 for k, v in weights.items() if "lora_B" in k)


def test_engineer_rollout_decodes_under_the_episode_patch_schema(episode):
    seen = {}

    class Recording(ScriptedChatModel):
        async def ainvoke(self, messages, **kwargs):
            seen.update(kwargs)
            return await super().ainvoke(messages, **kwargs)

    rollout = EngineerRollout(EditEnv(FakeTarget()), [episode], max_tokens=99, max_ops=1)
    traj = asyncio.run(rollout(HarnessSpec(decoding={"temperature": 0.7}), Recording(script=[GOOD]), None,
                               episode_task(episode), seed=11))
    schema = seen["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["patch"]["maxItems"] == 1 and seen["seed"] == 11 and seen["max_tokens"] == 99
    assert seen["temperature"] == 0.7 and traj.passed and traj.split == "train" and traj.task_id == "ep-0"


HELPS = json.dumps({"rationale": "name the function", "patch": [
    {"op": "replace", "path": "/prompt/system", "value": "Answer the task. Call exactly the function asked for."}]})


def _harness_r1_run(tmp_path, reply=HELPS, budget=0, **harness_r1):
    from test_equal_spend import SMALL_STAGE
    from test_meta_loop import setup_run

    from coevo.app.run import run_meta
    from coevo.config import HarnessR1Config
    from coevo.roles.engineer import EngineerEditor

    class Engineer(EngineerEditor):
        used: list[str] = []

        def use(self, reference):
            self.used.append(reference)

    engineer = Engineer(ScriptedChatModel(script=[reply]))
    config, ctx, archive = setup_run(tmp_path, strategy="harness_r1", editor=engineer)
    config = config.model_copy(update={"harness_r1": HarnessR1Config(**harness_r1)})
    if budget:  # a weight stage that declares what the fake trainer spends (4 rollouts)
        config = config.model_copy(update={"budget": budget, "train": config.train.model_copy(update=SMALL_STAGE)})
    ctx.config = config
    return asyncio.run(run_meta(config, run_id="run-1", context=ctx, archive=archive)), archive, engineer


def test_harness_r1_run_edits_with_the_engineer_and_gates_its_edits(tmp_path):
    state, archive, engineer = _harness_r1_run(tmp_path, steps=0, sft_epochs=0)
    assert [s.round for s in state["engineer_stages"]] == [0, 1] and "engineer" not in state
    assert engineer.used == []  # nothing trained: the engineer stays as configured
    edits = archive.list(EditRecord, run_id="run-1")
    assert edits and all(e.rationale == "name the function" for e in edits)
    assert any(d.accepted for d in archive.list(GateDecision, run_id="run-1"))


def test_harness_r1_engineer_stage_trains_on_train_failures_under_the_new_weights(tmp_path, monkeypatch):
    from coevo.graphs.harness_r1 import nodes
    from coevo.records import Checkpoint

    seen = []

    def fake_grpo(ckpt, episodes, env, stage, temperature, max_tokens, max_ops, archive, run_id):
        seen.append((ckpt.id, [t.split for e in episodes for t in e.tasks], stage.num_generations, env.penalty))
        new = Checkpoint(id=f"eng-{len(seen)}", base_model="smollm2-135m", adapter_path=f"/a/{len(seen)}",
                         metrics={"history": [{"reward": 0.25}]})
        archive.put(new)
        return new, [], type("R", (), {"outcomes": []})()

    monkeypatch.setattr(nodes, "train_engineer_grpo", fake_grpo)
    useless = HELPS.replace("Call exactly the function asked for.", "Be brief.")  # rejected: round 1 still fails
    state, archive, engineer = _harness_r1_run(tmp_path, useless, steps=1, sft_epochs=1, group=3, penalty=-0.5,
                                               batch=2)
    assert [s[0] for s in seen] == ["engineer-base", "eng-1"]  # round 1 trains the round-0 engineer further
    assert all(set(s[1]) == {"train"} and s[2] == 3 and s[3] == -0.5 for s in seen)
    assert state["engineer"] == "eng-2" and engineer.used == ["local:smollm2-135m+/a/1", "local:smollm2-135m+/a/2"]
    assert state["engineer_stages"][0].sft_examples == 0 and state["engineer_stages"][1].sft_examples is None
    assert state["engineer_stages"][0].rewards == [0.25]


def rerunning_grpo(reply=HELPS):
    """A stand-in for TRL's GRPO on the engineer: ``steps`` x ``tasks_per_step`` episodes drawn, G
    replies each scored by the real ``EditEnv`` (reruns of the frozen target through the run's
    evaluator), one engineer reply trajectory (100 prompt, 20 reply tokens) per patch."""
    from types import SimpleNamespace

    from coevo.models.trajectory import ModelCall
    from coevo.records import Checkpoint

    def grpo(ckpt, episodes, env, stage, temperature, max_tokens, max_ops, archive, run_id):
        drawn = [e for _ in range(stage.steps) for e in episodes[:stage.tasks_per_step]]

        async def sample():
            return [(e, await env.outcome(e, reply)) for e in drawn for _ in range(stage.num_generations)]

        scored = asyncio.run(sample())  # in the stage's thread, in its own event loop, as TRL's rollouts run
        call = ModelCall(input=[], output={}, input_tokens=100, output_tokens=20)
        replies = [Trajectory(task_id=e.id, env="harness_r1", split="train", reward=o.reward, calls=[call])
                   for e, o in scored]
        new = Checkpoint(id=f"eng-{ckpt.id}", base_model="smollm2-135m", adapter_path="/a", run_id=run_id,
                         config={"stage": "engineer_grpo"},
                         metrics={"history": [{"step": 1, "reward": sum(o.reward for _, o in scored) / len(scored)}]})
        archive.put(new)
        return new, replies, SimpleNamespace(outcomes=[(e.id, 0, o) for e, o in scored])

    return grpo


def test_a_capped_harness_r1_run_charges_the_engineers_reruns_and_stops_at_the_cap(tmp_path, monkeypatch):
    from coevo.graphs.harness_r1 import nodes
    from coevo.meta.budget import by_phase, totals
    from coevo.records import BudgetRecord

    monkeypatch.setattr(nodes, "train_engineer_grpo", rerunning_grpo())
    # round 0: train 4; the engineer's stage declares and spends 12 (one episode of the 4 failed train
    # tasks: its control once, G = 2 valid patches rerun); check 12; validate's 4 would make 32
    state, archive, _ = _harness_r1_run(tmp_path, budget=30, steps=1, sft_epochs=0)
    budgets = archive.list(BudgetRecord, run_id="run-1")
    assert totals(budgets)["rollouts"] == 28 <= 30 and "val evaluation" in state["budget_stop"]
    assert by_phase(budgets) == {"train": 4, "train_engineer": 12, "check": 12}
    (engineer,) = [b for b in budgets if b.phase == "train_engineer"]
    assert (engineer.round, engineer.split, engineer.rollouts) == (0, "train", 12)
    assert (engineer.meta_calls, engineer.meta_input_tokens, engineer.meta_output_tokens) == (2, 200, 40)
    assert state["engineer_stages"][0].patches == 2 and state["final_val"].split == "val"

    # a cap the engineer's declared 12 reruns would overrun ends the run before the stage trains anything
    (tmp_path / "tight").mkdir()
    state, archive, engineer_role = _harness_r1_run(tmp_path / "tight", budget=15, steps=1, sft_epochs=0)
    assert state["budget_stop"].startswith("budget: round 0's engineer stage (12 rollouts) would take the run past")
    assert by_phase(archive.list(BudgetRecord, run_id="run-1")) == {"train": 4}
    assert "engineer" not in state and engineer_role.used == [] and len(state["test"]["final"].per_task) == 4


def test_an_engineer_stage_that_fails_part_way_still_charges_the_reruns_it_made(tmp_path, monkeypatch):
    from coevo.graphs.harness_r1 import nodes
    from coevo.meta.budget import by_phase
    from coevo.records import BudgetRecord

    scoring = rerunning_grpo()

    def failing(ckpt, episodes, env, stage, *rest):
        scoring(ckpt, episodes, env, stage, *rest)  # the reruns happen, then the trainer dies
        raise RuntimeError("out of memory in the engineer's backward pass")

    monkeypatch.setattr(nodes, "train_engineer_grpo", failing)
    with pytest.raises(RuntimeError, match="out of memory"):
        _harness_r1_run(tmp_path, budget=30, steps=1, sft_epochs=0)
    with Archive(tmp_path / "run.db") as archive:
        budgets = archive.list(BudgetRecord, run_id="run-1")
    assert by_phase(budgets) == {"train": 4, "train_engineer": 12}  # the control once + G = 2 patches, 4 tasks each
    (failed,) = [b for b in budgets if b.phase == "train_engineer"]
    assert failed.id == "run-1:engineer:engineer-base:failed" and failed.rollouts == 12 and failed.meta_calls == 0


def test_an_engineer_stage_declares_its_most_reruns(episode):
    from coevo.config.train import StageConfig
    from coevo.training.harness_r1.engineer import grpo_rollouts

    small = EditEpisode("ep-1", episode.spec, episode.tasks[:2], seed=6)
    stage = StageConfig(steps=2, tasks_per_step=1, num_generations=3)
    # 2 steps x 1 episode x G = 3 patches, each on at most 3 tasks; at most 2 controls (2 episodes) of 3
    assert grpo_rollouts(stage, [episode, small]) == 2 * 3 * 3 + 2 * 3
    assert grpo_rollouts(stage, [episode]) == 2 * 3 * 3 + 1 * 3  # one episode: its control once
    assert grpo_rollouts(stage, []) == 0


def test_the_report_of_a_harness_r1_run_shows_its_engineer_stages(tmp_path, monkeypatch):
    from coevo.app.run import read_state
    from coevo.graphs.harness_r1 import nodes
    from coevo.report.html import write_report

    monkeypatch.setattr(nodes, "train_engineer_grpo", rerunning_grpo())
    _harness_r1_run(tmp_path, steps=1, sft_epochs=0)
    db = str(tmp_path / "run.db")
    state = asyncio.run(read_state(db, "run-1", "harness_r1"))  # the checkpointed state, as `coevo report` reads it
    page = write_report("run-1", db, tmp_path / "report", state).read_text()
    assert "<h2>Harness engineer (Harness-R1)</h2>" in page and "<img src='engineer.png'" in page
    assert (tmp_path / "report" / "engineer.png").stat().st_size > 0
    # round 0: no cold start, one GRPO step of reward 1.000, 2 of 2 patches valid (Wilson [0.34, 1.00]);
    # round 1: every train task passes, so no episode and no step
    assert ("<tr><td>0</td><td>–</td><td>1</td><td>1.000</td><td>2</td><td>1.000 [0.34, 1.00] n=2</td>"
            "<td>1.000</td></tr>") in page
    assert "<tr><td>1</td><td>–</td><td>0</td><td>–</td><td>0</td><td>–</td><td>–</td></tr>" in page
    assert "Train reward per step" not in page  # the engineer's GRPO curve is not the policy's
    assert "Harness engineer" not in write_report("run-1", db, tmp_path / "alone").read_text()  # needs the state


class HeldOutEnv:
    """An env of another config whose val split holds a task id another config's run trained on
    (``train-0``); its test task's answer is the text ``kept`` (what run ``r``'s accepted edit writes)."""

    name = "toy"

    def __init__(self, val: str = "train-0", answer: str = "nothing like it") -> None:
        self.val, self.answer = val, answer

    def tasks(self, split, n=None):
        return [Task(id={"train": "t-x", "val": self.val, "test": "test-x"}[split], env="toy", split=split,
                     prompt="what is 2+2?")]

    def reveal(self, task):
        return self.answer if task.split == "test" else "4"


def cold_start_context(tmp_path, env, **r1):
    from coevo.config import RunConfig
    from coevo.graphs.harness_r1.nodes import cold_start
    from coevo.meta.context import MetaContext
    from coevo.records import RunRecord

    archive, _ = _archive_with_edits(tmp_path / "a.db")
    config = RunConfig(strategy="harness_r1", env={"ref": "toy", "n_train": 1, "n_val": 1, "n_test": 1},
                       harness_r1=r1)
    other = config.model_copy(update={"env": config.env.model_copy(update={"ref": "toy:size=9"})})
    archive.put(RunRecord(id="r", strategy="vace", config=config.model_dump(mode="json")))
    ctx = MetaContext(config=config, env=env, archive=archive, policy=lambda c: None, run_id="now")
    return ctx, cold_start, archive, other


def test_the_cold_start_learns_only_from_runs_of_this_env_config_or_the_named_ones(tmp_path):
    from coevo.records import RunRecord

    ctx, cold_start, archive, other = cold_start_context(tmp_path, HeldOutEnv(val="val-x"))
    assert [e.edit_id for e in cold_start(ctx)] == ["edit-kept"]  # run r has this run's env config
    archive.put(RunRecord(id="r", strategy="vace", config=other.model_dump(mode="json")))
    assert cold_start(ctx) == []  # another config's run: its train tasks may be this run's val or test
    ctx.config.harness_r1.cold_start_from = ["r"]
    assert [e.edit_id for e in cold_start(ctx)] == ["edit-kept"]  # named explicitly


def test_the_cold_start_is_sealed_against_this_runs_val_and_test(tmp_path, caplog):
    ctx, cold_start, _, _ = cold_start_context(tmp_path, HeldOutEnv(val="train-0"))
    assert cold_start(ctx) == []  # its evidence shows train-0, this run's val task
    ctx, cold_start, _, _ = cold_start_context(tmp_path / "b", HeldOutEnv(val="val-x", answer="why kept"))
    assert cold_start(ctx) == []  # its reply writes this run's test answer
    ctx, cold_start, _, _ = cold_start_context(tmp_path / "c", HeldOutEnv(val="val-x"))
    assert [e.edit_id for e in cold_start(ctx)] == ["edit-kept"]
