"""The papers' comparison protocols (issue 39 item 3) on fakes: ``coevo compare`` under a configured
caps protocol, a rollout budget or an updates cap (Harness-S Table 9: equal optimiser updates), one
protocol per comparison, and a planned baseline (sia) matched to the rounds the reference actually ran."""

from __future__ import annotations

import asyncio

import pytest
from rich.console import Console
from test_equal_spend import budgeted, small_compare
from test_meta_loop import _run

from coevo.app.compare import compare, run_config
from coevo.config import RunConfig
from coevo.records import Checkpoint, RunRecord
from coevo.report.terminal import compare_table


def test_an_updates_cap_ends_a_run_before_the_stage_that_would_overrun_it(tmp_path):
    config, ctx, archive = budgeted(tmp_path, 0)
    config = config.model_copy(update={"updates": 1, "train": config.train.model_copy(update={"steps": 1})})
    ctx.config = config
    state = asyncio.run(_run(config, ctx, archive))
    made = [c.metrics.get("updates") for c in archive.list(Checkpoint, run_id="run-1") if c.parents]
    assert made == [1]  # round 0's stage recorded its updates; round 1's would make 2 > 1
    assert state["budget_stop"] == ("updates: round 1's weight stage (1 updates) would take the run past updates = 1 "
                                    "(made 1)")
    assert state["test"]["final"] is not None and archive.get(RunRecord, "run-1").status == "done"


def test_compare_at_equal_updates_gives_every_training_strategy_n_updates(tmp_path):
    result, config, archive = small_compare(tmp_path, ["vace", "rl_only", "static"], 1, updates=3)
    assert result.protocol == "updates" and result.updates == 3 and result.budget == 0
    for run in result.runs:
        made = sum((c.metrics or {}).get("updates", 0) for c in archive.list(Checkpoint, run_id=run.run_id))
        rounds = archive.get(RunRecord, run.run_id).config["rounds"]
        if run.strategy == "static":  # trains nothing: its configured rounds, no cap to reach
            assert (made, rounds, run.budget_stop) == (0, config.rounds, "")
        else:
            assert (made, rounds, run.stages) == (3, 3, 3)  # rounds raised to N: the schedule ends at the cap
    console = Console(record=True, width=300)
    console.print(compare_table(result))
    assert "at equal updates (3 weight updates)" in console.export_text()


def test_a_comparison_has_one_protocol():
    with pytest.raises(ValueError, match="one protocol"):
        asyncio.run(compare(RunConfig(), ["vace"], 1, budget=10, updates=2))
    assert run_config(RunConfig(rounds=2, updates=5), "rl_only", 0).rounds == 5
    assert run_config(RunConfig(rounds=2, updates=5), "harness_only", 0).rounds == 2  # makes no update


def test_a_planned_baseline_runs_the_rounds_the_reference_ran(tmp_path):
    # at a budget of 36 vace makes 3 weight stages (round 0 costs 20, later rounds 8: test_budget), not the
    # configured 2 rounds: sia runs 3 weight stages and 3 proposal rounds, as vace did; the reference runs first
    result, config, archive = small_compare(tmp_path, ["sia", "vace"], 1, budget=36)
    sia, vace = result.runs
    assert (sia.strategy, vace.strategy) == ("sia", "vace")  # table order kept
    assert vace.stages >= 1 and archive.get(RunRecord, sia.run_id).config["rounds"] == vace.stages
    assert archive.get(RunRecord, vace.run_id).config["rounds"] == 36  # open-ended: the cap ends it
    assert archive.get(RunRecord, vace.run_id).created_at <= archive.get(RunRecord, sia.run_id).created_at
    assert vace.stages == 3 != config.rounds  # what it ran, not the configured rounds
