"""Comparisons at equal spend (issue 22 item 4) on fakes: a run under a rollout cap ends before the
first spending call whose declared size would overrun it, never spends past the cap, still runs its
own final test and measures the final pair on val; ``coevo compare --budget N`` gives every strategy
N, raises the rounds of open-ended strategies only, tables the spend by phase and says which strategy
cannot reach N."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from rich.console import Console
from test_compare import services
from test_meta_loop import _run, setup_run

from coevo.app.compare import compare, compare_run_id, run_config
from coevo.config import RunConfig
from coevo.harnesses.spec import load_harness
from coevo.meta.budget import BudgetExhausted, by_phase, ending, measured_by_phase, phased, totals
from coevo.records import BudgetRecord, RunRecord
from coevo.report.compare import write_compare_report
from coevo.report.terminal import spend_table
from coevo.strategies import STRATEGIES
from coevo.training.harness_s import Routed
from coevo.training.kinds import GRPO, RSFT, stage_rollouts
from coevo.training.schedule import PersistentSampler, WeightPhase

SMALL_STAGE = {"steps": 1, "tasks_per_step": 2, "num_generations": 2, "resample": 0}
"""A weight stage that declares 4 rollouts, what the fake trainer spends on the 4 train tasks."""


def budgeted(tmp_path, budget, strategy="vace"):
    config, ctx, archive = setup_run(tmp_path, "help", strategy=strategy)
    config = config.model_copy(update={"budget": budget, "train": config.train.model_copy(update=SMALL_STAGE)})
    ctx.config = config
    return config, ctx, archive


def test_a_capped_run_stops_before_the_phase_that_would_overrun_and_still_tests_its_pair(tmp_path, caplog):
    # uncapped, round 0 spends train 4, checks 15 (two samples per direction, w-pear's demonstration left
    # out of every check), validate 8 (the candidate, and b: stage_effect's W1 evaluation, charged where the
    # gate first uses it); stage_effect's 8 are measurement, not charged: a cap of 20 stops before validate
    config, ctx, archive = budgeted(tmp_path, 20)
    with caplog.at_level("INFO", logger="coevo.loop"):
        state = asyncio.run(_run(config, ctx, archive))
    said = [r for r in caplog.records if getattr(r, "topic", "") == "validate"]
    assert said and said[-1].getMessage() == f"{state['budget_stop']}; the run ends here, then its final test"
    budgets = archive.list(BudgetRecord, run_id="run-1")
    assert totals(budgets)["rollouts"] == 19 <= config.budget
    assert by_phase(budgets) == {"train": 4, "check": 15}  # validate's first 4 would make 23
    assert measured_by_phase(budgets) == {"stage_effect": 8}
    assert "val evaluation" in state["budget_stop"] and "past budget = 20 (spent 19" in state["budget_stop"]
    assert state["history"] == [] and not state.get("decisions")  # gate and next_round were passed over
    assert state["checkpoint"] != state["start_checkpoint"] and state["test"]["final"].score == 0.0
    # the final pair (H0, W1) on val is stage_effect's evaluation, reused: measured once, not listed again
    assert state["final_val"].evaluation_id == state["stage"].after.evaluation_id
    assert [b.phase for b in budgets if b.split == "val"] == ["stage_effect", "stage_effect"]
    assert {b.phase for b in budgets if b.split == "test"} == {"final_test"}


def test_measurement_is_reported_not_charged_and_a_deciding_phase_pays_for_what_it_reuses(tmp_path):
    # issue 39 item 2: stage_effect (not in VACE's Algorithm 1) measures; the gate's b is its W1 evaluation
    config, ctx, archive = budgeted(tmp_path, 30)
    state = asyncio.run(_run(config, ctx, archive))
    budgets = archive.list(BudgetRecord, run_id="run-1")
    assert by_phase(budgets) == {"train": 4, "check": 15, "validate": 8} and totals(budgets)["rollouts"] == 27
    assert measured_by_phase(budgets) == {"stage_effect": 8}
    charged = {r.id.split(":", 2)[2] for r in budgets if r.phase == "validate"}
    measured = {r.id.split(":", 2)[2] for r in budgets if r.phase == "stage_effect"}
    assert len(charged & measured) == 1  # one evaluation, measured in stage_effect, charged in validate
    assert [d.accepted for d in state["decisions"]] == [True]  # round 0 fits now; round 1's stage would not
    assert "round 1's weight stage (4 rollouts)" in state["budget_stop"]


def test_a_budget_that_fits_the_whole_schedule_changes_nothing_but_measures_val(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    config, ctx, archive = budgeted(tmp_path / "a", 0)
    free = asyncio.run(_run(config, ctx, archive))
    config, ctx, archive = budgeted(tmp_path / "b", 1000)
    capped = asyncio.run(_run(config, ctx, archive))
    assert "budget_stop" not in capped and "final_val" not in free
    assert [d.accepted for d in capped["decisions"]] == [d.accepted for d in free["decisions"]] == [True]
    assert capped["final_val"].harness_id == capped["incumbent"] and capped["final_val"].score == 1.0
    assert capped["test"]["final"].score == free["test"]["final"].score == 1.0


def test_a_node_that_hits_the_cap_waits_for_its_running_calls_and_counts_only_what_fit(tmp_path):
    config, ctx, archive = budgeted(tmp_path, 6)
    ctx.run_id = "capped"
    h0, ckpt = archive.add_harness(load_harness(config.harness), [], "base", "capped"), "w0"

    async def both(state, runtime):
        c = runtime.context
        await asyncio.gather(c.evaluate(h0, ckpt, "val"), c.evaluate(h0, ckpt, "val", seed=7))
        return {"incumbent": "never"}

    node = phased("validate", both)
    out = asyncio.run(node({"round": 0}, runtime=SimpleNamespace(context=ctx)))
    assert "past budget = 6 (spent 0, running 4)" in out["budget_stop"] and "incumbent" not in out
    assert [b.rollouts for b in archive.list(BudgetRecord, run_id="capped")] == [4]  # the first call finished, counted
    assert ctx.budget_stop and asyncio.run(node({"round": 0}, runtime=SimpleNamespace(context=ctx))) == {}
    with pytest.raises(BudgetExhausted):  # stopped: nothing more is spent
        asyncio.run(ctx.evaluate(h0, ckpt, "train"))
    assert asyncio.run(ctx.evaluate(h0, ckpt, "test")).n_rollouts == 4  # measurement is never refused


def test_once_stopped_every_loop_router_ends_and_nodes_are_passed_over():
    route = ending(lambda state: "continue")
    assert route({"round": 1}) == "continue" and route({"budget_stop": "budget: x"}) == "done"
    assert phased("train", lambda state: {"round": 9})({"budget_stop": "budget: x"}) == {}
    assert phased("final_test", lambda state: {"test": 1})({"budget_stop": "budget: x"}) == {"test": 1}


def test_a_weight_stage_declares_its_most_rollouts():
    train = RunConfig().train.model_copy(update={"steps": 3, "tasks_per_step": 2, "num_generations": 4,
                                                 "resample": 1, "rescue": False})
    assert stage_rollouts(train) == 3 * 2 * 4 * 2  # + one dynamic-sampling round per step
    assert stage_rollouts(train, GRPO(siblings=(object(),))) == 3 * 2 * 4 * 2  # rescue off
    routed = Routed(siblings=(object(),), route=lambda t, k: [])
    assert stage_rollouts(train, routed) == 3 * 2 * 4 * 3  # + one rescue group per task
    rsft = train.model_copy(update={"algorithm": "rsft"})
    phase = WeightPhase(sampler=PersistentSampler(0), stream=[], position=0, max_steps=5)
    assert stage_rollouts(rsft, RSFT(phase=phase)) == 5 * 2 * 4  # a WHALE phase's length
    # num_iterations passes reuse each generation batch: 3 steps at 2 passes sample ceil(3 / 2) = 2 batches
    twice = train.model_copy(update={"num_iterations": 2})
    assert stage_rollouts(twice) == 2 * 2 * 4 * 2
    assert stage_rollouts(twice.model_copy(update={"steps": 4})) == 2 * 2 * 4 * 2
    assert stage_rollouts(rsft.model_copy(update={"num_iterations": 2}), RSFT(phase=phase)) == 5 * 2 * 4  # RSFT: rounds


@pytest.mark.parametrize("steps,passes", [(4, 2), (3, 2), (2, 1)])
def test_a_real_grpo_stage_samples_exactly_what_it_declares(steps, passes):
    # a tiny Llama's GRPO stage (TRL's GRPOTrainer): the rollouts it made are its declared size, so a cap
    # that fits the stage is never refused for the optimiser's extra passes over one batch (issue 39 item 1)
    from knob_kit import grpo

    stage = {"steps": steps, "num_iterations": passes, "tasks_per_step": 1, "num_generations": 2, "resample": 0}
    made = grpo(stage)["trajectories"]
    train = RunConfig().train.model_copy(update={**stage, "rescue": False})
    assert len(made) == stage_rollouts(train) == -(-steps // passes) * 2


def test_open_ended_strategies_run_until_the_budget_and_planned_ones_keep_their_schedule(tmp_path):
    config = RunConfig(rounds=2, budget=300)
    assert run_config(config, "vace", 0).rounds == 300 and run_config(config, "whale", 1).rounds == 300
    assert run_config(config, "stagewise", 0).rounds == 2 and run_config(config, "sia", 0).rounds == 2
    assert run_config(RunConfig(rounds=2), "vace", 0).rounds == 2  # no budget: the config's rounds
    assert compare_run_id(config, "vace", 0) != compare_run_id(RunConfig(rounds=2), "vace", 0)


def small_compare(tmp_path, strategies, seeds, **protocol):
    """``compare`` of ``strategies`` x ``seeds`` on setup_run's fakes with ``SMALL_STAGE`` stages under
    ``protocol`` (``budget=N`` or ``updates=N``); returns (the comparison, the run config, the archive)."""
    config, _, archive = setup_run(tmp_path)
    config = config.model_copy(update={"train": config.train.model_copy(update=SMALL_STAGE)})
    context_for, _ = services(archive)
    result = asyncio.run(compare(config, strategies, seeds, archive=archive, context_for=context_for, **protocol))
    return result, config, archive


def test_compare_at_a_budget_tables_equal_spend_by_phase_and_says_who_cannot_reach_it(tmp_path):
    result, config, archive = small_compare(tmp_path, ["vace", "rl_only", "static"], 2, budget=24)
    vace, rl, static = result.rows
    assert result.budget == 24 and result.matched_budget == 24.0
    assert [archive.get(RunRecord, r.run_id).config["rounds"] for r in result.runs[:2]] == [24, 24]
    # rl_only: train 4 a round, its stage_effect measured and not charged: round 6's stage would overrun,
    # so its final pair (H0, W6) is measured on val
    assert rl.rollouts == 24 and rl.spent_by_phase == {"train": 24.0}
    assert rl.measured_by_phase == {"stage_effect": 28.0}  # 8 in round 0, then only W[t+1]'s 4 (W[t]'s was)
    assert vace.rollouts <= 24 and 24 - vace.rollouts < 8
    assert all(r.budget_stop for r in result.runs if r.strategy != "static")
    assert all("at the cap after" in e for e in vace.ended + rl.ended)
    assert rl.ended[0] == "seed 0: at the cap after 24 rollouts, before round 6's weight stage (4 rollouts)"
    assert vace.val_estimate is not None and vace.val_at_budget == vace.val_estimate.mean
    assert rl.val_estimate.n == 4 and rl.val_at_budget == 0.0
    assert static.rollouts == 0 and "short of the budget 24" in static.ended[0]
    assert result.warnings == [w for w in result.warnings if w.startswith("static cannot reach the budget of 24")]
    assert len(result.warnings) == 1

    console = Console(record=True, width=300)
    console.print(spend_table(result))
    text = console.export_text()
    assert "24 / 24" in text and "train 24" in text and "stage_effect 28" in text and "at the cap" in text
    page = write_compare_report(result, tmp_path / "cmp").read_text()
    assert "At equal spend: 24 rollouts" in page and "static cannot reach the budget" in page


def family_context(tmp_path, strategy, budget):
    """A capped run of ``strategy`` on the word env: setup_run's fakes plus the roles its row names."""
    from coevo.graphs.registry import get_strategy
    from coevo.roles.inheritor import OfflineInheritor
    from coevo.roles.profiler import OfflineProfiler
    from coevo.roles.proposer import OfflineProposer
    from coevo.roles.voter import RuleVoter

    config, ctx, archive = budgeted(tmp_path, budget, strategy)
    row = get_strategy(strategy)
    config = config.model_copy(update={"harness_s": config.harness_s.model_copy(update={"proposals": [2, 2]}),
                                       "train": config.train.model_copy(update={"algorithm": "grpo"})})
    if "proposer" in row.roles:  # a disjoint search split (WHALE §5's D_search) from the env's 4 train tasks
        config = config.model_copy(update={"env": config.env.model_copy(update={"n_train": 2}),
                                           "search": config.search.model_copy(update={"tasks": 2})})
    config = RunConfig.model_validate(config.model_dump())  # the strategy's algorithm (WHALE: RSFT)
    ctx.config, ctx.trainer = config, ctx.trainer if row.trains else None
    ctx.proposer, ctx.inheritor = OfflineProposer(), OfflineInheritor()
    ctx.profiler, ctx.voter = OfflineProfiler(), [RuleVoter()]
    return config, ctx, archive


@pytest.mark.parametrize("strategy", [s for s in STRATEGIES if s != "static"])
def test_every_strategy_ends_cleanly_at_a_cap_within_it_with_its_final_pair_measured(tmp_path, strategy):
    (tmp_path / "free").mkdir()
    config, ctx, archive = family_context(tmp_path / "free", strategy, 0)
    asyncio.run(_run(config, ctx, archive))
    whole = totals(archive.list(BudgetRecord, run_id="run-1"))["rollouts"]
    for cap in (int(whole // 2), int(whole - 1)):  # mid-schedule, and short of only the last phase
        (tmp_path / str(cap)).mkdir(exist_ok=True)
        config, ctx, archive = family_context(tmp_path / str(cap), strategy, cap)
        state = asyncio.run(_run(config, ctx, archive))  # no exception escapes the run
        spent = totals(archive.list(BudgetRecord, run_id="run-1"))["rollouts"]
        assert spent <= cap < whole and state["budget_stop"].startswith("budget: ")
        assert f"past budget = {cap} " in state["budget_stop"]
        if spent == 0:  # nothing fit: the strategy's first phase is one weight stage larger than the cap
            assert "round 0's weight stage" in state["budget_stop"]
        assert len(state["test"]["final"].per_task) == 4 and len(state["test"]["start"].per_task) == 4
        assert state["final_val"].split == "val" and state["final_val"].harness_id == state["incumbent"]
        assert state["final_val"].checkpoint_id == state["checkpoint"]
        assert archive.get(RunRecord, "run-1").status == "done"


def test_an_adaptive_phase_under_a_cap_runs_to_what_is_left_and_a_fixed_stage_is_not_cut(tmp_path, caplog):
    # issue 39 item 4: whale_adaptive's phase declares its most rounds (2 x 4 = 8); at a cap of 6 it used to
    # end the run before any rollout. Now it runs the one round that fits, and the next phase ends the run
    config, ctx, archive = family_context(tmp_path, "whale_adaptive", 6)
    lengths, inner = [], ctx.trainer

    async def trainer(checkpoint, spec, tasks, rnd, kind):
        lengths.append(kind.phase.max_steps)
        return await inner(checkpoint, spec, tasks, rnd, kind)

    ctx.trainer = trainer
    with caplog.at_level("INFO", logger="coevo.loop"):
        state = asyncio.run(_run(config, ctx, archive))
    assert lengths == [1]  # cut from 2 rounds to the 1 that fits; round 1's phase finds nothing left
    assert "cut from 8 to 4 rollouts, what is left of budget = 6" in caplog.text
    assert "round 1's weight stage (8 rollouts)" in state["budget_stop"]
    assert 0 < totals(archive.list(BudgetRecord, run_id="run-1"))["rollouts"] <= 6

    train = RunConfig().train.model_copy(update={"steps": 2, "tasks_per_step": 2, "num_generations": 2,
                                                 "resample": 0, "algorithm": "rsft"})
    adaptive = WeightPhase(sampler=PersistentSampler(0), stream=[], position=0, max_steps=5, stop=lambda r: None)
    assert RSFT(phase=adaptive).fitted(train, 13).phase.max_steps == 3 and RSFT(phase=adaptive).fitted(train, 3) is None
    fixed = WeightPhase(sampler=PersistentSampler(0), stream=[], position=0, max_steps=5)
    assert RSFT(phase=fixed).fitted(train, 13) is None and RSFT(phase=fixed).fitted(train, 20).phase is fixed
    assert GRPO().fitted(train, 7) is None  # a fixed schedule's stage is refused whole, never cut
