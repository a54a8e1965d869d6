"""Budgets checked before rollouts (issue 29, item 5): a harness whose rendered prompt cannot fit
its context budget is refused by ``coevo harness validate``, a run's preflight (H0), the ``check``
node (a candidate) and ``coevo eval`` before any rollout — with the numbers — or, when only some
tasks are too long, named loudly; an evaluation whose rollouts ended before any model call says so."""

from __future__ import annotations

import asyncio
import json

import pytest
from test_evaluate import AdderEnv, model, spec
from test_meta_loop import setup_run
from typer.testing import CliRunner

from coevo.cli.app import app
from coevo.envs.base import Task
from coevo.evaluation.engine import evaluate
from coevo.harnesses import HarnessError
from coevo.harnesses.fit import prompt_fit, prompt_tokens
from coevo.meta.state import Candidate, Direction
from coevo.nodes.refine import check_one
from coevo.observe.log import ChannelHandler, attach
from coevo.records import RunRecord, Trajectory
from coevo.storage import Archive

runner = CliRunner()
HUGE = "x" * 5_000_000
"""A 5 MB system prompt: ~1.25 M tokens at 4 characters a token, against the default 65,532."""


def words(result) -> str:
    return " ".join(result.output.split())


class LongTaskEnv(AdderEnv):
    """The adder env whose task 3 is a 400-token essay (longer than a 256-token budget)."""

    def tasks(self, split: str, n: int | None = None) -> list[Task]:
        return [t.model_copy(update={"prompt": t.prompt + " Consider:" + " seven" * 320}) if t.id.endswith("-3")
                else t for t in super().tasks(split, n)]


def test_validate_refuses_a_prompt_that_cannot_fit_naming_the_numbers(tmp_path):
    big = tmp_path / "big.json"
    big.write_text(json.dumps({"name": "big", "prompt": {"system": HUGE}}))
    result = runner.invoke(app, ["harness", "validate", str(big)])
    text = words(result)
    assert result.exit_code == 1 and "/budget/max_context_tokens" in text, text
    assert "~1,250,0" in text and "65,532" in text and "before any model call" in text
    ok = runner.invoke(app, ["harness", "validate", "reasoning_gym"])
    assert ok.exit_code == 0 and "of 16,000 context tokens" in words(ok)


@pytest.mark.parametrize("extra, fits", [(0, True), (1, False)])
def test_the_check_counts_tokens_as_the_engine_does(extra, fits):
    """A prompt of exactly the budget makes a model call; one character more ends the rollout first."""
    base = spec("").model_copy(update={"budget": spec().budget.model_copy(update={"max_context_tokens": 64})})
    task = "Task 0: what is 0 + 0?"
    pad = 64 * 4 - _chars(base, task)  # the rendered prompt at exactly 256 characters, then one more
    sized = base.model_copy(update={"prompt": base.prompt.model_copy(update={"system": "y" * (pad + extra)})})
    assert prompt_tokens(sized, task) == 64 + extra and prompt_fit(sized, [task]).fits is fits
    result = asyncio.run(evaluate(sized, "ck", AdderEnv(size=1), "val", model=model()))
    assert (result.model_turns > 0) is fits and (result.unanswered == 0) is fits


def _chars(spec_, task):
    from coevo.harnesses.view import render_messages

    return sum(len(text) for _, text in render_messages(spec_, task))


def test_coevo_eval_refuses_a_harness_no_task_fits_before_any_rollout(tmp_path, monkeypatch):
    from coevo.cli import eval as eval_cli

    monkeypatch.setattr(eval_cli, "get_env", lambda ref: AdderEnv())
    monkeypatch.setattr(eval_cli, "load_model", lambda ref, **kw: model())
    big, db = tmp_path / "big.json", str(tmp_path / "e.db")
    big.write_text(spec(HUGE).model_dump_json())
    result = runner.invoke(app, ["eval", "--env", "adder", "--harness", str(big), "--model", "fake:x", "--db", db])
    assert result.exit_code == 1 and "all 6 tasks' prompts" in words(result) and "65,532" in words(result)
    assert "Traceback" not in result.output
    assert Archive(db).count(Trajectory) == 0 and Archive(db).list(RunRecord) == []


def test_coevo_eval_names_the_tasks_it_cannot_serve_and_the_rollouts_that_measured_nothing(tmp_path, monkeypatch):
    from coevo.cli import eval as eval_cli

    monkeypatch.setattr(eval_cli, "get_env", lambda ref: LongTaskEnv())
    monkeypatch.setattr(eval_cli, "load_model", lambda ref, **kw: model())
    small = spec().model_copy(update={"budget": spec().budget.model_copy(update={"max_context_tokens": 256})})
    harness = tmp_path / "h.json"
    harness.write_text(small.model_dump_json())
    result = runner.invoke(app, ["eval", "--env", "adder", "--harness", str(harness), "--model", "fake:x", "--n", "4",
                                 "--db", str(tmp_path / "e.db")])
    text = words(result)
    assert result.exit_code == 0, result.output
    assert "warning: 1 of 4 tasks' prompts" in text and "exceed the context budget of 256 tokens" in text
    assert "warning: 1 of 4 rollouts ended by a budget before any model call" in text


def test_an_evaluation_whose_rollouts_all_end_by_budget_says_so_in_the_run_log(tmp_path):
    config, ctx, archive = setup_run(tmp_path, "help")
    archive.add_harness(spec(HUGE))
    lines: list[str] = []
    detach = attach(ChannelHandler(lines.append))
    try:
        result = asyncio.run(ctx.evaluate(spec(HUGE).id, "ck", "val"))
    finally:
        detach()
    assert result.model_turns == 0 and result.unanswered == result.n_rollouts == 4
    assert "every rollout (4) ended by a budget before any model call" in result.budget_note()
    assert any("warning: harness" in line and "budget:context_tokens 4" in line for line in lines), lines


def test_the_check_node_rejects_a_candidate_whose_prompt_cannot_fit(tmp_path):
    config, ctx, archive = setup_run(tmp_path, "help")
    parent = archive.add_harness(spec())
    child = archive.add_harness(spec(HUGE))
    cand = Candidate(id="c1", direction="d1", parent_id=parent, spec_id=child)
    direction = Direction(id="d1", cause="wrong_answer", description="", task_ids=[])
    state = {"round": 0, "checkpoint": "ck"}
    reason = asyncio.run(check_one(ctx, state, cand, direction, []))
    assert reason.startswith("context budget: all 4 tasks' prompts") and "65,532" in reason
    assert archive.count(Trajectory) == 0  # refused before any rollout
    same = Candidate(id="c2", direction="d1", parent_id=parent, spec_id=archive.add_harness(spec("Be brief.")))
    assert not asyncio.run(check_one(ctx, state, same, direction, [])).startswith("context budget")


def test_a_run_refuses_an_h0_whose_prompt_cannot_fit_before_anything_is_stored(tmp_path, monkeypatch):
    from coevo.app.run import preflight
    from coevo.envs import registry
    from coevo.models import refs
    from coevo.strategies import get_strategy

    config, _, _ = setup_run(tmp_path, "help")
    (tmp_path / "big.json").write_text(spec(HUGE).model_dump_json())
    config.harness = str(tmp_path / "big.json")
    monkeypatch.setattr(registry, "get_env", lambda ref, **kw: AdderEnv())
    monkeypatch.setattr(refs, "load_model", lambda ref, **kw: model())
    config.policy = "local:fake"
    with pytest.raises(HarnessError, match="max_context_tokens: all 12 tasks' prompts"):
        preflight(config, get_strategy("harness_only"))
