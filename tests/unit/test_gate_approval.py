"""Gate approvals (issue 17, item 2): the approval mode belongs to the run, each pending question is
answered by its interrupt id, a resume without an answer shows the question again and changes
nothing, and the printed resume hint works as printed. Also the gate's reason states the paired
difference c − b with its 95 % interval."""

from __future__ import annotations

import asyncio
import dataclasses
import re

import pytest
from test_meta_loop import setup_run
from typer.testing import CliRunner

from coevo.app.preflight import Prepared
from coevo.app.run import RunError, resolve_answers, run_meta
from coevo.cli.app import app
from coevo.config import RunConfig
from coevo.evaluation.gate import decide, gate_difference
from coevo.meta.state import Candidate, Direction
from coevo.records import GateDecision, GatePair, RunRecord
from coevo.roles.curator import Curation
from coevo.roles.editor import Proposal
from coevo.storage import Archive

RULE = "Answer the task. Call exactly the function asked for."


class TwoDirections:
    """Two repair directions whenever a train task fails (none once all pass)."""

    def curate(self, trajectories, spec, tasks):
        failed = sorted({t.task_id for t in trajectories if not t.passed})
        if not failed:
            return Curation(directions=[])
        return Curation(directions=[Direction(id=f"d{i}", cause=f"cause {i}", description="d", task_ids=failed)
                                    for i in range(2)])


class TaggedEditor:
    """One candidate per direction: the helpful rule, tagged with the direction (two distinct harnesses
    that both fix every task)."""

    def propose(self, direction, spec, tasks, solved=(), *, round=0, sample=0, allowed=None):
        patch = [{"op": "replace", "path": "/prompt/system", "value": f"{RULE} ({direction.id})"}]
        return Proposal(candidate=Candidate(id=f"{spec.short_id}-{direction.id}", direction=direction.id,
                                            parent_id=spec.id, patch=patch, rationale="tagged rule"))

    def revise(self, direction, spec, candidate, feedback, tasks):
        return Proposal(candidate=candidate.model_copy(update={"status": "rejected", "reason": "no revision"}))


def two_candidate_run(tmp_path, db=None):
    config, ctx, archive = setup_run(tmp_path, "help", curator=TwoDirections(), editor=TaggedEditor(), db=db)
    config.meta.local_check = False
    config.meta.candidates = 2
    return config, ctx, archive


def patch_services(monkeypatch, ctx):
    """Make the CLI's runs use ``ctx``'s fakes (env, policy, trainer, roles) with the run's own config,
    archive, id, approval mode and the CLI's reporter; no reference is loaded."""
    import coevo.app.run as meta_run

    monkeypatch.setattr(meta_run, "preflight", lambda cfg, strategy: Prepared(ctx.env, None, None))
    monkeypatch.setattr(meta_run, "make_context", lambda cfg, archive, run_id, reporter=None, **built: (
        dataclasses.replace(ctx, config=cfg, archive=archive, run_id=run_id, reporter=reporter)))


def write_config(folder, config, **paths):
    """A run config file in ``folder`` for ``setup_run``'s fakes; ``paths`` override db, out_dir, harness."""
    keys = {"db": config.db, "out_dir": str(folder), "harness": config.harness, **paths}
    path = folder / "run.toml"
    path.write_text("".join(f'{k} = "{v}"\n' for k, v in keys.items()) + 'policy = "fake:words"\nrounds = 2\n'
                    '[env]\nref = "words"\nn_train = 4\nn_val = 4\nn_test = 4\n[meta]\nlocal_check = false\n'
                    'candidates = 2\n')
    return path


def _pending(state):
    return [(i.id, i.value["candidate"]) for i in state.get("__interrupt__", [])]


def test_two_candidates_each_answered_by_id_and_a_bare_resume_changes_nothing(tmp_path):
    config, ctx, archive = two_candidate_run(tmp_path)
    go = lambda **kw: asyncio.run(run_meta(config, run_id="run-1", context=ctx, archive=archive, **kw))  # noqa: E731
    first = go(approve=True)
    [(q1, cand1)] = _pending(first)
    assert archive.get(RunRecord, "run-1").config["gate"]["approve"] is True  # stored with the run

    # the resuming call does not repeat approve=True: the run keeps pausing all the same
    second = go(resume=True, answers={q1: "no"})
    [(q2, cand2)] = _pending(second)
    assert q2 != q1 and cand2 != cand1
    assert archive.list(GateDecision, run_id="run-1") == []  # the node has not finished: nothing decided yet

    for _ in range(2):  # a resume without an answer shows the same question and changes nothing
        again = go(resume=True)
        assert _pending(again) == [(q2, cand2)]
        assert archive.list(GateDecision, run_id="run-1") == [] and archive.get(RunRecord, "run-1").status == "paused"

    with pytest.raises(RunError, match="names 0 of run run-1's pending questions"):
        go(resume=True, answers={q1: "yes"})  # q1 is answered already: its id is no longer pending
    with pytest.raises(RunError, match="neither yes nor no"):
        go(resume=True, answers={q2: "maybe"})

    final = go(resume=True, answers={q2[:8]: "yes"})  # a unique prefix of the id is enough
    assert "__interrupt__" not in final
    decisions = {d.candidate_id: d for d in archive.list(GateDecision, run_id="run-1") if d.round == 0}
    assert not decisions[cand1].accepted and decisions[cand1].reason.endswith("; person rejected")
    assert decisions[cand2].accepted and decisions[cand2].reason.endswith("; person accepted")
    assert final["history"][0].incumbent == cand2 and archive.get(RunRecord, "run-1").status == "done"


def test_without_approval_the_same_run_accepts_the_first_of_two_equal_candidates(tmp_path):
    """The control: with the gate alone both candidates pass and the first one is kept, so the
    person's "no" above is what changed the outcome."""
    config, ctx, archive = two_candidate_run(tmp_path)
    state = asyncio.run(run_meta(config, run_id="run-1", context=ctx, archive=archive))
    round0 = [d for d in archive.list(GateDecision, run_id="run-1") if d.round == 0]
    assert [d.accepted for d in round0] == [True, True]
    assert state["history"][0].incumbent == round0[0].candidate_id


def test_resolve_answers_needs_an_id_when_several_questions_are_pending():
    pending = tuple(type("I", (), {"id": i, "value": {}})() for i in ("aa11", "bb22"))
    assert resolve_answers({"aa": "Y", "bb22": "reject"}, pending, "r") == {"aa11": "yes", "bb22": "no"}
    with pytest.raises(RunError, match="names 0 of run r's pending questions"):
        resolve_answers({"": "yes"}, pending, "r")
    with pytest.raises(RunError, match="no pending gate question"):
        resolve_answers({"": "yes"}, (), "r")


def test_gate_reason_states_the_paired_difference_and_its_interval():
    # 10 val tasks: the incumbent passes 0-4, the candidate 0-3, 5 and 6 (c − b = +0.10)
    pairs = [GatePair(task_id=f"t{i}", b=float(i < 5), c=float(i in (0, 1, 2, 3, 5, 6)), b_passed=i < 5,
                      c_passed=i in (0, 1, 2, 3, 5, 6)) for i in range(10)]
    assert gate_difference(pairs) == "c − b = +0.10 [−0.20, 0.40] over 10 tasks"
    cfg = RunConfig().gate
    accepted, reason = decide(0.5, 0.6, pairs, cfg)
    assert accepted and reason == "c=0.6000 beats b=0.5000; c − b = +0.10 [−0.20, 0.40] over 10 tasks"
    worse = [p.model_copy(update={"b": p.c, "c": p.b}) for p in pairs]
    assert gate_difference(worse) == "c − b = −0.10 [−0.40, 0.20] over 10 tasks"
    sure = [GatePair(task_id=f"t{i}", b=0.0, c=float(i < 1), b_passed=False, c_passed=i < 1) for i in range(10)]
    assert gate_difference(sure) == "c − b = +0.10 [0.00, 0.30] over 10 tasks"
    assert decide(0.5, 0.5, [], cfg) == (False, "c=0.5000 does not beat b=0.5000")  # no pairs: no interval


def test_cli_pause_prints_a_resume_hint_that_works_as_printed(tmp_path, monkeypatch, db_url):
    """``coevo run --approve-gate`` (stdin not a TTY) pauses with a hint; running the hint as printed
    (with an answer filled in) answers that question only; ``--resume`` without ``--answer`` shows the
    pending question again; the approval mode survives every resume. On a SQLite file, then on a
    PostgreSQL URL (the Postgres checkpointer)."""
    config, ctx, _ = two_candidate_run(tmp_path, db=db_url)
    patch_services(monkeypatch, ctx)
    config_file = write_config(tmp_path, config)
    runner = CliRunner()
    out = runner.invoke(app, ["run", str(config_file), "--approve-gate", "--no-report"], terminal_width=300)
    assert out.exit_code == 0, out.output
    hint = re.search(r"answer with: (coevo run --resume (\S+) --db (\S+) --answer (\w+)=yes\|no)", out.output)
    assert hint, out.output
    run_id, db, q1 = hint.group(2), hint.group(3), hint.group(4)
    assert db == config.db and "--approve-gate" not in hint.group(1)
    assert f"gate question {q1}" in out.output and "the gate alone would accept" in out.output

    answered = runner.invoke(app, hint.group(1).replace("=yes|no", "=no").split()[1:], terminal_width=300)
    assert answered.exit_code == 0, answered.output
    q2 = re.search(r"--answer (\w+)=yes\|no", answered.output).group(1)
    assert q2 != q1

    bare = runner.invoke(app, ["run", "--resume", run_id, "--db", db], terminal_width=300)
    assert bare.exit_code == 0 and f"--answer {q2}=yes|no" in bare.output and f"gate question {q2}" in bare.output
    with Archive(db) as archive:
        assert archive.list(GateDecision, run_id=run_id) == []

    done = runner.invoke(app, ["run", "--resume", run_id, "--db", db, "--answer", f"{q2}=yes", "--no-report"],
                         terminal_width=300)
    assert done.exit_code == 0, done.output
    assert "summary" in done.output
    assert re.search(r"gate +round 0: \w+ ACCEPTED: c=1.0000 beats b=0.0000, paired bootstrap p=0.000 \(Bonferroni "
                     r"over 2 candidates: level 0.05/2\); c − b = \+1.00 \[1.00, 1.00\] over 4 tasks; person accepted",
                     done.output), done.output
    with Archive(db) as archive:
        fates = sorted((d.accepted, d.reason.rsplit("; ", 1)[-1]) for d in archive.list(GateDecision, run_id=run_id))
        assert fates == [(False, "person rejected"), (True, "person accepted")]
    lone = runner.invoke(app, ["run", "--answer", "yes"])
    assert lone.exit_code == 1 and "add --resume RUN_ID" in lone.output


def test_approval_switched_on_at_a_resume_is_stored_and_kept(tmp_path):
    config, ctx, archive = setup_run(tmp_path, "help", fail_once_at=0)
    go = lambda **kw: asyncio.run(run_meta(config, run_id="run-1", context=ctx, archive=archive, **kw))  # noqa: E731
    with pytest.raises(RuntimeError, match="simulated crash"):
        go()
    assert archive.get(RunRecord, "run-1").config["gate"]["approve"] is False
    paused = go(resume=True, approve=True)
    [(question, _)] = _pending(paused)
    assert archive.get(RunRecord, "run-1").config["gate"]["approve"] is True
    assert _pending(go(resume=True)) == _pending(paused)  # a later plain resume still waits for the person
    assert "__interrupt__" not in go(resume=True, answers={"": "yes"})


def test_cli_resume_refuses_settings_it_would_ignore():
    result = CliRunner().invoke(app, ["run", "--resume", "vace-1", "--set", "train.steps=8"])
    text = " ".join(result.output.split())
    assert result.exit_code == 1 and "--set, --strategy and --meta-model do not apply" in text
