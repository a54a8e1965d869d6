"""Offline curator and editor: train-only evidence, ≥ 2 failed tasks per direction, and the edit
mechanism chosen per cause."""

from coevo.envs.base import Task
from coevo.harnesses.patch import apply_patch
from coevo.harnesses.spec import HarnessSpec
from coevo.models.trajectory import Trajectory
from coevo.roles.curator import OfflineCurator, failure_cause
from coevo.roles.editor import OfflineEditor


def traj(task_id, split="train", passed=False, error="simple_function_checker:wrong_func_name", answer="[f(1)]",
         stop="final_answer", expected="[g(a=1)]"):
    detail = {} if passed else {"expected": expected, "got": answer, "public": {"error_type": error}}
    return Trajectory(task_id=task_id, split=split, passed=passed, reward=float(passed), final_answer=answer,
                      stop_reason=stop, score_detail=detail)


def tasks(*ids, split="train"):
    return {i: Task(id=i, env="e", split=split, prompt=f"prompt of {i}") for i in ids}


def test_curator_groups_train_failures_by_verifier_error_and_needs_two_tasks():
    ts = [traj("a"), traj("a"), traj("b"), traj("c", error="value_error"), traj("v", split="val"),
          traj("w", split="val")]
    directions = OfflineCurator(2).curate(ts, HarnessSpec(), tasks("a", "b", "c")).directions
    assert [d.cause for d in directions] == ["simple_function_checker:wrong_func_name"]
    assert directions[0].task_ids == ["a", "b"]
    assert [e.task_id for e in directions[0].evidence] == ["a", "b"]  # one excerpt per task, no val task


def test_failure_cause_prefers_how_the_episode_ended():
    assert failure_cause(traj("a", answer=None, stop="budget:model_calls")) == "no_answer:budget:model_calls"
    assert failure_cause(traj("a", error=None)) == "wrong_answer"


def samples(direction, spec, tasks_by_id, n=8, **kw):
    """The offline editor's first ``n`` candidates for ``direction`` (samples 0..n-1 of round 0)."""
    return [OfflineEditor(**kw).propose(direction, spec, tasks_by_id, sample=i).candidate for i in range(n)]


def test_editor_samples_a_rule_and_demonstrations_from_train_answers_only():
    spec = HarnessSpec()
    ts = [traj("a", expected="[g(a=1)]"), traj("b", expected="[h(b=2)]")]
    direction = OfflineCurator(2).curate(ts, spec, tasks("a", "b")).directions[0]
    assert "[g(a=1)]" not in direction.model_dump_json()  # the curator's evidence holds no gold answer
    gold = {"a": "[g(a=1)]", "b": "[h(b=2)]"}
    all_tasks = {**tasks("a"), **tasks("b", split="val")}  # b is (wrongly) a val task: its answer must not be used
    editor = {"demo_answer": lambda task, diagnostics: gold[task.id]}
    children = [apply_patch(spec, c.patch) for c in samples(direction, spec, all_tasks, **editor)
                if c.status != "rejected"]
    demos = [s for child in children for s in child.skills.values() if s.kind == "demonstration"]
    assert demos and all("[h(b=2)]" not in (d.output or d.text) for d in demos)
    assert any(d.output == "[g(a=1)]" and d.input == "prompt of a" for d in demos)
    assert any("function" in r.text for child in children for r in child.prompt.rules.values())


def test_editor_offers_a_budget_hook_when_runs_end_without_an_answer():
    spec = HarnessSpec()
    ts = [traj("a", answer=None, stop="budget:model_calls"), traj("b", answer=None, stop="budget:model_calls")]
    direction = OfflineCurator(2).curate(ts, spec, tasks("a", "b")).directions[0]
    children = [apply_patch(spec, c.patch) for c in samples(direction, spec, tasks("a", "b"))
                if c.status != "rejected"]
    hooks = [child.hooks["finish_before_budget"] for child in children if "finish_before_budget" in child.hooks]
    assert hooks and all((h.condition, h.action) == ("remaining_steps_lte", "warn") for h in hooks)
    assert any(child.budget.max_model_calls > spec.budget.max_model_calls for child in children)


def test_editor_rejects_a_direction_it_has_no_edit_for():
    spec = HarnessSpec()
    ts = [traj("a", error="mystery", expected=""), traj("b", error="mystery", expected="")]
    direction = OfflineCurator(2).curate(ts, spec, tasks("a", "b")).directions[0]
    cand = OfflineEditor().propose(direction, spec, tasks("a", "b")).candidate
    assert cand.status == "rejected" and "no offline edit" in cand.reason
