"""CoEvo-RSI on fakes: editors inherit any archived harness as their base (the child's parent is
that base), model proposals select or TIES-merge archived checkpoints (refused merges write no
file), promotion needs a win by more than δ_prom, TIMR is pooled per (harness, checkpoint) pair,
and a whole run of both wirings completes with its records in the archive and the report."""

import asyncio
import json
from types import SimpleNamespace

import pytest
import torch
from test_meta_loop import setup_run
from training_kit import random_adapter, tiny_llama_checkpoint

from coevo.app.run import run_meta
from coevo.graphs.coevo_rsi.archive_view import pair_stats, summarize
from coevo.graphs.coevo_rsi.harness_inheritance import edit_from_base
from coevo.graphs.coevo_rsi.model_inheritance import decide_promotion, materialise
from coevo.graphs.coevo_rsi.state import BaseRequest
from coevo.harnesses.patch import apply_patch
from coevo.harnesses.spec import load_harness
from coevo.meta.inheritance import ArchiveEntry, ArchiveSummary, ModelProposal, PairScore, PairStats
from coevo.meta.state import Direction, Evidence
from coevo.records import BaseChoice, Checkpoint, EvaluationRecord, HarnessRecord, LLMCallRecord, Promotion, RunRecord
from coevo.roles.inheritor import LLMInheritor, OfflineInheritor
from coevo.training.checkpoint import load_policy
from coevo.training.coevo_rsi.merge import merge_adapters

WRONG_NAME = Direction(id="d0-wrong", cause="wrong_func_name", description="2 train tasks fail", task_ids=["w-apple",
                       "w-pear"], evidence=[Evidence(task_id="w-apple"), Evidence(task_id="w-pear")])


def train_eval(archive, harness, checkpoint, score, timr, turns=4, run_id="run-1"):
    """A finished train evaluation of (harness, checkpoint) with 4 rollouts."""
    archive.put(EvaluationRecord(
        id=f"e-{harness[:6]}-{checkpoint}-{score}", run_id=run_id, harness_id=harness, checkpoint_id=checkpoint,
        split="train", status="done",
        aggregates={"n_rollouts": 4, "mean_reward": score, "timr": timr, "model_turns": turns}))


def two_harness_archive(tmp_path):
    """H0 (older, scores 0.75 under W0) and its child H1 (the incumbent, scores 0.25 under W0)."""
    config, ctx, archive = setup_run(tmp_path)
    h0 = ctx.spec(archive.add_harness(load_harness(config.harness), [], "base", "run-1"))
    h1 = apply_patch(h0, [{"op": "replace", "path": "/prompt/system", "value": "Answer tersely."}])
    archive.add_harness(h1, [h0.id], "edit", "run-1")
    archive.put(Checkpoint(id="w0", base_model="fake"))
    train_eval(archive, h0.id, "w0", 0.75, 0.0)
    train_eval(archive, h1.id, "w0", 0.25, 0.5)
    ctx.inheritor, ctx.run_id = OfflineInheritor(), "run-1"
    return ctx, archive, h0, h1


def test_an_editor_can_choose_a_harness_older_than_the_incumbent_and_the_child_descends_from_it(tmp_path):
    ctx, archive, h0, h1 = two_harness_archive(tmp_path)
    summary = summarize(archive, "run-1", h1.id, "w0", "w0")
    assert [e.harness_id for e in summary.entries] == [h0.id, h1.id]
    request = BaseRequest(direction=WRONG_NAME, incumbent=h1.id, round=1, train_trajectories=[], summary=summary)
    out = edit_from_base(request, SimpleNamespace(context=ctx))
    (cand,) = out["candidates"]
    assert cand.parent_id == h0.id and cand.spec_id and archive.get(HarnessRecord, cand.spec_id).parents == [h0.id]
    (record,) = archive.list(BaseChoice, run_id="run-1")  # the choice is stored, not kept in the state
    assert record.index == 0 and "0.750" in record.reason and set(out) == {"candidates", "sealed"}
    assert {h: e.tasks for h, e in out["sealed"].items()} == {cand.spec_id: cand.demo_tasks}  # pending until promote
    assert (record.base_id, record.incumbent_id, record.child_id) == (h0.id, h1.id, cand.spec_id)
    assert record.evidence["direction"]["cause"] == "wrong_func_name" and len(record.evidence["archive"]) == 2


def test_an_llm_editor_picks_its_base_by_index_from_the_archive_summary(tmp_path):
    ctx, archive, h0, h1 = two_harness_archive(tmp_path)
    summary = summarize(archive, "run-1", h1.id, "w0", "w0")
    ctx.inheritor = LLMInheritor("openai/fake", mock_response=json.dumps({"index": 0, "reason": "fewer mismatches"}))
    out = edit_from_base(BaseRequest(direction=WRONG_NAME, incumbent=h1.id, round=1, train_trajectories=[],
                                      summary=summary), SimpleNamespace(context=ctx))
    assert archive.list(BaseChoice, run_id="run-1")[0].base_id == h0.id
    assert out["candidates"][0].parent_id == h0.id
    assert archive.list(LLMCallRecord, run_id="run-1", role="inheritor")
    bad = LLMInheritor("openai/fake", mock_response=json.dumps({"index": 7, "reason": "?"}))
    fallback = bad.choose_base(WRONG_NAME, summary)
    assert fallback.choice.base_id == h0.id and "not in the archive" in fallback.choice.reason


def test_latest_only_restricts_the_archive_to_the_incumbent_pair(tmp_path):
    ctx, archive, h0, h1 = two_harness_archive(tmp_path)
    summary = summarize(archive, "run-1", h1.id, "w0", "w0", latest_only=True)
    assert [e.harness_id for e in summary.entries] == [h1.id] and summary.checkpoints == ["w0"]
    assert OfflineInheritor().choose_base(WRONG_NAME, summary).choice.base_id == h1.id


def test_probes_under_the_current_checkpoint_rank_the_bases_when_every_harness_has_one(tmp_path):
    _, archive, h0, h1 = two_harness_archive(tmp_path)
    summary = summarize(archive, "run-1", h1.id, "w0", "w0")
    probe = {h0.id: (0.0, 0.5), h1.id: (0.5, 0.0)}  # the incumbent wins the probe, H0 the pooled train outcome
    probed = summary.model_copy(update={"entries": [e.model_copy(update={"probe": PairStats(
        harness_id=e.harness_id, checkpoint_id="w0", split="train", score=probe[e.harness_id][0],
        timr=probe[e.harness_id][1], rollouts=2, turns=2)}) for e in summary.entries]})
    choice = OfflineInheritor().choose_base(WRONG_NAME, probed).choice
    assert choice.base_id == h1.id and "best probe" in choice.reason
    half = probed.model_copy(update={"entries": [probed.entries[0], summary.entries[1]]})
    assert OfflineInheritor().choose_base(WRONG_NAME, half).choice.base_id == h0.id  # one task set or none
    assert "probe_under_current_checkpoint" in probed.for_prompt()[0]


def test_pair_timr_pools_violation_turns_over_the_pairs_evaluations(tmp_path):
    _, archive, h0, h1 = two_harness_archive(tmp_path)
    train_eval(archive, h1.id, "w0", 0.5, 0.25, turns=12)  # 3 violation turns of 12, beside 2 of 4
    stats = pair_stats(archive, "run-1", "train")
    assert stats[(h1.id, "w0")].timr == pytest.approx(5 / 16) and stats[(h1.id, "w0")].score == pytest.approx(0.375)
    assert stats[(h0.id, "w0")].timr == 0.0 and stats[(h0.id, "w0")].rollouts == 4


def summary_of(scores: dict[str, float], adapters: list[str]) -> ArchiveSummary:
    train = {c: PairStats(harness_id="h", checkpoint_id=c, split="train", score=s, timr=0.0, rollouts=1, turns=1)
             for c, s in scores.items()}
    return ArchiveSummary(incumbent="h", checkpoint="w0", entries=[ArchiveEntry(index=0, harness_id="h", train=train)],
                          checkpoints=["w0", "a", "b", "c"], adapters=adapters)


def test_offline_model_inheritance_selects_the_best_checkpoint_and_merges_the_two_best_adapters():
    summary = summary_of({"w0": 0.9, "a": 0.2, "b": 0.6, "c": 0.4}, ["a", "b", "c"])
    select, merge = OfflineInheritor().propose_models("child", "h", summary, "p").proposals
    assert (select.kind, select.sources, select.alpha) == ("select", ["w0"], [1.0])
    assert (merge.kind, merge.sources, merge.alpha) == ("merge", ["b", "c"], [0.5, 0.5])
    assert len(OfflineInheritor().propose_models("child", "h", summary_of({}, ["a"]), "p").proposals) == 1


@pytest.fixture
def adapters(tmp_path):
    base = tiny_llama_checkpoint(tmp_path / "base")
    return base, [random_adapter(base, tmp_path / f"a{i}", seed=i + 1) for i in range(2)]


def logits(ckpt) -> torch.Tensor:
    model, _ = load_policy(ckpt)
    with torch.no_grad():
        return model(input_ids=torch.tensor([[5, 17, 42, 99, 3]])).logits


def merge_context(tmp_path, checkpoints, **rsi):
    config, ctx, archive = setup_run(tmp_path)
    ctx.config = config.model_copy(update={"out_dir": str(tmp_path / "out"),
                                           "rsi": config.rsi.model_copy(update=rsi)})
    ctx.run_id = "run-1"
    for c in checkpoints:
        archive.put(c)
    return ctx, archive


def test_a_one_hot_merge_with_weight_one_gives_the_adapters_own_logits(tmp_path, adapters):
    _, (a, b) = adapters
    ties = merge_adapters([a, b], {"combination_type": "ties", "weights": [1.0, 0.0], "density": 1.0,
                                   "output_dir": str(tmp_path / "m")})
    assert float((logits(ties) - logits(a)).abs().max()) <= 1e-5
    ctx, _ = merge_context(tmp_path, [a, b])
    one_hot = ModelProposal(id="p-0", harness_id="h", kind="merge", sources=[a.id, b.id], alpha=[1.0, 0.0])
    selected = materialise(ctx, one_hot, {})
    assert selected.checkpoint_id == a.id and "one-hot" in selected.reason  # the adapter itself
    assert not (tmp_path / "out" / "merges").exists()


def test_a_ties_proposal_is_merged_and_archived_with_its_alpha(tmp_path, adapters):
    _, (a, b) = adapters
    ctx, archive = merge_context(tmp_path, [a, b])
    proposal = ModelProposal(id="p-1", harness_id="h", kind="merge", sources=[a.id, b.id], alpha=[0.7, 0.3])
    cache = {}
    merged = materialise(ctx, proposal, cache)
    record = archive.get(Checkpoint, merged.checkpoint_id)
    assert record.parents == [a.id, b.id] and record.config["weights"] == [0.7, 0.3]
    assert record.config["combination_type"] == "ties" and record.run_id == "run-1"
    assert materialise(ctx, proposal.model_copy(update={"id": "p-2"}), cache).checkpoint_id == merged.checkpoint_id


def test_a_merge_of_adapters_with_mismatched_ranks_is_refused_before_any_file_is_written(tmp_path, adapters):
    base, (a, _) = adapters
    r8 = random_adapter(base, tmp_path / "r8", seed=3, r=8)
    ctx, archive = merge_context(tmp_path, [a, r8])
    before = len(archive.list(Checkpoint))
    proposal = ModelProposal(id="p-3", harness_id="h", kind="merge", sources=[a.id, r8.id], alpha=[0.5, 0.5])
    refused = materialise(ctx, proposal, {})
    assert refused.status == "refused" and refused.checkpoint_id is None
    assert "ranks must match" in refused.reason and "r=4" in refused.reason and "r=8" in refused.reason
    assert not (tmp_path / "out").exists() and len(archive.list(Checkpoint)) == before


def pair(val, h="h1", c="w1", timr=0.0):
    return PairScore(harness_id=h, checkpoint_id=c, val=val, timr=timr)


def test_promotion_rejects_a_proposal_that_wins_by_less_than_the_margin():
    incumbent = pair(0.50, "h0", "w0")
    narrow = decide_promotion(1, incumbent, pair(0.54), None, margin=0.05)
    assert not narrow.accepted and narrow.promoted == incumbent and "not more than δ_prom=0.05" in narrow.reason
    exact = decide_promotion(1, incumbent, pair(0.55), None, margin=0.05)
    assert not exact.accepted  # a win by exactly δ_prom is not more than δ_prom
    wide = decide_promotion(1, incumbent, pair(0.54), pair(0.60, c="w2"), margin=0.05)
    assert wide.accepted and wide.promoted.checkpoint_id == "w2" and "adapted proposal" in wide.reason
    assert not decide_promotion(1, incumbent, pair(0.50), None, margin=0.0).accepted  # a tie keeps p_t


@pytest.mark.parametrize("strategy", ["coevo_rsi", "coevo_rsi_latest_only"])
def test_a_coevo_rsi_run_records_bases_proposals_and_promotions(tmp_path, strategy):
    from coevo.report.html import write_report

    config, ctx, archive = setup_run(tmp_path, strategy=strategy)
    ctx.inheritor = OfflineInheritor()
    state = asyncio.run(run_meta(config, run_id="run-1", context=ctx, archive=archive))
    promotions = archive.list(Promotion, run_id="run-1")
    assert [p.round for p in promotions] == [0, 1] and promotions[0].accepted
    assert state["incumbent"] != state["start_harness"] and state["test"]["final"].score == 1.0
    assert state["checkpoint"] == promotions[-1].checkpoint_id and state["checkpoint"].endswith("+r0")
    proposals = archive.list(ModelProposal, run_id="run-1")
    assert proposals and all(p.status == "scored" and p.val is not None and p.timr is not None for p in proposals)
    choices = archive.list(BaseChoice, run_id="run-1")
    assert choices and all(archive.get(HarnessRecord, c.child_id).parents == [c.base_id] for c in choices if c.child_id)
    assert [h.round for h in state["history"]] == [0, 1]
    archive.put(RunRecord(id="run-1", strategy=strategy, config=config.model_dump()))
    page = write_report("run-1", config.db, tmp_path / "report").read_text()
    assert "CoEvo-RSI rounds" in page and "TIMR" in page and (tmp_path / "report" / "timr_matrix.png").is_file()


def test_an_llm_inheritor_proposes_merges_over_archived_adapters_and_falls_back_when_invalid():
    summary = summary_of({"w0": 0.9}, ["a", "b"])
    reply = {"proposals": [{"kind": "select", "checkpoints": ["b"]},
                           {"kind": "merge", "checkpoints": ["a", "b"], "alpha": [3, 1]}], "reason": "b fits"}
    select, merge = LLMInheritor("openai/fake", mock_response=json.dumps(reply)).propose_models(
        "child", "h", summary, "p").proposals
    assert (select.sources, merge.sources, merge.alpha) == (["b"], ["a", "b"], [0.75, 0.25])
    bad = {"proposals": [{"kind": "merge", "checkpoints": ["w0", "a"], "alpha": [0.5, 0.5]}]}  # w0 has no adapter
    out = LLMInheritor("openai/fake", mock_response=json.dumps(bad)).propose_models("child", "h", summary, "p")
    assert [p.kind for p in out.proposals] == ["select", "merge"] and out.proposals[0].sources == ["w0"]
    assert len(out.calls) == 2 and "LLM reply rejected" in out.proposals[0].reason  # first try + one repair


def test_a_coevo_rsi_run_killed_in_adapt_resumes_to_the_same_promotions(tmp_path):
    def run(path, **kw):
        path.mkdir()
        config, ctx, archive = setup_run(path, strategy="coevo_rsi", **kw)
        config.meta.samples = 1  # one edit branch per round: concurrent branches archive children in either order
        ctx.inheritor = OfflineInheritor()
        return config, ctx, archive

    def outcome(state, archive):
        promotions = [(p.round, p.harness_id, p.checkpoint_id, p.accepted)
                      for p in archive.list(Promotion, run_id="run-1")]
        return state["incumbent"], state["checkpoint"], state["promotion"].reason, promotions

    config, ctx, archive = run(tmp_path / "a")
    reference = asyncio.run(run_meta(config, run_id="run-1", context=ctx, archive=archive))
    config2, ctx2, archive2 = run(tmp_path / "b", fail_once_at=1)
    with pytest.raises(RuntimeError, match="simulated crash"):
        asyncio.run(run_meta(config2, run_id="run-1", context=ctx2, archive=archive2))
    assert len(archive2.list(Promotion, run_id="run-1")) == 1  # round 1 stopped in adapt
    resumed = asyncio.run(run_meta(config2, run_id="run-1", resume=True, context=ctx2, archive=archive2))
    assert outcome(resumed, archive2) == outcome(reference, archive)
    assert resumed["archive_view"] == reference["archive_view"]  # read back from the checkpointer as the model
