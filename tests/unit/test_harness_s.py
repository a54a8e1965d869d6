"""Harness-S on fakes: Eq. 3 parent selection, the router's ballots (Eq. 9) with shuffles and ties,
malformed voter/profiler replies ignored with a reason, Eq. 5 rescue with K distinct routed
siblings, and both strategies end to end (pool with lineage, profiles, votes, Rank-r test)."""

import asyncio
import itertools
import json
import logging
from types import SimpleNamespace

import pytest
from test_meta_loop import WordEnv, policy
from training_kit import sampled

from coevo.app.run import run_meta
from coevo.config import RunConfig
from coevo.envs.base import Task
from coevo.evaluation.results import TaskOutcome
from coevo.graphs.harness_s.evolution import coverage_parents, round_tasks
from coevo.graphs.harness_s.router import Router, shuffled
from coevo.harnesses.runtime import arun_rollout
from coevo.harnesses.spec import HarnessSpec, Prompt
from coevo.meta.context import MetaContext
from coevo.meta.pool import Ballot, Profile
from coevo.meta.state import EvalSummary
from coevo.records import Checkpoint, EditRecord, LLMCallRecord, PoolMember, RunRecord
from coevo.roles.curator import OfflineCurator
from coevo.roles.editor import OfflineEditor
from coevo.roles.profiler import LLMProfiler, OfflineProfiler
from coevo.roles.voter import LLMVoter, RuleVoter, combine, weight
from coevo.storage import Archive
from coevo.training.grpo.rollout import HarnessRollout, sibling_rescue

# -- Eq. 3 -------------------------------------------------------------------------------------


def test_eq3_picks_the_coverage_maximising_parent_set_where_greedy_would_not():
    solved = {"A": {1, 2, 3, 4}, "B": {1, 2, 5}, "C": {3, 4, 6}, "D": {1}}
    assert sorted(coverage_parents(solved, budget=2)) == ["B", "C"]  # covers 6; greedy's A+B covers 5
    greedy = coverage_parents(solved, budget=2, exact_limit=1)
    assert greedy[0] == "A" and len(set().union(*(solved[h] for h in greedy))) == 5  # >= (1 - 1/e) * 6
    assert coverage_parents(solved, budget=4) == ["B", "C"]  # a smaller set wins at equal coverage
    assert coverage_parents({}, budget=4) == []
    with pytest.raises(ValueError, match="B must be >= 1"):
        coverage_parents(solved, budget=0)


# -- router: Eq. 9 ------------------------------------------------------------------------------


def test_each_evolution_rounds_parents_run_fresh_train_tasks():
    """§3.2: each parent of round g runs on fresh training tasks: the rounds' shares are disjoint, cover the
    split, are not one category each (the split lists tasks by category), and leave out what a live harness
    answers."""
    train = [Task(id=f"{cat}{i}", env="toy", split="train", prompt=f"{cat} task {i}")
             for i in range(3) for cat in "abc"]
    ctx = SimpleNamespace(config=RunConfig(harness_s={"proposals": [2, 2, 2]}, env={"n_train": 9}),
                          tasks=lambda split: train)
    shares = [[t.id for t in round_tasks(ctx, {}, g)] for g in range(3)]
    assert sorted(sum(shares, [])) == sorted(t.id for t in train)  # disjoint, and together the whole split
    assert all(len({x[0] for x in share}) > 1 for share in shares)  # a stride of 3 would give one category each
    sealed = {"sealed": {"h1": SimpleNamespace(tasks=[shares[1][0]])}}
    assert [t.id for t in round_tasks(ctx, sealed, 1)] == shares[1][1:]
    one = SimpleNamespace(config=RunConfig(harness_s={"proposals": [2]}), tasks=lambda split: train)
    assert len(round_tasks(one, {}, 0)) == 9  # one evolution round: every train task
    few = SimpleNamespace(config=RunConfig(harness_s={"proposals": [1, 1, 1]}, env={"n_train": 2}),
                          tasks=lambda split: train[:2])
    with pytest.raises(ValueError, match="raise env.n_train or run fewer evolution rounds"):
        round_tasks(few, {}, 2)


def test_ballots_combine_with_weights_one_three_quarters_half_quarter():
    assert [weight(r, 4) for r in (1, 2, 3, 4, 5, 0)] == [1.0, 0.75, 0.5, 0.25, 0.0, 0.0]
    ballots = [Ballot(voter="v1", task_id="x", ranking=["a", "b", "c", "d"]),
               Ballot(voter="v2", task_id="x", ranking=["d", "c"]),
               Ballot(voter="v3", task_id="x", reason="ignored")]
    # q: a 1, b .75, c .5+.75 = 1.25, d .25+1 = 1.25, e 0 (unlisted)
    order = combine(ballots, ["a", "b", "c", "d", "e"], {"c": 0.2, "d": 0.9})
    assert order == ["d", "c", "a", "b", "e"]  # the c/d tie goes to the higher val success
    assert combine(ballots, ["a", "b", "c", "d", "e"], {})[:2] == ["c", "d"]  # then by id
    assert combine([Ballot(voter="v", task_id="x", ranking=["z", "b", "b"])], ["a", "b"], {}) == ["b", "a"]


def test_each_voter_sees_its_own_seeded_shuffle_of_the_candidates():
    ids = [f"h{i}" for i in range(8)]
    orders = {tuple(shuffled(ids, 0, "task", v)) for v in range(4)}
    assert len(orders) > 1 and all(sorted(o) == ids for o in orders)
    assert shuffled(ids, 0, "task", 1) == shuffled(ids, 0, "task", 1)
    assert shuffled(ids, 0, "task", 1) != shuffled(ids, 0, "other", 1) or shuffled(ids, 1, "task", 1) != ids

    seen = []

    class Recording:
        name = "rec"

        def vote(self, task, candidates, profiles, val_tasks, ballot):
            seen.append(list(candidates))
            return Ballot(voter=self.name, task_id=task.id, ranking=list(candidates)[:ballot]), []

    router = Router([Recording(), Recording(), Recording()], _profiles(ids), {}, "h0", seed=3)
    asyncio.run(router.rank(Task(id="x", env="e", split="test", prompt="p")))
    assert len(seen) == 3 and len({tuple(s) for s in seen}) > 1
    assert sorted(map(tuple, seen)) == sorted(tuple(shuffled(ids, 3, "x", v, "rank")) for v in range(3))


def _profiles(ids, success=None):
    return {h: Profile(harness_id=h, checkpoint_id="c", val_success=(success or {}).get(h, 0.0)) for h in ids}


def test_malformed_voter_replies_are_ignored_with_a_reason_and_the_votes_archived(tmp_path, caplog):
    ids = ["h0", "a", "b"]
    bad = LLMVoter("openai/gpt-4o-mini", name="bad", mock_response="this is not json")
    unknown = LLMVoter("openai/gpt-4o-mini", name="unknown", mock_response=json.dumps({"ranking": ["zzz"]}))
    good = LLMVoter("openai/gpt-4o-mini", name="good", mock_response=json.dumps({"ranking": ["a"]}))
    archive = Archive(str(tmp_path / "v.db"))
    router = Router([bad, unknown, good], _profiles(ids, {"b": 0.5}), {}, "h0",
                    on_votes=lambda ballots: archive.put(*ballots))
    ranking = asyncio.run(router.rank(Task(id="x", env="e", split="test", prompt="p")))
    assert ranking == ["a", "b", "h0"]  # only the good ballot counts; then val success
    votes = {v.voter: v for v in archive.list(Ballot, task_id="x")}
    assert votes["bad"].ranking == [] and "invalid reply" in votes["bad"].reason
    assert votes["unknown"].ranking == [] and "zzz" in votes["unknown"].reason
    assert votes["good"].ranking == ["a"] and not votes["good"].reason
    assert asyncio.run(router.top_k(Task(id="x", env="e", split="test", prompt="p"), 4)) == ["a", "b"]  # no H0


def test_rule_voter_ranks_by_success_on_similar_val_tasks():
    val = {"v1": Task(id="v1", env="e", split="val", prompt="add 3 and 4"),
           "v2": Task(id="v2", env="e", split="val", prompt="spell the word pear backwards")}
    profiles = {"h0": Profile(harness_id="h0", checkpoint_id="c", val_success=0.5, per_task={"v1": 0.0, "v2": 1.0}),
                "a": Profile(harness_id="a", checkpoint_id="c", val_success=0.5, per_task={"v1": 1.0, "v2": 0.0})}
    ballot, calls = RuleVoter(m=1).vote(Task(id="x", env="e", split="test", prompt="add 5 and 4"), ["h0", "a"],
                                        profiles, val, 4)
    assert ballot.ranking == ["a", "h0"] and calls == []


def test_an_offline_voter_without_evidence_abstains_instead_of_ranking_by_id():
    val = {"v1": Task(id="v1", env="e", split="val", prompt="add 3 and 4")}
    tied = {h: Profile(harness_id=h, checkpoint_id="c", val_success=0.0, per_task={"v1": 0.0}) for h in ("h0", "a")}
    task = Task(id="x", env="e", split="test", prompt="add 5 and 4")
    ballot, _ = RuleVoter(m=1).vote(task, ["h0", "a"], tied, val, 4)
    assert ballot.ranking == [] and "abstains" in ballot.reason
    # one voter with evidence now decides alone: the tied voter's id order (a before h0) adds nothing
    evidence = dict(tied, h0=Profile(harness_id="h0", checkpoint_id="c", val_success=0.0, per_task={"v1": 1.0}))
    with_evidence, _ = RuleVoter(m=1).vote(task, ["h0", "a"], evidence, val, 4)
    assert with_evidence.ranking == ["h0", "a"]
    assert combine([ballot, with_evidence, ballot], ["h0", "a"], {}) == ["h0", "a"]
    assert RuleVoter(m=1).vote(task, ["a"], tied, val, 4)[0].ranking == ["a"]  # a lone candidate is no tie
    # a partial tie: the ballot stops before the first tied group (b and c), never ordering them by id
    partial = dict(evidence, b=tied["a"].model_copy(update={"harness_id": "b"}),
                   c=tied["a"].model_copy(update={"harness_id": "c", "val_success": 0.5}))
    ballot, _ = RuleVoter(m=1).vote(task, ["h0", "a", "b", "c"], partial, val, 4)
    assert ballot.ranking == ["h0", "c"]


# -- profiles: Eq. 8, 11 -------------------------------------------------------------------------


def _summary(harness, passed, split="val"):
    return EvalSummary(harness_id=harness, checkpoint_id="c", split=split, evaluation_id=harness, score=0, pass_at_k=0,
                       avg_at_k=0, timr=0, per_task={t: TaskOutcome(task_id=t, seeds=[0], rewards=[float(p)],
                                                                    passed=[p]) for t, p in passed.items()})


def _tasks(split="val"):
    return {t: Task(id=t, env="e", split=split, prompt=t, metadata={"family": t[0]}) for t in ("a1", "a2", "b1")}


def test_offline_profile_prefers_and_avoids_categories_from_paired_val_outcomes():
    h0 = _summary("h0", {"a1": False, "a2": False, "b1": True})
    sib = _summary("s", {"a1": True, "a2": True, "b1": False})
    prof = OfflineProfiler().profile(sib, h0, _tasks(), {}).profile
    assert [e.when for e in prof.prefer] == ["task category a"] and "2/2" in prof.prefer[0].behavior
    assert [e.when for e in prof.avoid] == ["task category b"]
    assert prof.val_success == pytest.approx(2 / 3) and prof.categories == {"a": [2, 2, 0], "b": [1, 0, 1]}
    with pytest.raises(ValueError, match="not a val task"):  # test outcomes never enter a profile
        OfflineProfiler().profile(_summary("s", {"a1": True}, "test"), h0, _tasks("test"), {})


def test_a_malformed_profiler_reply_is_ignored_with_a_reason():
    h0 = _summary("h0", {"a1": False, "a2": False, "b1": True})
    sib = _summary("s", {"a1": True, "a2": True, "b1": False})
    out = LLMProfiler("openai/gpt-4o-mini", mock_response="{not json").profile(sib, h0, _tasks(), {})
    assert out.profile.prefer == [] and out.profile.avoid == [] and "invalid reply" in out.profile.reason
    assert out.profile.val_success == pytest.approx(2 / 3) and len(out.calls) == 2
    good = json.dumps({"prefer": [{"when": "sums", "behavior": "answers with the number"}], "avoid": []})
    out = LLMProfiler("openai/gpt-4o-mini", mock_response=good).profile(sib, h0, _tasks(), {})
    assert out.profile.prefer[0].when == "sums" and not out.profile.reason


# -- rescue: Alg. 1, Eq. 5 -------------------------------------------------------------------------


def test_a_group_with_one_success_is_kept_and_an_all_failure_group_is_replaced_by_k_distinct_siblings():
    h0 = HarnessSpec(name="h0")
    siblings = {s.id: s for s in (HarnessSpec(name=f"s{i}") for i in range(6))}
    tasks = [Task(id="easy", env="e", split="train", prompt="easy"), Task(id="hard", env="e", split="train",
                                                                         prompt="hard")]

    easy = itertools.count()  # the first of h0's easy rollouts passes

    async def rollout_fn(spec, policy, env, task, seed=0, checkpoint_id=""):
        first = spec.name == "h0" and task.id == "easy" and next(easy) == 0
        return sampled(task, spec, seed, first or spec.name in ("s1", "s3"))

    success = {h: 0.1 * int(s.name[1]) for h, s in siblings.items()}
    router = Router([RuleVoter()], {h0.id: Profile(harness_id=h0.id, checkpoint_id="c", val_success=1.0),
                                    **_profiles(list(siblings), success)}, {}, h0.id)

    async def choose(task, k):
        return [siblings[h] for h in await router.top_k(task, k)]

    rollout = HarnessRollout(h0, object(), tasks, rescue=sibling_rescue(choose, object(), rollout_fn=rollout_fn),
                             policy_factory=lambda tr: None, rollout_fn=rollout_fn)
    out = rollout(["easy"] * 4 + ["hard"] * 4, SimpleNamespace(num_generations=4, state=SimpleNamespace(global_step=0),
                                                               model=SimpleNamespace(eval=lambda: None)))
    initial, rescue = rollout.trajectories[:8], rollout.trajectories[8:]
    assert sum(t.passed for t in initial[:4]) == 1 and not any(t.passed for t in initial[4:])
    assert len(rescue) == 4 and all(t.task_id == "hard" for t in rescue)
    top4 = [h for h, _ in sorted(success.items(), key=lambda kv: -kv[1])[:4]]
    assert [t.harness_id for t in rescue] == top4 and h0.id not in top4  # K distinct siblings, router order
    m = out["metrics"]
    assert m["rescue_rate"] == 0.5 and m["rescue_success"] == 1.0 and m["effective_group_rate"] == 1.0


# -- both strategies end to end ----------------------------------------------------------------------


class RescueTrainer:
    """Returns checkpoint ``<parent>+r<round>``; its rollouts are H0's on every train task, and for each
    failed task the router's choice (``route``) is recorded."""

    def __init__(self, env, model, archive):
        self.env, self.model, self.archive, self.routed = env, model, archive, []

    async def __call__(self, checkpoint_id, spec, tasks, round, options=None):
        route = getattr(options, "route", None)
        new = f"{checkpoint_id}+r{round}"
        trajs = [await arun_rollout(spec, self.model, self.env, t, checkpoint_id=new) for t in tasks]
        for t, traj in zip(tasks, trajs):
            if not traj.passed and route is not None:
                self.routed.append(await route(t, 4))
        metrics = {"reward_mean": 0.0, "rescue_rate": 1.0, "rescue_success": 1.0, "effective_group_rate": 1.0}
        self.archive.put(Checkpoint(id=new, base_model="fake", parents=[checkpoint_id],
                                                     metrics=metrics, run_id="run-1"))
        return new, [t.model_copy(update={"id": f"{new}-{t.task_id}"}) for t in trajs]


def _run_harness_s(tmp_path, strategy, profiler=None, voter=None, reporter=None, trainer_cls=None, meta=None,
                   operators=("verifier_hint_rule",), env=None):
    h0 = HarnessSpec(name="h0", prompt=Prompt(system="Answer the task.", output_format="Reply 'Final answer: X'."))
    (tmp_path / "h0.json").write_text(h0.model_dump_json())
    config = RunConfig(strategy=strategy, rounds=1, db=str(tmp_path / "run.db"), harness=str(tmp_path / "h0.json"),
                       policy="fake:words", env={"ref": "words", "n_train": 4, "n_val": 4, "n_test": 4},
                       meta={"smoke_tasks": 2, "local_check": True, "local_tasks": 4, "local_controls": 0,
                             **(meta or {})},
                       harness_s={"proposals": [2, 2]})
    archive, env, model = Archive(config.db), env or WordEnv(), policy("help")
    trainer = (trainer_cls or RescueTrainer)(env, model, archive)
    ctx = MetaContext(config=config, env=env, archive=archive, policy=lambda ckpt: model,
                      trainer=trainer if strategy != "harness_s_he_only" else None, curator=OfflineCurator(2),
                      editor=OfflineEditor(operators=operators), profiler=profiler or OfflineProfiler(),
                      voter=voter or [RuleVoter()],
                      **({"reporter": reporter} if reporter else {}))
    state = asyncio.run(run_meta(config, run_id="run-1", context=ctx, archive=archive))
    return state, archive, trainer


@pytest.mark.parametrize("strategy", ["harness_s_he_only", "harness_s"])
def test_harness_s_builds_a_pool_profiles_it_and_tests_rank_r_routing(tmp_path, strategy, caplog):
    caplog.set_level(logging.INFO)
    state, archive, trainer = _run_harness_s(tmp_path, strategy)
    h0 = state["start_harness"]
    pool = archive.list(PoolMember, run_id="run-1")
    children = [m for m in pool if m.round >= 0]
    assert pool[0].harness_id == h0 and pool[0].round == -1 and pool[0].parent is None
    assert len(children) == 1 and children[0].parent == h0 and children[0].selected
    assert "wrong_func_name" in " ".join(children[0].causes) and children[0].val_score == 1.0
    assert state["parents"] == [children[0].harness_id]
    child = children[0].harness_id
    profiles = archive.list(Profile, run_id="run-1")
    assert {p.harness_id for p in profiles} == {h0, child}
    assert {p.checkpoint_id for p in profiles} == {state["checkpoint"]} | (
        {state["start_checkpoint"]} if strategy == "harness_s" else set())
    assert state["profiles"][child].prefer and not state["profiles"][h0].prefer
    test = state["test"]
    assert test["rank1"].score == 1.0 and test["rank2"].score == 0.0 and "rank3" not in test  # pool of 2
    assert test["final"].score == 0.0  # H0 itself under the final checkpoint
    votes = archive.list(Ballot, run_id="run-1")
    assert {v.purpose for v in votes} >= {"rank"} and all(v.ranking[0] == child for v in votes)
    if strategy == "harness_s":
        assert trainer.routed and all(r == [child] for r in trainer.routed)  # top-K excludes H0
        assert state["history"][0].weights.rescue_success == 1.0
        assert {"rescue", "rank"} <= {v.purpose for v in votes}


# -- the routed graph and its export -----------------------------------------------------------------


def test_the_routed_graph_sends_a_task_to_the_sibling_the_router_chose(tmp_path):
    from langchain_core.messages import AIMessage

    from coevo import build_routed_graph, load_router
    from coevo.envs.base import Episode
    from coevo.graphs.harness_s.routed import branch
    from coevo.models.fake import ScriptedChatModel

    h0 = HarnessSpec(name="h0", prompt=Prompt(system="Plain."))
    loud = HarnessSpec(name="loud", prompt=Prompt(system="LOUD."))

    def reply(messages):
        return AIMessage(content="Final answer: " + ("YES" if "LOUD" in str(messages[0].content) else "no"))

    class Chooses:
        name = "pick"

        def __init__(self, pick):
            self.pick = pick

        def vote(self, task, candidates, profiles, val_tasks, ballot):
            return Ballot(voter=self.name, task_id=task.id, ranking=[self.pick]), []

    episode = Episode(task=Task(id="t", env="e", split="test", prompt="shout"))
    pool = {h0.id: h0, loud.id: loud}
    for pick, answer in ((loud.id, "YES"), (h0.id, "no")):
        router = Router([Chooses(pick)], _profiles(list(pool)), {}, h0.id)
        graph = build_routed_graph(pool, router, ScriptedChatModel(script=[reply]), episode)
        assert branch(pick) in graph.get_graph().nodes
        out = graph.invoke({"task": "shout"})
        assert out["harness"] == pick and out["answer"] == answer
        assert asyncio.run(graph.ainvoke({}))["harness"] == pick

    state, archive, _ = _run_harness_s(tmp_path, "harness_s_he_only")
    from coevo.app.bundle import write_router

    path = write_router(archive, "run-1", tmp_path / "router.json")
    specs, router = load_router(path)
    assert set(specs) == {m.harness_id for m in archive.list(PoolMember, run_id="run-1")}
    assert router.h0 == state["start_harness"]
    graph = build_routed_graph(specs, router, policy("help"), Episode(task=WordEnv().tasks("test")[0]))
    assert graph.invoke({})["harness"] == state["parents"][0]  # the evolved child solves the val tasks
    with pytest.raises(ValueError, match="not a router file"):
        load_router({"format": "x"})


def test_export_router_cli_writes_a_loadable_file_and_refuses_a_run_without_a_pool(tmp_path):
    from typer.testing import CliRunner

    from coevo.app.bundle import load_router
    from coevo.cli.app import app

    state, archive, _ = _run_harness_s(tmp_path, "harness_s_he_only")
    archive.put(RunRecord(id="vace-run", strategy="vace"))
    db, out = str(tmp_path / "run.db"), tmp_path / "r.json"
    result = CliRunner().invoke(app, ["archive", "export-router", "run-1", "--db", db, "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert load_router(out)[1].h0 == state["start_harness"]
    result = CliRunner().invoke(app, ["archive", "export-router", "vace-run", "--db", db, "-o", str(out)])
    assert result.exit_code == 1 and "no sibling pool" in result.output and "Traceback" not in result.output


def test_the_report_shows_the_pool_profiles_rescue_rates_and_rank_r_test_rows(tmp_path):
    from coevo.report.html import write_report

    state, archive, _ = _run_harness_s(tmp_path, "harness_s")
    if archive.get(RunRecord, "run-1") is None:
        archive.put(RunRecord(id="run-1", strategy="harness_s"))
    page = write_report("run-1", str(tmp_path / "run.db"), tmp_path / "report", state).read_text()
    for text in ("Sibling pool", "wrong_func_name", "Behaviour profiles", "when task category",
                 "Complementary rescue", "rescue triggered", "Router ballots", "Rank-1 routing", "Rank-2 routing",
                 "Rank-1 − final pair (paired)"):
        assert text in page, text


def test_candidates_target_two_or_three_related_causes_and_see_the_other_briefs():
    from coevo.graphs.harness_s.evolution import merge, related_groups
    from coevo.meta.state import Direction

    causes = ["no_answer:budget", "no_answer:parse", "no_answer:hook", "no_answer:stop", "wrong_answer"]
    directions = [Direction(id=f"d{i}", cause=c, description=c, task_ids=[f"t{i}", f"t{i + 1}"])
                  for i, c in enumerate(causes)]
    groups = related_groups(directions, 3)
    assert [[d.cause for d in g] for g in groups] == [causes[:3], [causes[3]], [causes[4]]]
    assert all(len({d.cause.split(":")[0] for d in g}) == 1 for g in groups)  # related: one family per candidate
    brief = merge(groups[0], "b0", ["no_answer:stop", "wrong_answer"])
    assert brief.cause == "no_answer:budget + no_answer:parse + no_answer:hook"
    assert brief.task_ids == ["t0", "t1", "t2", "t3"] and "Other candidates this round target" in brief.description
    assert "wrong_answer" in brief.description


def test_malformed_profiler_and_voter_replies_in_a_run_are_logged_and_ignored_not_crashes(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="coevo")
    state, archive, _ = _run_harness_s(tmp_path, "harness_s_he_only",
                                       profiler=LLMProfiler("openai/gpt-4o-mini", mock_response="{oops"),
                                       voter=[LLMVoter("openai/gpt-4o-mini", mock_response="nope"), RuleVoter()])
    logged = [(getattr(r, "topic", ""), r.getMessage()) for r in caplog.records]
    assert any(topic == "profile" and "profiler reply ignored" in line and "invalid reply" in line
               for topic, line in logged)
    child = state["parents"][0]
    assert state["profiles"][child].reason and state["profiles"][child].val_success == 1.0
    votes = archive.list(Ballot, run_id="run-1")
    assert any(v.voter == "llm" and not v.ranking and "invalid reply" in v.reason for v in votes)
    assert state["test"]["rank1"].score == 1.0  # the Rule Router's ballot alone decides
    assert {c.role for c in archive.list(LLMCallRecord, run_id="run-1")} == {"profiler", "voter"}


def test_a_pool_members_demonstrated_train_tasks_leave_later_stages_even_after_a_failed_revision():
    from coevo.graphs.harness_s.evolution import carried_tasks

    tasks = [Task(id=f"t{i}", env="e", split="train", prompt=f'What is {i} + {i}?\nAnswer "now".') for i in range(3)]
    spec = HarnessSpec(skills={"demo_t1": {"kind": "demonstration", "input": tasks[1].prompt, "output": "2"}})
    assert carried_tasks(spec, tasks) == ["t1"] and carried_tasks(HarnessSpec(), tasks) == []


def test_the_fan_out_asks_meta_samples_candidates_per_brief_within_the_proposal_budget():
    from coevo.graphs.harness_s.evolution import fan_out_briefs
    from coevo.meta.pool import Brief
    from coevo.meta.state import Direction

    directions = [Direction(id=f"g1-p-b{i}", cause=c, description=c, task_ids=["t1", "t2"])
                  for i, c in enumerate(["format:no_marker", "value:wrong"])]
    briefs = [Brief(id=d.id, parent=f"parent{i}", direction=d.id, causes=[d.cause], trajectories=[f"tr{i}"])
              for i, d in enumerate(directions)]
    state = {"directions": directions, "briefs": briefs, "evolution_round": 1}

    def sends(samples, proposals):
        config = RunConfig(meta={"samples": samples}, harness_s={"proposals": proposals})
        out = fan_out_briefs(state, SimpleNamespace(context=SimpleNamespace(config=config)))
        return [(s.arg["direction"].id, s.arg["sample"], s.arg["incumbent"], s.arg["train_trajectories"],
                 s.arg["round"]) for s in out]

    b0, b1 = (d.id for d in directions)
    assert sends(2, [1, 8]) == [(b0, 0, "parent0", ["tr0"], 1), (b1, 0, "parent1", ["tr1"], 1),
                                (b0, 1, "parent0", ["tr0"], 1), (b1, 1, "parent1", ["tr1"], 1)]
    assert [x[:2] for x in sends(3, [1, 3])] == [(b0, 0), (b1, 0), (b0, 1)]  # the round's budget caps proposals
    assert [x[:2] for x in sends(1, [8])] == [(b0, 0), (b1, 0)]
    assert fan_out_briefs({"directions": [], "briefs": []},
                          SimpleNamespace(context=SimpleNamespace(config=RunConfig()))) == "check"


class UnlabelledWordEnv(WordEnv):
    """WordEnv whose verifier gives no error type: the offline curator reads the wrong value itself."""

    def score(self, task, answer, episode):
        return super().score(task, answer, episode).model_copy(update={"detail": {}})


def test_sampled_siblings_of_one_brief_are_distinct_children_in_the_pool(tmp_path):
    ops = ("exact_value_rule", "lesson")
    state, archive, _ = _run_harness_s(tmp_path, "harness_s_he_only", meta={"samples": 2}, operators=ops,
                                       env=UnlabelledWordEnv())
    children = [m for m in archive.list(PoolMember, run_id="run-1") if m.round == 0]
    applied = {e.rationale.split("by operator ", 1)[1].split(" ")[0] for e in archive.list(EditRecord, run_id="run-1")
               if e.child_id and e.round == 0}
    assert len({m.harness_id for m in children}) == 2 and len({m.direction for m in children}) == 1
    assert applied == set(ops)  # one brief, two siblings by different operators


def test_a_routing_repeated_after_a_kill_replaces_its_ballots_instead_of_adding_to_them(tmp_path):
    """A stage killed mid-way and run again (a fresh router: the node re-executes) casts the same
    ballots; each replaces its earlier attempt's by id, so the report counts each vote once. Two runs
    routing at the same checkpoint keep their own ballots; one task routed twice keeps both routings."""
    from coevo.meta.recording import Recording

    archive = Archive(str(tmp_path / "v.db"))
    task = Task(id="x", env="e", split="train", prompt="p")
    ids = ["h0", "a", "b"]

    def stage(run_id: str) -> None:  # one weight stage's routings: task x twice, then y once
        recorder = Recording.__new__(Recording)  # what MetaContext records through
        recorder.archive, recorder.run_id = archive, run_id
        router = Router([RuleVoter(), RuleVoter()], _profiles(ids), {}, "h0", checkpoint_id="ck",
                        on_votes=recorder.record_votes)
        for t in (task, task, task.model_copy(update={"id": "y"})):
            asyncio.run(router.top_k(t, 2))

    stage("run-1")
    assert len(archive.list(Ballot, run_id="run-1")) == 6  # 3 routings x 2 voters, the repeat kept
    stage("run-1")  # the stage again after a resume
    assert len(archive.list(Ballot, run_id="run-1")) == 6
    stage("run-2")  # another run at the same checkpoint
    assert len(archive.list(Ballot, run_id="run-1")) == len(archive.list(Ballot, run_id="run-2")) == 6
