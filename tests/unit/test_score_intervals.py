"""Every printed score carries n and a 95 % interval from one source (``outcome_estimate`` of the
per-task outcomes), and a run's summary says plainly whether final − start is significant."""

import asyncio

import pytest
from rich.console import Console
from test_meta_loop import _run, setup_run  # noqa: E402  (tests/unit is on sys.path)

from coevo.cli.eval import result_table
from coevo.evaluation.results import EvalResult, TaskOutcome, outcome_estimate, paired_difference
from coevo.meta.state import EvalSummary
from coevo.report.html import write_report
from coevo.report.numbers import difference_text, significance
from coevo.report.terminal import summary_table
from coevo.storage import Archive


def outcomes(rewards: dict[str, list[float]]) -> dict[str, TaskOutcome]:
    return {t: TaskOutcome(task_id=t, seeds=list(range(len(r))), rewards=r, passed=[x == 1.0 for x in r])
            for t, r in rewards.items()}


def result(per_task: dict[str, TaskOutcome], harness: str = "h") -> EvalResult:
    n = len(per_task)
    return EvalResult(evaluation_id="e", harness_id=harness, checkpoint_id="w", env="x", split="test", k=1, seeds=[0],
                      n_tasks=n, n_rollouts=n, pass_at_k=sum(any(o.passed) for o in per_task.values()) / n,
                      avg_at_k=sum(o.pass_rate for o in per_task.values()) / n,
                      mean_reward=sum(o.mean_reward for o in per_task.values()) / n, timr=0.0, interface_violations=0,
                      model_turns=n, input_tokens=0, output_tokens=0, cost_usd=0.0, latency_s=0.0, wall_s=0.0,
                      per_task=per_task)


def test_pass_fail_outcomes_get_wilson_and_partial_credit_a_bootstrap():
    binary = outcomes({f"t{i}": [1.0 if i < 3 else 0.0] for i in range(10)})
    est = outcome_estimate(binary)
    assert (est.method, est.n, est.mean) == ("wilson", 10, pytest.approx(0.3))
    assert est.low == pytest.approx(0.1078, abs=1e-3)
    partial = outcomes({"a": [0.5, 1.0], "b": [0.0, 0.0], "c": [0.2, 0.4]})
    assert outcome_estimate(partial).method == "bootstrap"
    assert outcome_estimate(partial, "pass_at_k").mean == pytest.approx(1 / 3)
    assert outcome_estimate(partial, "avg_at_k").mean == pytest.approx(1 / 6)


def test_result_and_summary_give_the_same_estimate():
    per_task = outcomes({f"t{i}": [1.0 if i % 3 == 0 else 0.0] for i in range(12)})
    res = result(per_task)
    assert res.estimate == EvalSummary.of(res).estimate == outcome_estimate(per_task)
    assert res.estimate.mean == pytest.approx(res.mean_reward)


def test_paired_difference_uses_the_tasks_both_saw_and_says_when_it_is_not_significant():
    start = outcomes({"a": [0.0], "b": [1.0], "c": [0.0], "d": [1.0]})
    final = outcomes({"a": [1.0], "b": [0.0], "c": [0.0], "e": [1.0]})
    diff = paired_difference(start, final)
    assert diff.n == 3 and diff.mean == pytest.approx(0.0)
    assert significance(diff) == "not significant at 95 %"
    assert difference_text(diff).endswith("n=3, not significant at 95 %")
    zeros, ones = outcomes({f"t{i}": [0.0] for i in range(10)}), outcomes({f"t{i}": [1.0] for i in range(10)})
    gain = paired_difference(zeros, ones)
    assert gain.excludes_zero and difference_text(gain) == "+1.000 [+1.00, +1.00] n=10, significant at 95 %"


def test_eval_table_prints_each_score_with_its_interval_and_n():
    console = Console(record=True, width=200)
    console.print(result_table(result(outcomes({f"t{i}": [1.0 if i < 3 else 0.0] for i in range(10)}))))
    text = console.export_text()
    assert "95 % interval (n tasks)" in text and "[0.108, 0.603] n=10 (wilson)" in text


def test_run_summary_and_report_print_intervals_and_the_paired_test_difference(tmp_path):
    config, ctx, archive = setup_run(tmp_path, "help")
    state = asyncio.run(_run(config, ctx, archive))
    console = Console(record=True, width=250)
    console.print(summary_table(state, Archive(config.db)))
    text = console.export_text()
    # val: 4 tasks, the incumbent at 0/4 in round 0, the accepted candidate at 4/4 (Wilson intervals)
    assert "0.000 [0.00, 0.49] n=4" in text and "1.000 [0.51, 1.00] n=4 accepted" in text
    assert "final − start (paired)" in text and "+1.000 [+1.00, +1.00] n=4, significant at 95 %" in text
    page = write_report("run-1", config.db, tmp_path / "report", state).read_text()
    assert "final − start (paired)" in page and "1.000 [0.51, 1.00] n=4" in page and "significant at 95 %" in page
    alone = write_report("run-1", config.db, tmp_path / "alone").read_text()  # from the archive only
    assert "0.000 [0.00, 0.49] n=4" in alone and "1.000 [0.51, 1.00] n=4" in alone


def test_run_summary_says_plainly_when_final_minus_start_is_not_significant(tmp_path):
    config, ctx, archive = setup_run(tmp_path, "regress")
    config.meta.local_check = False
    state = asyncio.run(_run(config, ctx, archive))
    console = Console(record=True, width=250)
    console.print(summary_table(state))
    assert "n=4, not significant at 95 %" in console.export_text()


def test_report_command_reads_the_runs_final_state_from_its_checkpointer(tmp_path):
    from typer.testing import CliRunner

    from coevo.cli.app import app

    config, ctx, archive = setup_run(tmp_path, "help")
    asyncio.run(_run(config, ctx, archive))
    done = CliRunner().invoke(app, ["report", "run-1", "--db", config.db, "-o", str(tmp_path / "r")])
    assert done.exit_code == 0, done.output
    page = (tmp_path / "r" / "index.html").read_text()
    assert "start pair (H0, W0)" in page and "+1.000 [+1.00, +1.00] n=4, significant at 95 %" in page
