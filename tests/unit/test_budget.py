"""Budget accounting (issue 13 item 6): every phase's rollouts, policy tokens and meta-LLM spend is
stored per (run, round, phase), generically for any node of a ``meta_graph``, and work reused by a
later phase is counted once."""

from __future__ import annotations

import asyncio
import inspect

from test_meta_loop import _run, setup_run

from coevo.meta.budget import PhaseKey, current_phase, phased, score_curve, totals
from coevo.meta.state import EditRequest
from coevo.records import BudgetRecord, EvaluationRecord, LLMCallRecord


def test_every_phase_of_a_vace_run_is_accounted_once_with_its_round(tmp_path):
    config, ctx, archive = setup_run(tmp_path, "help")
    state = asyncio.run(_run(config, ctx, archive))
    rows = [(b.round, b.phase, b.split, b.rollouts) for b in archive.list(BudgetRecord, run_id="run-1")]
    # 4 train / 4 val / 4 test tasks, k=1; two samples per direction (setup_run: the verifier-error rule and
    # demonstrations of w-pear), each smoke-checked (2 + 2, the incumbent's 2 shared) and locally checked on the
    # 3 train tasks no sample of the round demonstrates (the incumbent's and the rule's 3 + 3, the
    # demonstrations sample's 3; h7's sealing leaves w-pear out of every check); the demonstrations sample fails
    # its local check and, with one operation, has no smaller revision; the rule is accepted, so round 1 trains
    # on all 4 train tasks (no accepted demonstration). stage_effect measures (issue 39 item 2: reported, not
    # charged); validate is charged for its b, stage_effect's W[t+1] evaluation, where the gate first uses it
    assert rows == [(0, "train", "train", 4), (0, "stage_effect", "val", 4), (0, "stage_effect", "val", 4),
                    (0, "check", "train", 2), (0, "check", "train", 2), (0, "check", "train", 3),
                    (0, "check", "train", 3), (0, "check", "train", 2), (0, "check", "train", 3),
                    (0, "validate", "val", 4), (0, "validate", "val", 4),
                    (1, "train", "train", 4), (1, "stage_effect", "val", 4), (1, "validate", "val", 4),
                    (2, "final_test", "test", 4), (2, "final_test", "test", 4)]
    # round 1's W[t] val is round 0's validation: charged there, so stage_effect does not list it again
    budgets = archive.list(BudgetRecord, run_id="run-1")
    evaluations = {e.id for e in archive.list(EvaluationRecord, run_id="run-1")}
    measured = {b.id.split(":", 2)[2] for b in budgets if b.id.split(":")[1] == "measure"}
    charged = {b.id.split(":", 2)[2] for b in budgets if b.id.split(":")[1] == "eval"}
    assert evaluations == measured | charged and len(measured & charged) == 2  # b of round 0 and of round 1
    checks = 2 + 2 + 3 + 3 + 2 + 3
    assert totals(budgets)["rollouts"] == 4 + checks + 8 + 4 + 4
    assert totals(budgets, include_test=True)["rollouts"] == 4 + checks + 8 + 4 + 4 + 8 + 8 + 4
    curve = score_curve(budgets, state["history"])
    assert [(c.round, c.rollouts) for c in curve] == [(0, 4 + checks + 8), (1, 4 + checks + 8 + 4 + 4)]


def test_a_resumed_run_counts_nothing_twice(tmp_path):
    config, ctx, archive = setup_run(tmp_path, "help", fail_once_at=1)
    try:
        asyncio.run(_run(config, ctx, archive))
    except RuntimeError:
        pass
    before = {b.id for b in archive.list(BudgetRecord, run_id="run-1")}
    asyncio.run(_run(config, ctx, archive, resume=True))
    after = archive.list(BudgetRecord, run_id="run-1")
    assert before < {b.id for b in after} and len(after) == len({b.id for b in after})
    assert [b.phase for b in after if b.round == 1] == ["train", "stage_effect", "validate"]


def test_meta_llm_calls_are_accounted_with_tokens_and_cost_in_their_phase(tmp_path):
    config, ctx, archive = setup_run(tmp_path, "help")
    calls = [LLMCallRecord(id=f"c{i}", role="editor", model="m", input_tokens=100 * i, output_tokens=10,
                           cost_usd=0.5) for i in (1, 2)]
    edit_in_round_3 = phased("edit", lambda request: ctx.store_calls(calls))
    edit_in_round_3(EditRequest(direction=None, incumbent="h", round=3, train_trajectories=[]))
    edit_in_round_3(EditRequest(direction=None, incumbent="h", round=3, train_trajectories=[]))  # same calls again
    (budget,) = archive.list(BudgetRecord, run_id=ctx.run_id)
    assert (budget.round, budget.phase, budget.split) == (3, "edit", "")
    assert (budget.meta_calls, budget.meta_input_tokens, budget.meta_output_tokens) == (2, 300, 20)
    assert budget.meta_cost_usd == 1.0 and budget.rollouts == 0
    assert len(archive.list(LLMCallRecord, run_id=ctx.run_id)) == 2


def test_phased_nodes_keep_their_signature_and_the_phase_ends_with_them():
    seen = []

    async def node(state: dict, runtime=None) -> dict:
        seen.append(current_phase())
        return {}

    wrapped = phased("validate", node)
    asyncio.run(wrapped({"round": 2}, runtime=None))
    assert seen == [PhaseKey(2, "validate")] and current_phase() == PhaseKey(-1, "outside")
    assert list(inspect.signature(wrapped).parameters) == ["state", "runtime"]
    assert phased("x", len) is len  # not a Python function: left alone


def test_compare_matches_budgets_and_draws_score_vs_rollouts(tmp_path):
    from rich.console import Console
    from test_compare import services

    from coevo.app.compare import compare
    from coevo.report.compare import write_compare_report
    from coevo.report.terminal import budget_table

    config, _, archive = setup_run(tmp_path)
    result = asyncio.run(compare(config, ["vace", "rl_only", "static"], 1, archive=archive,
                                 context_for=services(archive)[0]))
    vace, rl, static = result.rows
    # vace: round 0 trains (4), measures the stage (4 + 4 val: not charged), checks two samples per direction
    # (the editor's full library: demonstrations of w-apple and w-fig, then the rule) and the demonstrations'
    # revision on the 2 train tasks none demonstrates (h7's sealing), smoke and local check alike, so the
    # local check reuses the smoke evaluation: incumbent 2 + demonstrations 2 + revision 2 + rule 2 = 8 train;
    # validates (8 val: the candidate, and b, stage_effect's W1 evaluation charged where the gate uses it);
    # round 1 trains and validates its b (4 + 4)
    assert [(p.round, p.rollouts, p.val) for p in vace.curve] == [(0, 20, 1.0), (1, 28, 1.0)]
    # rl_only: train 4 per round, its stage effect measured; H0 never improves on val
    assert [(p.round, p.rollouts, p.val) for p in rl.curve] == [(0, 4, 0.0), (1, 8, 0.0)]
    assert rl.measured_by_phase == {"stage_effect": 12.0}  # W0 and W1, then W2 (W1's is not listed twice)
    assert (vace.rollouts, rl.rollouts, static.rollouts) == (28, 8, 0) and static.curve == []
    for row, run in zip(result.rows, result.runs):
        spent = archive.list(BudgetRecord, run_id=run.run_id)
        assert row.rollouts == sum(b.rollouts for b in spent if b.split != "test" and b.phase != "stage_effect")
    # the matched budget is rl_only's total; vace has no val point by then (its round 0 cost 20)
    assert result.matched_budget == 8
    assert (vace.val_at_budget, rl.val_at_budget, static.val_at_budget) == (None, 0.0, None)

    console = Console(record=True, width=200)
    console.print(budget_table(result))
    text = console.export_text()
    assert "matched at 8 rollouts" in text and "28" in text
    page = write_compare_report(result, tmp_path / "cmp")
    assert "Score vs rollouts" in page.read_text() and "matched budget: 8 rollouts" in page.read_text()
    assert (tmp_path / "cmp" / "rollouts.png").stat().st_size > 1000


def test_the_run_report_tables_the_spend_per_phase(tmp_path):
    from coevo.report.html import write_report

    config, ctx, archive = setup_run(tmp_path, "help")
    asyncio.run(_run(config, ctx, archive))
    text = write_report("run-1", config.db, tmp_path / "report").read_text()
    assert "Budget per phase" in text
    assert "<tr><td>0</td><td>stage_effect</td><td>val</td><td>8</td>" in text  # two val evaluations of 4 tasks
    assert "<tr><td>2</td><td>final_test</td><td>test</td><td>8</td>" in text
    assert "<tr><th colspan=3>total charged (measurement apart)</th><td>35</td>" in text  # 27 + 8: the first


def test_policy_tokens_and_cost_of_evaluations_and_stages_are_summed():
    from types import SimpleNamespace

    from coevo.meta.budget import eval_budget, stage_budget

    result = SimpleNamespace(evaluation_id="e1", split="val", n_rollouts=6, input_tokens=600, output_tokens=60,
                             cost_usd=0.03)
    with_phase = phased("validate", lambda state: eval_budget("run-1", result))
    record = with_phase({"round": 1})
    assert (record.id, record.round, record.phase, record.split) == ("run-1:eval:e1", 1, "validate", "val")
    assert (record.rollouts, record.policy_input_tokens, record.policy_output_tokens, record.policy_cost_usd) == (
        6, 600, 60, 0.03)
    rollouts = [SimpleNamespace(input_tokens=100, output_tokens=10 * i, cost_usd=0.01) for i in range(3)]
    stage = phased("train", lambda state: stage_budget("run-1", "ckpt-2", rollouts))({"round": 2})
    assert (stage.id, stage.round, stage.phase, stage.split) == ("run-1:stage:ckpt-2", 2, "train", "train")
    assert (stage.rollouts, stage.policy_input_tokens, stage.policy_output_tokens) == (3, 300, 30)
    assert abs(stage.policy_cost_usd - 0.03) < 1e-12
    assert totals([record, stage])["policy_output_tokens"] == 90
