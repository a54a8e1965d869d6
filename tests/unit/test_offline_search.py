"""The offline search on fakes (issue 23): a VACE round explores several directions and candidates
and its gate rejects some; CoEvo-RSI's inheritor picks bases by per-cause evidence; Harness-S's
profiles and rule voters route by category; the Meta-Harness proposer mutates in several ways."""

import asyncio

from langchain_core.messages import AIMessage

from coevo.app.run import run_meta
from coevo.config import RunConfig
from coevo.envs.base import Episode, Score, Task
from coevo.evaluation.results import TaskOutcome
from coevo.harnesses import load_harness
from coevo.harnesses.patch import CONTROL_FIELDS, PROMPT_FIELDS
from coevo.meta.context import MetaContext
from coevo.meta.inheritance import ArchiveEntry, ArchiveSummary
from coevo.meta.pool import Profile, ProfileEntry
from coevo.meta.roles import SearchView
from coevo.meta.search import SearchEntry
from coevo.meta.state import Direction, EvalSummary
from coevo.models.fake import ScriptedChatModel
from coevo.models.trajectory import Trajectory
from coevo.roles.curator import OfflineCurator
from coevo.roles.editor import OfflineEditor
from coevo.roles.inheritor import OfflineInheritor, with_cause_evidence
from coevo.roles.profiler import OfflineProfiler
from coevo.roles.proposer import OfflineProposer
from coevo.roles.voter import CategoryVoter, ProfileVoter, RuleVoter, voters_for
from coevo.storage import Archive

H0 = load_harness("reasoning_gym")


class TwoFamilies:
    """``add`` tasks (``a + b``) and ``rev`` tasks (reverse a word), four per split each."""

    name = "two"

    def tasks(self, split, n=None):
        base = {"train": 0, "val": 4, "test": 8}[split]
        out = []
        for i in range(base, base + 4):
            out.append(Task(id=f"add-{i}", env="two", split=split, prompt=f"Add: {i} + 2",
                            metadata={"family": "add"}))
            out.append(Task(id=f"rev-{i}", env="two", split=split, prompt=f"Reverse: w{i}rd",
                            metadata={"family": "rev"}))
        return out[:n]

    def episode(self, task, seed=0):
        return Episode(task=task)

    def gold(self, task):
        left = task.prompt.split(": ", 1)[1]
        return str(int(left.split(" + ")[0]) + 2) if task.id.startswith("add") else left[::-1]

    def score(self, task, answer, episode):
        ok = (answer or "").strip() == self.gold(task)
        return Score(reward=float(ok), passed=ok, detail={"expected": self.gold(task), "got": answer})


def fake_policy():
    """Sums right but in a sentence without the marker; words copied unreversed after the marker."""

    def reply(messages):
        task = next(str(m.content) for m in messages if m.type == "human")  # the task, not a hook's injection
        if task.startswith("Add: "):
            a = int(task.split(": ", 1)[1].split(" + ")[0])
            return AIMessage(f"Adding the two numbers gives {a + 2} in total.")
        return AIMessage(f"Final answer: {task.split(': ', 1)[1].split()[0]}")

    return ScriptedChatModel(script=[reply])


def test_a_vace_refinement_with_offline_roles_explores_several_directions_and_the_gate_rejects(tmp_path):
    """VACE's curate -> edit -> check -> validate -> gate, weights frozen (``harness_only``)."""
    (tmp_path / "h0.json").write_text(H0.model_dump_json())
    config = RunConfig(strategy="harness_only", rounds=1, db=str(tmp_path / "run.db"),
                       harness=str(tmp_path / "h0.json"), policy="fake:two",
                       env={"ref": "two", "n_train": 8, "n_val": 8, "n_test": 8},
                       meta={"candidates": 2, "samples": 2, "smoke_tasks": 2})
    archive, env, model = Archive(config.db), TwoFamilies(), fake_policy()
    ctx = MetaContext(config=config, env=env, archive=archive, policy=lambda c: model, curator=OfflineCurator(2),
                      editor=OfflineEditor(seed=config.seed))
    state = asyncio.run(run_meta(config, run_id="run-1", context=ctx, archive=archive))
    causes = {d.cause for d in state["directions"]}
    assert causes >= {"format:no_marker@add", "wrong_answer@rev"}, causes
    applied = {c.spec_id for c in state["checked"] if c.spec_id}
    assert len(applied) >= 3 and len({c.direction for c in state["checked"]}) == 2
    decisions = state["decisions"]
    assert any(not d.accepted for d in decisions), [(d.c, d.b) for d in decisions]


def _entry(i, harness, failures, rollouts, score=0.5):
    return ArchiveEntry(index=i, harness_id=harness, failures=failures, rollouts=rollouts)


def test_coevo_rsi_inheritor_picks_each_briefs_base_by_its_cause_evidence():
    summary = ArchiveSummary(incumbent="h0", checkpoint="c", entries=[
        _entry(0, "h0", {"format:no_marker": 6, "value:sign": 1}, 10),
        _entry(1, "rule", {"value:sign": 5}, 10),
        _entry(2, "parser", {"format:no_marker": 5}, 10),
        _entry(3, "tiny", {}, 1)])  # one rollout: Laplace smoothing keeps it from looking like a cure
    inh = OfflineInheritor()
    fmt = inh.choose_base(Direction(id="a", cause="format:no_marker@x", description="", task_ids=[]), summary)
    sign = inh.choose_base(Direction(id="b", cause="value:sign", description="", task_ids=[]), summary)
    assert (fmt.choice.base_id, sign.choice.base_id) == ("rule", "parser")
    assert "of 10" in fmt.choice.reason
    bare = ArchiveSummary(incumbent="h0", checkpoint="c", entries=[_entry(0, "h0", {}, 0), _entry(1, "x", {}, 0)])
    assert inh.choose_base(Direction(id="a", cause="c", description="", task_ids=[]), bare).choice.base_id == "h0"


def test_cause_evidence_counts_each_harness_train_failures_by_cause():
    tasks = {t.id: t for t in TwoFamilies().tasks("train")}
    ts = [Trajectory(task_id="add-0", split="train", harness_id="s1", final_answer="3", reward=0.0,
                     score_detail={"expected": "2"}),
          Trajectory(task_id="add-1", split="train", harness_id="h0", final_answer="3", passed=True, reward=1.0),
          Trajectory(task_id="add-1", split="val", harness_id="h0", final_answer="9", score_detail={"expected": "3"})]
    summary = ArchiveSummary(incumbent="h0", checkpoint="c", entries=[_entry(0, "h0", {}, 0)])
    out = with_cause_evidence(summary, ts, lambda h: H0, tasks, alias={"s1": "h0"})
    assert out.entries[0].rollouts == 2 and out.entries[0].failures == {"value:off_by_one": 1}


def _eval(harness, passed):
    per = {t: TaskOutcome(task_id=t, seeds=[0], rewards=[float(p)], passed=[p], trajectory_ids=[f"{harness}-{t}"])
           for t, p in passed.items()}
    return EvalSummary(harness_id=harness, checkpoint_id="c", split="val", evaluation_id=harness, score=0.0,
                       pass_at_k=0.0, avg_at_k=0.0, timr=0.0, per_task=per)


def test_profiles_name_the_failure_causes_a_sibling_removes_per_category():
    tasks = {t.id: t for t in TwoFamilies().tasks("val")}
    h0 = _eval("h0", {"add-4": False, "rev-4": False})
    sib = _eval("s", {"add-4": True, "rev-4": False})
    trajs = {"h0-add-4": Trajectory(id="h0-add-4", task_id="add-4", split="val", final_answer="The sum is six here.",
                                    messages=[{"type": "ai", "data": {"content": "The sum is six here."}}]),
             "h0-rev-4": Trajectory(id="h0-rev-4", task_id="rev-4", split="val", final_answer=None,
                                    stop_reason="budget:model_calls"),
             "s-rev-4": Trajectory(id="s-rev-4", task_id="rev-4", split="val", final_answer="w4rd",
                                   score_detail={"expected": "dr4w"})}
    prof = OfflineProfiler().profile(sib, h0, tasks, trajs).profile
    prefer = [e.behavior for e in prof.prefer]
    assert any("solves 1/1" in b for b in prefer) and any("wrong_answer" in b for b in prefer + [
        e.behavior for e in prof.avoid])
    assert any("no_answer:budget:model_calls" in b and "where H0 has 1" in b for b in prefer)


def test_rule_voters_with_different_criteria_route_categories_to_different_siblings():
    val = {t.id: t for t in TwoFamilies().tasks("val")}
    profiles = {"h0": Profile(harness_id="h0", checkpoint_id="c", val_success=0.2,
                              categories={"add": [4, 1, 1], "rev": [4, 1, 1]}),
                "s_add": Profile(harness_id="s_add", checkpoint_id="c", val_success=0.4,
                                 categories={"add": [4, 4, 1], "rev": [4, 0, 1]},
                                 prefer=[ProfileEntry(when="task category add", behavior="b")],
                                 avoid=[ProfileEntry(when="task category rev", behavior="b")]),
                "s_rev": Profile(harness_id="s_rev", checkpoint_id="c", val_success=0.3,
                                 categories={"add": [4, 0, 1], "rev": [4, 3, 1]},
                                 prefer=[ProfileEntry(when="task category rev", behavior="b")])}
    add, rev = TwoFamilies().tasks("test")[:2]
    for voter in (CategoryVoter(), ProfileVoter()):
        assert voter.vote(add, list(profiles), profiles, val, 4)[0].ranking[0] == "s_add"
        assert voter.vote(rev, list(profiles), profiles, val, 4)[0].ranking[0] == "s_rev"
    assert [v.name for v in voters_for(RunConfig(), TwoFamilies())] == ["rule", "category", "profile"]
    assert isinstance(voters_for(RunConfig(), TwoFamilies())[0], RuleVoter)


def test_the_offline_proposer_mutates_one_direction_in_several_distinct_ways():
    tasks = {t.id: t for t in TwoFamilies().tasks("train")}
    model, env = fake_policy(), TwoFamilies()
    from coevo.harnesses.runtime import arun_rollout

    trajs = [asyncio.run(arun_rollout(H0, model, env, t)) for t in tasks.values()]
    entries = [SearchEntry(harness_id=H0.id, score=0.0)]
    view = SearchView(entries=entries, spec=lambda h: H0, trajectories=lambda h: trajs, tasks=tasks)
    out = [p.candidate for p in OfflineProposer().propose(view, 4, 1)]
    assert len(out) == 4 and all(c.direction == "mutate" for c in out)
    assert len({str(c.patch) for c in out}) == 4
    for fields in (PROMPT_FIELDS, CONTROL_FIELDS):  # PACE's phases: the same operators, inside the phase's fields
        phase = SearchView(entries=entries, spec=lambda h: H0, trajectories=lambda h: trajs, tasks=tasks,
                           allowed=list(fields))
        out = [p.candidate for p in OfflineProposer().propose(phase, 3, 1)]
        assert len(out) >= 2 and len({str(c.patch) for c in out}) == len(out)
        assert all(op["path"].startswith(fields) for c in out for op in c.patch)
