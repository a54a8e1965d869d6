"""``coevo compare`` on fakes: matched runs per (strategy, seed) with deterministic ids, a table with
intervals and paired differences to VACE, gate counts, effective-group rates, read back (not rerun)
when finished, resumed when stopped, and written as HTML + PNG."""

import asyncio
import json

import pytest
from langchain_core.messages import AIMessage
from rich.console import Console
from test_meta_loop import FakeTrainer, WordEnv, policy, setup_run  # noqa: E402  (tests/unit is on sys.path)

from coevo.app.compare import StrategyRun, compare, compare_run_id, no_learning_signal, run_config
from coevo.graphs.registry import get_strategy
from coevo.meta.context import MetaContext
from coevo.models.fake import ScriptedChatModel
from coevo.records import Checkpoint, RunRecord, Trajectory
from coevo.report.compare import write_compare_report
from coevo.report.terminal import compare_table, protocol_text
from coevo.roles.curator import OfflineCurator
from coevo.roles.editor import OfflineEditor, demonstration_source
from coevo.storage import Archive


class RatedTrainer(FakeTrainer):
    """``FakeTrainer`` whose checkpoints belong to one run (id suffixed with it) and carry an
    effective-group rate metric (0.25 in round 0, 0.75 in round 1) and two steps' reward-spread rates."""

    async def __call__(self, checkpoint_id, spec, tasks, round, options=None):
        new, trajs = await super().__call__(checkpoint_id, spec, tasks, round, options)
        rate = {"effective_group_rate": 0.25 + 0.5 * round,
                "history": [{"nonzero_std_rate": 1.0}, {"nonzero_std_rate": 0.5}]}
        mine = self.archive.get(Checkpoint, new).model_copy(update={"id": f"{new}@{self.run_id}", "metrics": rate,
                                                                   "run_id": self.run_id})
        self.archive.put(mine)
        return mine.id, trajs


def services(archive, crash_in=None, effect="help"):
    """``context_for``: the strategy's trainer and roles over the word env and the rule-following
    fake policy (``effect``: ``test_meta_loop.policy``'s); ``crash_in=(strategy, seed)`` makes that run's
    trainer raise once in round 1."""
    env, model = WordEnv(), policy(effect)
    made, crash = [], [crash_in]

    def context_for(cfg):
        strategy = get_strategy(cfg.strategy)
        trainer = None
        if strategy.trains:
            fail = 1 if crash[0] == (cfg.strategy, cfg.seed) else None
            crash[0] = None if fail else crash[0]
            trainer = RatedTrainer(env, model, archive, fail)
            trainer.run_id = compare_run_id(base_config(cfg), cfg.strategy, cfg.seed)
        made.append((cfg.strategy, cfg.seed))
        refine = "editor" in strategy.roles
        return MetaContext(config=cfg, env=env, archive=archive, policy=lambda ckpt: model, trainer=trainer,
                           curator=OfflineCurator(2) if refine else None,
                           editor=OfflineEditor(demo_answer=demonstration_source(env)) if refine else None)

    return context_for, made


def base_config(cfg):
    return run_config(cfg, "vace", 0)


def test_compare_runs_each_strategy_and_seed_once_and_tables_the_paired_differences(tmp_path):
    config, _, archive = setup_run(tmp_path)
    context_for, made = services(archive)
    result = asyncio.run(compare(config, ["vace", "rl_only"], 2, archive=archive, context_for=context_for))
    assert made == [("vace", 0), ("rl_only", 0), ("vace", 1), ("rl_only", 1)]
    ids = {r.run_id for r in result.runs}
    assert ids == {compare_run_id(config, s, seed) for s in ("vace", "rl_only") for seed in (0, 1)}
    assert all(archive.get(RunRecord, i).status == "done" for i in ids)
    assert archive.get(RunRecord, result.id).strategy == "compare"

    vace, rl = result.rows
    assert (vace.strategy, rl.strategy) == ("vace", "rl_only") and result.n_test == 4
    # the accepted rule makes every test task right under VACE; rl_only keeps H0, which fails them all
    assert vace.score.mean == 1.0 and vace.per_seed == [1.0, 1.0] and vace.score.n == 4
    assert rl.score.mean == 0.0 and rl.start.mean == 0.0 and rl.score.high < 0.5
    assert vace.vs_reference is None
    assert rl.vs_reference.mean == -1.0 and rl.vs_reference.excludes_zero
    assert (vace.accepted, vace.rejected) == (2, 0) and vace.gated and not rl.gated
    assert vace.effective_group_rate == pytest.approx(0.5) and rl.effective_group_rate == pytest.approx(0.5)
    assert vace.spread_rate == pytest.approx(0.75)

    console = Console(record=True, width=250)
    console.print(compare_table(result))
    text = console.export_text()
    assert "-1.000 [-1.00, -1.00] n=4, significant at 95 %" in text and "2 / 0" in text and "(reference)" in text

    page = write_compare_report(result, tmp_path / "cmp")
    assert "significant at 95 %" in page.read_text() and (tmp_path / "cmp" / "compare.png").stat().st_size > 1000
    assert json.loads((tmp_path / "cmp" / "comparison.json").read_text())["rows"][1]["strategy"] == "rl_only"


def test_a_finished_comparison_is_read_back_not_rerun(tmp_path):
    config, _, archive = setup_run(tmp_path)
    context_for, made = services(archive)
    first = asyncio.run(compare(config, ["vace", "static"], 2, archive=archive, context_for=context_for))
    rollouts = len(archive.list(Trajectory))
    made.clear()
    again = asyncio.run(compare(config, ["vace", "static"], 2, archive=archive, context_for=context_for))
    assert made == [] and len(archive.list(Trajectory)) == rollouts
    assert [r.source for r in again.runs] == ["reused"] * 4
    assert again.rows == first.rows
    static = again.rows[1]
    assert static.accepted == static.rejected == 0 and static.effective_group_rate is static.spread_rate is None
    assert static.vs_reference.mean == -1.0


def test_a_comparison_stopped_by_a_crash_resumes_to_the_same_table(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    config, _, archive = setup_run(tmp_path / "a")
    reference = asyncio.run(compare(config, ["vace", "ungated"], 2, archive=archive,
                                    context_for=services(archive)[0]))
    config2, _, archive2 = setup_run(tmp_path / "b")
    context_for, made = services(archive2, crash_in=("ungated", 1))
    with pytest.raises(RuntimeError, match="simulated crash"):
        asyncio.run(compare(config2, ["vace", "ungated"], 2, archive=archive2, context_for=context_for))
    resumed = asyncio.run(compare(config2, ["vace", "ungated"], 2, archive=archive2, context_for=context_for))
    assert [r.source for r in resumed.runs] == ["reused", "reused", "reused", "resumed"]
    assert [r.model_dump() for r in resumed.rows] == [r.model_dump() for r in reference.rows]
    ungated = resumed.rows[1]
    # each seed adopts one edit per round, unchecked: round 0's first sample (demonstrations) does not help, so
    # round 1 still has failures and adopts the rule: 2 seeds x 2 rounds
    assert not ungated.gated and ungated.adopted == 4 and ungated.vs_reference.mean == 0.0


def test_compare_refuses_unknown_strategies_and_empty_lists(tmp_path):
    config, _, archive = setup_run(tmp_path)
    with pytest.raises(ValueError, match="unknown strategy 'vacee'"):
        asyncio.run(compare(config, ["vace", "vacee"], 1, archive=archive))
    with pytest.raises(ValueError, match="strategies is empty"):
        asyncio.run(compare(config, [], 1, archive=archive))
    assert Archive(config.db).list(RunRecord) == []


class SilentTrainer(RatedTrainer):
    """A weight stage that learned nothing: no group held a reward contrast or any spread, ||dW|| = 0."""

    async def __call__(self, checkpoint_id, spec, tasks, round, options=None):
        new, trajs = await super().__call__(checkpoint_id, spec, tasks, round, options)
        silent = {"effective_group_rate": 0.0, "history": [{"nonzero_std_rate": 0.0}], "delta_norm": 0.0}
        self.archive.put(self.archive.get(Checkpoint, new).model_copy(update={"metrics": silent}))
        return new, trajs


def test_compare_says_no_learning_signal_where_no_group_had_a_contrast_and_the_weights_did_not_move(tmp_path):
    config, _, archive = setup_run(tmp_path)
    env, never = WordEnv(), ScriptedChatModel(script=[lambda messages: AIMessage(content="Final answer: banana")])

    def context_for(cfg):
        trainer = SilentTrainer(env, never, archive)
        trainer.run_id = compare_run_id(base_config(cfg), cfg.strategy, cfg.seed)
        refine = "editor" in get_strategy(cfg.strategy).roles
        return MetaContext(config=cfg, env=env, archive=archive, policy=lambda ckpt: never, trainer=trainer,
                           curator=OfflineCurator(2) if refine else None,
                           editor=OfflineEditor(demo_answer=demonstration_source(env)) if refine else None)

    result = asyncio.run(compare(config, ["vace", "rl_only"], 1, archive=archive, context_for=context_for))
    vace, rl = result.rows
    assert vace.no_signal and rl.no_signal and rl.vs_reference.mean == 0.0
    console = Console(record=True, width=250)
    console.print(compare_table(result))
    text = console.export_text()
    assert "no learning signal (no contrast, no update)" in text
    assert "not significant" not in text and "+0.000" not in text  # never a measured tie
    assert any(w.startswith("no learning signal in vace, rl_only:") and "||dW|| = 0" in w for w in result.warnings)


def test_a_run_has_no_learning_signal_only_when_it_trained_without_contrast_or_update():
    run = StrategyRun(strategy="rl_only", seed=0, run_id="r")
    assert not no_learning_signal(run)  # nothing trained: nothing to say
    assert no_learning_signal(run.model_copy(update={"effective_group_rate": 0.0, "spread_rate": 0.0,
                                                     "delta_norm": 0.0}))
    assert no_learning_signal(run.model_copy(update={"delta_norm": 0.0}))
    assert not no_learning_signal(run.model_copy(update={"effective_group_rate": 0.0, "spread_rate": 0.25,
                                                         "delta_norm": 0.0}))  # partial credit: a gradient
    assert not no_learning_signal(run.model_copy(update={"effective_group_rate": 0.0, "delta_norm": 0.3}))


def test_the_protocol_in_words_names_the_matched_quantity_and_claims_no_gate_a_strategy_may_lack():
    """Under caps the rounds are named, not what a round holds: CoEvo-RSI promotes and PACE's phases search,
    neither through a weight stage and a gate each round."""
    from types import SimpleNamespace

    caps = SimpleNamespace(protocol="caps", config={"run": {"rounds": 3}})
    assert protocol_text(caps) == "at the configured caps (3 rounds per run, each strategy's own phases)"
    assert "gate" not in protocol_text(caps)
    assert protocol_text(SimpleNamespace(protocol="caps", config={})) == "at the configured caps"
    assert protocol_text(SimpleNamespace(protocol="budget", budget=900)) == "at equal spend (900 rollouts)"
    assert protocol_text(SimpleNamespace(protocol="updates", updates=10)) == "at equal updates (10 weight updates)"
