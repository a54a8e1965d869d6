"""``coevo decompose`` on fakes: the 2×2 of (H0, H_final) × (W0, W_final) separates a harness lever from a
weight lever, reuses the run's own final test, is stored and reported, and refuses bad input in one
paragraph."""

import asyncio

import pytest
from langchain_core.messages import AIMessage
from test_cli_errors import one_paragraph_error, runner
from test_meta_loop import _run, setup_run

from coevo.app.decompose import decompose
from coevo.app.run import RunError
from coevo.cli.app import app
from coevo.evaluation.decompose import effects
from coevo.evaluation.results import TaskOutcome
from coevo.models.fake import ScriptedChatModel
from coevo.records import Decomposition, EvaluationRecord, RunRecord
from coevo.report.decompose import decompose_section, newest_effects, stored_effects
from coevo.report.html import write_report


def lever_policy(checkpoint: str) -> ScriptedChatModel:
    """Right on every task when the harness carries the offline verifier rule (the harness lever); under
    trained weights (a checkpoint id with ``+r``), also right on words with a ``u`` (the weight lever: none
    of the val words has one, so the gate still sees the rule win)."""
    trained = "+r" in checkpoint

    def reply(messages):
        system, word = str(messages[0].content), str(messages[-1].content).rsplit(" ", 1)[1]
        right = "Call exactly the function" in system or (trained and "u" in word)
        return AIMessage(content=f"Final answer: {word if right else 'banana'}")

    return ScriptedChatModel(script=[reply])


@pytest.fixture
def finished(tmp_path):
    """A finished VACE run on the words env whose gate accepted the rule and whose weights moved."""
    config, ctx, archive = setup_run(tmp_path, "help")
    ctx.policy = lever_policy
    ctx.trainer.model = lever_policy("W0")  # the stage's rollouts: any policy will do
    state = asyncio.run(_run(config, ctx, archive))
    assert state["incumbent"] != state["start_harness"] and state["checkpoint"] != state["start_checkpoint"]
    return config, ctx, archive, state


def test_the_2x2_separates_the_harness_lever_from_the_weight_lever(finished):
    config, ctx, archive, state = finished
    before = {e.id for e in archive.list(EvaluationRecord, run_id="run-1")}
    done = asyncio.run(decompose(config.db, "run-1", archive=archive, context=ctx))
    n = done.numbers
    # test words yuzu, quince, lemon, grape: the trained weights alone solve the two with a u
    assert {c: e.mean for c, e in n.cells.items()} == {"h0_w0": 0.0, "h0_wf": 0.5, "hf_w0": 1.0, "hf_wf": 1.0}
    assert n.n == 4 and all(e.n == 4 for e in n.cells.values())
    assert n.effects["harness_under_w0"].mean == 1.0 and n.effects["harness_under_wf"].mean == 0.5
    assert n.effects["weights_under_h0"].mean == 0.5 and n.effects["weights_under_hf"].mean == 0.0
    assert n.interaction.mean == -0.5 and n.total.mean == 1.0
    # the start and final pairs are the run's own final test, read back: only the two mixed cells ran
    test = state["test"]
    assert done.record.cells["h0_w0"] == test["start"].evaluation_id
    assert done.record.cells["hf_wf"] == test["final"].evaluation_id
    new = {e.id for e in archive.list(EvaluationRecord, run_id="run-1")} - before
    assert new == {done.record.cells["h0_wf"], done.record.cells["hf_w0"]}
    assert done.record.harnesses == {"start": state["start_harness"], "final": state["incumbent"]}
    assert done.record.checkpoints == {"start": state["start_checkpoint"], "final": state["checkpoint"]}
    # stored: asked again it is the same record, and its numbers come back from the stored evaluations
    again = asyncio.run(decompose(config.db, "run-1", archive=archive, context=ctx))
    assert again.record.id == done.record.id and len(archive.list(Decomposition, run_id="run-1")) == 1
    assert stored_effects(archive, again.record) == n
    page = decompose_section(archive, "run-1")
    assert "Which lever did what" in page and "+0.500" in page and "H_final × W0" not in page  # grid, not rows
    assert newest_effects(archive, "run-1") == n and newest_effects(archive, "no-such-run") is None


def test_the_report_draws_the_2x2_once_the_run_has_a_decomposition(finished, tmp_path):
    config, ctx, archive, _ = finished
    before = write_report("run-1", config.db, tmp_path / "before")
    assert not (before.parent / "decompose.png").exists()
    asyncio.run(decompose(config.db, "run-1", archive=archive, context=ctx))
    page = write_report("run-1", config.db, tmp_path / "after")
    png = page.parent / "decompose.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    assert "<img src='decompose.png'" in page.read_text()


def test_k_asks_for_new_evaluations_of_every_cell(finished):
    config, ctx, archive, state = finished
    done = asyncio.run(decompose(config.db, "run-1", k=2, archive=archive, context=ctx))
    assert done.record.k == 2 and all(r.k == 2 for r in done.results.values())
    assert done.record.cells["hf_wf"] != state["test"]["final"].evaluation_id


def test_effects_count_only_tasks_all_four_cells_hold_and_name_a_missing_cell():
    def outcomes(values):
        return {t: TaskOutcome(task_id=t, seeds=[0], rewards=[v], passed=[v == 1.0]) for t, v in values.items()}

    cells = {"h0_w0": outcomes({"a": 0.0, "b": 0.0, "c": 1.0}), "h0_wf": outcomes({"a": 1.0, "b": 1.0}),
             "hf_w0": outcomes({"a": 0.0, "b": 1.0}), "hf_wf": outcomes({"a": 1.0, "b": 1.0})}
    n = effects(cells)
    assert n.n == 2 and n.cells["h0_w0"].n == 2  # task c is only in one cell
    assert n.effects["weights_under_h0"].mean == 1.0 and n.effects["harness_under_wf"].mean == 0.0
    assert n.interaction.mean == -0.5  # the harness helps on b under W0 only
    with pytest.raises(ValueError, match="missing \\['hf_wf'\\]"):
        effects({c: v for c, v in cells.items() if c != "hf_wf"})
    with pytest.raises(ValueError, match="share no task"):
        effects({**cells, "hf_wf": outcomes({"z": 1.0})})


def test_a_run_without_a_final_pair_or_an_unknown_id_is_a_clear_error(tmp_path):
    config, ctx, archive = setup_run(tmp_path, "help")
    archive.put(RunRecord(id="run-9", strategy="vace", config=config.model_dump(mode="json"), status="failed"))
    with pytest.raises(RunError, match="run run-9 has no final pair to decompose: its status is 'failed'.*--resume"):
        asyncio.run(decompose(config.db, "run-9", archive=archive, context=ctx))
    with pytest.raises(RunError, match="no run 'nope'"):
        asyncio.run(decompose(config.db, "nope", archive=archive, context=ctx))
    archive.put(RunRecord(id="eval-1", strategy="eval", config={}, status="done"))
    with pytest.raises(RunError, match="coevo eval run"):
        asyncio.run(decompose(config.db, "eval-1", archive=archive, context=ctx))
    archive.close()
    one_paragraph_error(runner.invoke(app, ["decompose", "run-9", "--db", config.db]), "no final pair", "--resume")
    one_paragraph_error(runner.invoke(app, ["decompose", "nope", "--db", config.db]), "no run 'nope'")
    one_paragraph_error(runner.invoke(app, ["decompose", "x", "--db", str(tmp_path / "none.db")]), "no archive at")


def test_a_routed_harness_s_run_is_refused_rather_than_decomposed_to_a_zero_harness_effect():
    from types import SimpleNamespace

    from coevo.app.decompose import final_pair

    pair = SimpleNamespace(harness_id="h0", checkpoint_id="w1")
    run = RunRecord(id="hs-1", strategy="harness_s", config={}, status="done")
    with pytest.raises(RunError, match="routes each task.*Rank-k"):
        final_pair({"test": {"start": pair, "final": pair, "rank1": pair}}, run)
    assert final_pair({"test": {"start": pair, "final": pair}}, run) == ({"start": "h0", "final": "h0"},
                                                                           {"start": "w1", "final": "w1"})


def test_what_the_frameworks_say_during_a_decomposition_goes_to_its_log_file_not_the_console(tmp_path, monkeypatch):
    import logging

    from transformers.utils import logging as hf_logging

    import coevo.app.decompose as app_decompose

    config, _, archive = setup_run(tmp_path, "quiet")
    archive.close()
    seen = {}

    def noisy(db, run_id, env, k, reporter):  # where a checkpoint loads: transformers' bar and a warning
        seen["bar"] = hf_logging.is_progress_bar_enabled()
        logging.getLogger("transformers").warning("weights noise from transformers")
        raise RunError("stopped after the noise")

    monkeypatch.setattr(app_decompose, "run_decompose", noisy)
    result = runner.invoke(app, ["decompose", "run-q", "--db", config.db])
    assert result.exit_code != 0 and "stopped after the noise" in result.output
    assert seen == {"bar": False} and "weights noise" not in result.output
    assert "weights noise" in (tmp_path / "logs" / "decompose-run-q.log").read_text()
    assert hf_logging.is_progress_bar_enabled()  # restored after the command
