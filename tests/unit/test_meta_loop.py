"""The VACE meta-loop on fakes: gate accepts improvements, rejects regressions and ties, turns
malformed LLM replies into rejected proposals, and a run killed mid-round resumes to the same end."""

import asyncio
import json
import re

import pytest
from langchain_core.messages import AIMessage

from coevo.app.run import read_state, run_meta
from coevo.config import RunConfig
from coevo.envs.base import Episode, Score, Task
from coevo.evaluation.gate import decide, mcnemar_p
from coevo.harnesses.runtime import arun_rollout
from coevo.harnesses.spec import HarnessSpec, Prompt
from coevo.meta.context import MetaContext
from coevo.meta.sealing import sealed_tasks
from coevo.meta.state import Direction
from coevo.models.fake import ScriptedChatModel
from coevo.models.trajectory import Trajectory
from coevo.records import (
    Checkpoint,
    EditRecord,
    EvaluationRecord,
    GateDecision,
    GatePair,
    HarnessRecord,
    LLMCallRecord,
    RunRecord,
)
from coevo.roles.curator import LLMCurator, OfflineCurator
from coevo.roles.editor import LLMEditor, OfflineEditor, demonstration_source
from coevo.storage import Archive

WORDS = ["apple", "pear", "plum", "fig", "kiwi", "lime", "date", "sloe", "yuzu", "quince", "lemon", "grape"]


class WordEnv:
    """Repeat-the-word tasks; the verifier reports error_type ``wrong_func_name`` on a miss."""

    name = "words"

    def tasks(self, split, n=None):
        start = {"train": 0, "val": 4, "test": 8}[split]
        ws = WORDS[start:start + 4][: n or 4]
        return [Task(id=f"w-{w}", env="words", split=split, prompt=f"Repeat the word: {w}") for w in ws]

    def episode(self, task, seed=0):
        return Episode(task=task)

    def reveal(self, task):
        return task.prompt.rsplit(" ", 1)[1]

    def score(self, task, answer, episode):
        gold = task.prompt.rsplit(" ", 1)[1]
        ok = (answer or "").strip() == gold
        return Score(reward=float(ok), passed=ok,
                     detail={} if ok else {"error_type": "wrong_func_name", "expected": gold})


def policy(effect: str):
    """A fake policy: right iff the system prompt carries the offline rule for wrong_func_name;
    ``effect='regress'`` makes that rule hurt instead (the candidate then loses); ``effect='demos'``:
    right iff the harness shows a demonstration (a train task's prompt before the task's own)."""

    def reply(messages):
        system, task = str(messages[0].content), str(messages[-1].content)
        word = task.rsplit(" ", 1)[1]
        has_rule = "Call exactly the function" in system
        if effect == "demos":
            right = any("Repeat the word:" in str(m.content) for m in messages[:-1])
        else:
            right = has_rule if effect == "help" else (not has_rule and word in ("date", "sloe"))
        return AIMessage(content=f"Final answer: {word if right else 'banana'}")

    return ScriptedChatModel(script=[reply])


class FakeTrainer:
    """Returns checkpoint ``<parent>+r<round>`` and real rollouts of the incumbent on the train tasks;
    ``fail_once_at`` raises once in that round (a crash mid-run). With ``own_run`` (several runs in one
    archive) the checkpoint is ``<parent>+<own_run>-r<round>`` and recorded under that run, as a real
    trainer's fresh checkpoint ids keep two runs' checkpoints and rollouts apart."""

    def __init__(self, env, model, archive, fail_once_at=None, own_run=None):
        self.env, self.model, self.archive, self.fail_once_at = env, model, archive, fail_once_at
        self.own_run = own_run
        self.stages = []  # (round, task ids, sibling ids) of every stage

    async def __call__(self, checkpoint_id, spec, tasks, round, options=None):
        self.stages.append((round, [t.id for t in tasks], [s.id for s in options.pool()]))
        if self.fail_once_at == round:
            self.fail_once_at = None
            raise RuntimeError("simulated crash in the train node")
        new = f"{checkpoint_id}+r{round}" if self.own_run is None else f"{checkpoint_id}+{self.own_run}-r{round}"
        trajs = [await arun_rollout(spec, self.model, self.env, t, seed=0, checkpoint_id=new) for t in tasks]
        metrics = {"reward_mean": sum(t.reward for t in trajs) / len(trajs), "effective_group_rate": 0.0,
                   "delta_norm": 0.25 * (round + 1), "total_delta_norm": 0.25 * (round + 1)}
        self.archive.put(Checkpoint(id=new, base_model="fake", parents=[checkpoint_id],
                                                     config={"incumbent_id": spec.id}, metrics=metrics,
                                                     run_id=self.own_run or "run-1"))
        return new, [t.model_copy(update={"id": f"{new}-{t.task_id}"}) for t in trajs]


EDIT_OPERATORS = ("verifier_hint_rule", "demonstrations")
"""The offline operators these loop tests edit with: two samples per direction give one candidate
of each (the verifier-error rule the fake policy needs, and demonstrations whose tasks get sealed)."""


def setup_run(tmp_path, effect="help", fail_once_at=None, strategy="vace", curator=None, editor=None, db=None):
    h0 = HarnessSpec(name="h0", prompt=Prompt(system="Answer the task.", output_format="Reply 'Final answer: X'."))
    (tmp_path / "h0.json").write_text(h0.model_dump_json())
    config = RunConfig(strategy=strategy, rounds=2, db=db or str(tmp_path / "run.db"),
                       harness=str(tmp_path / "h0.json"), policy="fake:words",
                       env={"ref": "words", "n_train": 4, "n_val": 4, "n_test": 4},
                       meta={"smoke_tasks": 2, "local_check": True, "local_tasks": 4, "local_controls": 0,
                             "samples": 1 if editor else len(EDIT_OPERATORS)},
                       train={"action_cost": 0.5} if strategy == "evoharness_rl" else {})  # its lambda: no default
    archive = Archive(config.db)
    env, model = WordEnv(), policy(effect)
    ctx = MetaContext(config=config, env=env, archive=archive, policy=lambda ckpt: model,
                      trainer=FakeTrainer(env, model, archive, fail_once_at), curator=curator or OfflineCurator(2),
                      editor=editor or OfflineEditor(operators=EDIT_OPERATORS, demo_answer=demonstration_source(env)))
    return config, ctx, archive


async def _run(config, ctx, archive, run_id="run-1", resume=False):
    return await run_meta(config, run_id=run_id, resume=resume, context=ctx, archive=archive)


def test_gate_accepts_an_improving_candidate(tmp_path):
    config, ctx, archive = setup_run(tmp_path, "help")
    state = asyncio.run(_run(config, ctx, archive))
    accepted = [d for d in state["decisions"] if d.accepted]
    assert len(accepted) == 1 and accepted[0].round == 0
    assert accepted[0].b == 0.0 and accepted[0].c == 1.0
    assert state["incumbent"] == accepted[0].candidate_id
    assert state["test"]["final"].score == 1.0 and state["test"]["start"].score == 0.0
    stored = archive.list(GateDecision, run_id="run-1")
    assert len(stored) == len(state["decisions"]) and stored[0].pairs
    assert state["checkpoint"] == f"{state['start_checkpoint']}+r0+r1"


def test_gate_rejects_a_regressing_candidate(tmp_path):
    config, ctx, archive = setup_run(tmp_path, "regress")
    config.meta.local_check = False  # let the regressing candidate reach the gate
    state = asyncio.run(_run(config, ctx, archive))
    assert state["decisions"], "the candidate should have been validated"
    assert not any(d.accepted for d in state["decisions"])
    assert state["incumbent"] == state["start_harness"]


def test_gate_rule_rejects_a_tie_and_honours_margin_and_tests():
    cfg = RunConfig().gate
    assert decide(0.5, 0.5, [], cfg) == (False, "c=0.5000 does not beat b=0.5000")
    assert decide(0.5, 0.6, [], cfg)[0]
    assert not decide(0.5, 0.55, [], cfg.model_copy(update={"min_margin": 0.1}))[0]
    pairs = [GatePair(task_id="t", b=0.0, c=1.0, b_passed=False, c_passed=True)] * 2
    assert not decide(0.0, 1.0, pairs, cfg.model_copy(update={"test": "mcnemar"}))[0]  # p = 0.25
    assert decide(0.0, 1.0, pairs * 4, cfg.model_copy(update={"test": "mcnemar"}))[0]  # p = 1/256
    assert mcnemar_p(0, 8) == pytest.approx(1 / 256)


def test_local_check_rejects_a_regressing_candidate_after_one_revision(tmp_path):
    config, ctx, archive = setup_run(tmp_path, "regress")
    state = asyncio.run(_run(config, ctx, archive))
    assert not state["decisions"]
    edits = archive.list(EditRecord, run_id="run-1")
    assert any(e.status == "rejected" and "local check" in e.reason for e in edits)


def test_malformed_llm_replies_become_rejected_proposals():
    spec = HarnessSpec()
    direction = Direction(id="d0", cause="wrong", description="x", task_ids=["a", "b"])
    editor = LLMEditor("openai/gpt-4o-mini", mock_response="this is not json")
    proposal = editor.propose(direction, spec, {})
    cand = proposal.candidate
    assert cand.status == "rejected" and "invalid reply after one repair" in cand.reason
    assert len(proposal.calls) == 2  # the first try and one repair
    bad_patch = json.dumps({"rationale": "r", "patch": [{"op": "replace", "path": "/nope/x", "value": 1}]})
    cand = LLMEditor("openai/gpt-4o-mini", mock_response=bad_patch).propose(direction, spec, {}).candidate
    assert cand.status == "rejected" and "/nope/x" in cand.reason
    good = json.dumps({"rationale": "be brief",
                       "patch": [{"op": "replace", "path": "/prompt/system", "value": "Be brief."}]})
    cand = LLMEditor("openai/gpt-4o-mini", mock_response=good).propose(direction, spec, {}).candidate
    assert cand.status == "proposed" and cand.patch[0]["value"] == "Be brief."
    curator = LLMCurator("openai/gpt-4o-mini", mock_response="{\"directions\": 3}")
    curation = curator.curate([Trajectory(task_id="a", split="train", final_answer="x")], spec, {})
    assert curation.directions == [] and "invalid reply" in curation.reason


def test_malformed_llm_edits_in_a_run_are_rejected_not_crashes(tmp_path):
    config, ctx, archive = setup_run(tmp_path, "help", editor=LLMEditor("openai/gpt-4o-mini", mock_response="{oops"))
    state = asyncio.run(_run(config, ctx, archive))
    assert not state["decisions"]
    assert all(e.status == "rejected" for e in archive.list(EditRecord, run_id="run-1"))


def test_meta_role_llm_calls_land_in_the_archive(tmp_path):
    directions = json.dumps({"directions": [{"cause": "wrong word", "description": "d",
                                             "task_ids": ["w-apple", "w-pear"]}]})
    fix = json.dumps({"rationale": "name the function", "patch": [
        {"op": "replace", "path": "/prompt/system", "value": "Answer the task. Call exactly the function asked for."}]})
    config, ctx, archive = setup_run(tmp_path, "help",
                                     curator=LLMCurator("openai/gpt-4o-mini", mock_response=directions),
                                     editor=LLMEditor("openai/gpt-4o-mini", mock_response=fix))
    state = asyncio.run(_run(config, ctx, archive))
    assert [d.accepted for d in state["decisions"]] == [True]
    calls = archive.list(LLMCallRecord, run_id="run-1")
    # round 0: one curator call, one editor call; round 1: every train task passes, so no call
    assert sorted(c.role for c in calls) == ["curator", "editor"]
    for call in calls:
        assert call.model == "openai/gpt-4o-mini" and call.input_tokens > 0 and call.output_tokens > 0
        assert call.latency_s > 0 and call.cost_usd > 0 and call.response["content"] in (directions, fix)
    assert archive.list(LLMCallRecord, run_id="run-1", role="editor")[0].request["schema"] == "EditReply"

def _summary(state):
    return {"incumbent": state["incumbent"], "checkpoint": state["checkpoint"], "test": state["test"],
            "decisions": [(d.round, d.candidate_id, d.b, d.c, d.accepted) for d in state["decisions"]],
            "history": [(h.round, h.incumbent, h.incumbent_val) for h in state["history"]]}


def test_a_run_killed_mid_round_resumes_to_the_same_final_state(tmp_path, db_url):
    """The crashed run is checkpointed by LangGraph's SQLite saver, then by its Postgres saver (``db_url``)."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    config, ctx, archive = setup_run(tmp_path / "a", "help")
    reference = asyncio.run(_run(config, ctx, archive))
    config2, ctx2, archive2 = setup_run(tmp_path / "b", "help", fail_once_at=1, db=db_url)
    with pytest.raises(RuntimeError, match="simulated crash"):
        asyncio.run(_run(config2, ctx2, archive2))
    n_decisions = len(archive2.list(GateDecision, run_id="run-1"))
    resumed = asyncio.run(_run(config2, ctx2, archive2, resume=True))
    assert _summary(resumed) == _summary(reference)
    assert archive2.count(GateDecision, run_id="run-1") == archive.count(GateDecision, run_id="run-1") >= n_decisions
    ids = [t.id for t in archive2.list(Trajectory, run_id="run-1")]
    assert len(ids) == len(set(ids))
    assert len(ids) == len(archive.list(Trajectory, run_id="run-1"))
    saved = asyncio.run(read_state(db_url, "run-1", "vace"))  # the graph state lives in db_url's database
    assert saved["incumbent"] == reference["incumbent"] and archive2.get(RunRecord, "run-1").status == "done"
    from typer.testing import CliRunner

    from coevo.cli.app import app

    shown = CliRunner().invoke(app, ["archive", "show", "run-1", "--db", db_url])
    assert shown.exit_code == 0 and '"next": []' in shown.output, shown.output
    report = CliRunner().invoke(app, ["report", "run-1", "--db", db_url, "--out", str(tmp_path / "report")])
    assert report.exit_code == 0 and (tmp_path / "report" / "index.html").is_file(), report.output


def test_report_and_summary_show_rounds_decisions_and_plots(tmp_path):
    from rich.console import Console

    from coevo.report.html import write_report
    from coevo.report.terminal import summary_table

    config, ctx, archive = setup_run(tmp_path, "help")
    state = asyncio.run(_run(config, ctx, archive))
    page = write_report("run-1", config.db, tmp_path / "report")
    text = page.read_text()
    assert "accepted" in text and (tmp_path / "report" / "validation.png").stat().st_size > 1000
    assert re.search(r"trivial-policy baseline on val: (\d\.\d{3}|–)</p>", text)  # three decimals, as every score
    assert (tmp_path / "report" / "lineage.png").exists()
    assert "rules" in text  # the final harness diff against H0 shows the added rule
    # the weight stages: round 0 under H0 (val 0 before and after), round 1 under the accepted candidate (val 1)
    assert "Weight stages" in text and "0.000 → 0.000 (n=4)" in text and "1.000 → 1.000 (n=4)" in text
    console = Console(record=True, width=250)
    console.print(summary_table(state))
    out = console.export_text()
    assert "accepted" in out and "final pair" in out and "1.000" in out
    assert "W[t] -> W[t+1]" in out and "0.000 -> 0.000" in out and "0.25" in out and "0.5 " in out


def test_a_second_run_of_one_config_reports_the_harnesses_the_first_run_stored(tmp_path):
    """H0 and the accepted edit's child are content-addressed rows the first run owns; the second run of the
    same config reads them through its own links (RunHarness): its report diffs the same final harness
    against H0 and draws the lineage."""
    from coevo.report.html import write_report

    pages = []
    for run_id in ("run-1", "run-2"):
        config, ctx, archive = setup_run(tmp_path, "help", db=str(tmp_path / "shared.db"))
        ctx.trainer.own_run = run_id
        state = asyncio.run(_run(config, ctx, archive, run_id=run_id))
        assert any(d.accepted for d in state["decisions"])
        pages.append(write_report(run_id, config.db, tmp_path / run_id).read_text())
        assert (tmp_path / run_id / "lineage.png").exists()
    assert archive.list(HarnessRecord, run_id="run-2") == []  # run-1 owns every harness row
    assert [h.origin for h in archive.run_harnesses("run-2")] == [h.origin for h in archive.run_harnesses("run-1")]
    assert all("rules" in page and "(the final harness is H0" not in page for page in pages)


def test_a_demonstrations_task_never_appears_in_a_later_weight_stage_or_local_check(tmp_path):
    # only an accepted harness seals its demonstrations (a rejected one's return: test_sealing.py), so the
    # one candidate here is demonstrations and the policy gets the words right when it sees one
    config, ctx, archive = setup_run(tmp_path, "demos", editor=OfflineEditor(operators=("demonstrations",),
                                                                            demo_answer=demonstration_source(WordEnv())))
    config.meta.local_check = False  # the demonstrations candidate passes its smoke check (and is gated)
    state = asyncio.run(_run(config, ctx, archive))
    edits = archive.list(EditRecord, run_id="run-1")
    demos = {r: {op["value"]["input"].rsplit(" ", 1)[1] for e in edits if e.round == r for op in e.patch
                 if op["path"].startswith("/skills/")} for r in {e.round for e in edits}}
    assert demos[0], "the offline editor should have turned failed train tasks' answers into demonstrations"
    demo_ids = {f"w-{w}" for w in demos[0]}
    assert sealed_tasks(state) == demo_ids and list(state["sealed"]) == [state["incumbent"]]
    (r0, tasks0, _), (r1, tasks1, _) = ctx.trainer.stages
    assert demo_ids <= set(tasks0) and not demo_ids & set(tasks1)  # round 1 trains on the others only
    carriers = {h.id for h in archive.list(HarnessRecord, run_id="run-1")
                if any(f"Repeat the word: {w}" in json.dumps(h.spec) for w in demos[0])}
    checks = [e for e in archive.list(EvaluationRecord, run_id="run-1")
              if e.split == "train" and e.harness_id in carriers]
    assert checks and all(not demo_ids & set(e.task_ids) for e in checks)  # no harness is checked on its own demos
    assert state["history"][1].weights.excluded_tasks == len(demo_ids)


class SameDrawEditor(OfflineEditor):
    """The offline editor drawing every round as in round 0: the same evidence gives the same child (as a
    deterministic LLM editor would), where the library's draw is seeded by the round."""

    def propose(self, *args, round=0, **kwargs):
        return super().propose(*args, round=0, **kwargs)


def test_harness_only_does_not_repropose_a_rejected_candidate_from_identical_evidence(tmp_path):
    config, ctx, archive = setup_run(tmp_path, "regress", strategy="harness_only",
                                     editor=SameDrawEditor(operators=("demonstrations",),
                                                           demo_answer=demonstration_source(WordEnv())))
    config.meta.local_check = False  # the regressing candidate reaches the gate and is rejected there
    ctx.trainer = None
    state = asyncio.run(_run(config, ctx, archive))
    decisions = state["decisions"]
    assert [d.round for d in decisions] == [0, 1] and not any(d.accepted for d in decisions)
    assert decisions[0].candidate_id != decisions[1].candidate_id
    samplers = {h.id for h in archive.list(HarnessRecord, run_id="run-1") if h.origin == "sampling"}
    samples = sorted((e for e in archive.list(EvaluationRecord, run_id="run-1") if e.harness_id in samplers),
                     key=lambda e: e.created_at)
    assert [e.seeds for e in samples] == [[0], [1000]]  # each round samples with its own seed
    # the gate-rejected candidate's demonstrated tasks return to the train set: round 1 samples them again,
    # re-proposes the same child from the same evidence, and check turns it down at once (same spec, same
    # checkpoint: the gate's verdict would repeat); its one revision is what the gate sees in round 1
    assert set(samples[0].task_ids) == set(samples[1].task_ids) == {t.id for t in ctx.tasks("train")}
    edits = [e for e in archive.list(EditRecord, run_id="run-1") if e.round == 1]
    assert any(e.status == "rejected" and "rejected this same harness" in e.reason for e in edits)
    assert {e.child_id for e in edits if e.status == "checked"} == {decisions[1].candidate_id}
    sampler = archive.get(HarnessRecord, samples[0].harness_id)
    assert sampler.origin == "sampling" and sampler.spec["decoding"]["temperature"] == config.train.temperature


def test_each_round_reports_the_weight_stages_own_val_effect_on_the_same_tasks_and_seeds(tmp_path):
    config, ctx, archive = setup_run(tmp_path, "help")
    state = asyncio.run(_run(config, ctx, archive))
    w0, w1 = (h.weights for h in state["history"])
    assert (w0.checkpoint_before, w0.checkpoint_after) == (state["start_checkpoint"], w1.checkpoint_before)
    assert w0.harness_id == state["start_harness"] and w1.harness_id == state["incumbent"]
    for w in (w0, w1):
        assert w.before.per_task.keys() == w.after.per_task.keys() and w.before.split == w.after.split == "val"
        assert [o.seeds for o in w.before.per_task.values()] == [o.seeds for o in w.after.per_task.values()]
        after = ctx.archive.get(Checkpoint, w.checkpoint_after)
        assert (w.train_reward, w.delta_norm) == (after.metrics["reward_mean"], 0.25 * (w.round + 1))
    # validate's b is the stage's "after" evaluation, reused by id: no val rollout is made twice
    assert state["decisions"][0].b == w0.val_after
    val = [e for e in archive.list(EvaluationRecord, run_id="run-1") if e.split == "val"]
    assert len(val) == len({(e.harness_id, e.checkpoint_id) for e in val})


def test_rl_only_reports_the_incumbents_val_from_the_stage_effect(tmp_path):
    config, ctx, archive = setup_run(tmp_path, "help", strategy="rl_only")
    state = asyncio.run(_run(config, ctx, archive))
    assert [h.incumbent_val for h in state["history"]] == [h.weights.val_after for h in state["history"]]
    assert all(h.weights.harness_id == state["start_harness"] for h in state["history"])
