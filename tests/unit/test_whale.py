"""WHALE, FST, stagewise and PACE on fakes: the adaptive patience rule, the persistent sampler across
cycles, best-of-archive acceptance, field restrictions in the patch checker, and a schedule that
never reads validation."""

import asyncio
import json

import pytest
from test_meta_loop import WORDS, WordEnv, policy

from coevo.app.run import run_meta
from coevo.config import ConfigError, RunConfig, parse_config
from coevo.envs.base import Task
from coevo.evaluation.engine import evaluate
from coevo.evaluation.results import TaskOutcome
from coevo.harnesses.patch import CONTROL_FIELDS, PROMPT_FIELDS
from coevo.harnesses.spec import HarnessSpec, Prompt
from coevo.meta.context import MetaContext
from coevo.meta.search import SearchEntry
from coevo.meta.state import Candidate
from coevo.models.fake import ScriptedChatModel
from coevo.nodes.refine import realise
from coevo.nodes.search import best_of_archive
from coevo.records import Checkpoint, EditRecord, Phase
from coevo.roles.editor import OfflineEditor, Proposal
from coevo.roles.proposer import LLMProposer, OfflineProposer, SearchView, ranked
from coevo.storage import Archive
from coevo.training.schedule import Patience, PersistentSampler, epochs_to_steps, run_phase


def test_patience_stops_exactly_when_window_and_patience_say_so_and_never_before_the_minimum():
    rule = Patience(minimum=4, patience=2, window=2)
    rewards = [0.1, 0.5, 0.4, 0.3, 0.2, 0.9]
    # window means from step 2: .3 .45 .35 .25 .55; best .45 after step 3; no new best after steps 4, 5
    assert [rule.stop(rewards[:n]) is not None for n in range(1, 7)] == [False] * 4 + [True, False]
    assert "for 2 steps" in rule.stop(rewards[:5]) and "after 3" in rule.stop(rewards[:5])
    flat = [0.5] * 10  # never improves after the first full window, but the minimum holds it
    late = Patience(minimum=7, patience=1, window=3)
    assert [late.stop(flat[:n]) is not None for n in range(1, 11)] == [False] * 6 + [True] * 4
    rising = [i / 10 for i in range(10)]
    assert all(rule.stop(rising[:n]) is None for n in range(1, 11))
    with pytest.raises(ValueError):
        Patience(minimum=0, patience=1)
    assert epochs_to_steps(0.2, 40, 2) == 4 and epochs_to_steps(0.01, 40, 2) == 1


def test_persistent_sampler_visits_every_task_once_per_epoch_across_phases():
    tasks = list("abcdefg")
    seen: list[str] = []
    position = 0
    for steps in (2, 5, 3, 4):  # phases of uneven lengths, each continuing where the last stopped
        run = run_phase(lambda i, batch: seen.extend(batch) or 0.0, tasks, 3, steps, PersistentSampler(5), position)
        assert run.position == position + 3 * steps
        position = run.position
    epochs = [seen[i:i + 7] for i in range(0, len(seen) - len(seen) % 7, 7)]
    assert len(epochs) == 6 and all(sorted(e) == tasks for e in epochs)
    assert len({tuple(e) for e in epochs}) > 1  # each epoch reshuffled
    sampler, kept, position = PersistentSampler(5), [], 0
    for size in (2, 3, 4, 6):  # "c" and "f" went into demonstrations: passed over, epochs stay whole
        batch, position = sampler.take(tasks, position, size, keep=lambda t: t not in "cf")
        kept += batch
    assert 19 <= position <= 21 and [sorted(kept[i:i + 5]) for i in (0, 5, 10)] == [list("abdeg")] * 3
    with pytest.raises(ValueError, match="keeps none"):
        sampler.take(tasks, 0, 1, keep=lambda t: False)


class PhaseTrainer:
    """A fake weight phase: the real ``run_phase`` loop with the options the ``train`` node passes,
    a scripted train reward per step, and the checkpoint metrics ``train_rsft`` would record."""

    def __init__(self, archive, tasks_per_step, rewards, fail_once_at=None):
        self.archive, self.tps, self.rewards, self.fail_once_at = archive, tasks_per_step, rewards, fail_once_at
        self.batches: list[list[str]] = []
        self.phases: list[list[str]] = []

    async def __call__(self, checkpoint_id, spec, tasks, round, options=None):
        if self.fail_once_at == round:
            self.fail_once_at = None
            raise RuntimeError("simulated crash in a weight phase")
        drawn: list[str] = []

        def step(i, batch):
            drawn.extend(t.id for t in batch)
            self.batches.append([t.id for t in batch])
            return self.rewards[i % len(self.rewards)]

        phase = options.phase
        ids, stream = {t.id for t in tasks}, phase.stream
        run = run_phase(step, stream, self.tps, phase.max_steps, phase.sampler, phase.position, phase.stop,
                        keep=lambda t: t.id in ids)
        self.phases.append(drawn)
        new = f"{checkpoint_id}+c{round}"
        metrics = {"history": [{"reward": r} for r in run.rewards], "stop_reason": run.stop_reason,
                   "sampler_position": run.position, "epochs": (run.position - phase.position) / len(stream),
                   "reward_mean": sum(run.rewards) / len(run.rewards)}
        self.archive.put(Checkpoint(id=new, base_model="fake", parents=[checkpoint_id],
                                                     metrics=metrics, run_id="run-1"))
        return new, []


def poisoned(calls):
    """The evaluator with validation poisoned: any val evaluation fails the run (and is counted)."""

    async def evaluator(spec, checkpoint, env, split, **kw):
        calls.append(split)
        if split == "val":
            raise AssertionError("the schedule read a validation score")
        return await evaluate(spec, checkpoint, env, split, **kw)

    return evaluator


SEARCH_WORDS = ["mango", "melon", "olive", "peach"]


class SplitWordEnv(WordEnv):
    """``WordEnv`` whose train split holds four more tasks after the first four: room for a search
    split disjoint from the weight phases' tasks (``search.tasks``)."""

    def tasks(self, split, n=None):
        if split != "train":
            return super().tasks(split, n)
        words = (WORDS[:4] + SEARCH_WORDS)[:n]
        return [Task(id=f"w-{w}", env="words", split="train", prompt=f"Repeat the word: {w}") for w in words]


def whale_run(tmp_path, strategy="whale", rewards=(0.5,), effect="help", demos=0, proposer=None, fail_once_at=None,
              search_tasks=2, **whale):
    h0 = HarnessSpec(name="h0", prompt=Prompt(system="Answer the task.", output_format="Reply 'Final answer: X'."))
    (tmp_path / "h0.json").write_text(h0.model_dump_json())
    config = RunConfig(strategy=strategy, rounds=2, db=str(tmp_path / "run.db"), harness=str(tmp_path / "h0.json"),
                       policy="fake:words", env={"ref": "words", "n_train": 4, "n_val": 4, "n_test": 4},
                       train={"tasks_per_step": 1}, whale={"candidates": 2, **whale}, search={"tasks": search_tasks})
    archive = Archive(config.db)
    env, model = SplitWordEnv(), policy(effect)
    trainer = PhaseTrainer(archive, 1, list(rewards), fail_once_at) if strategy != "pace" else None
    calls: list[str] = []
    ctx = MetaContext(config=config, env=env, archive=archive, policy=lambda ckpt: model, trainer=trainer,
                      proposer=proposer or OfflineProposer(editor=OfflineEditor(max_demos=demos)),
                      evaluator=poisoned(calls) if strategy != "pace" else evaluate)
    if fail_once_at is not None:
        with pytest.raises(RuntimeError, match="simulated crash"):
            asyncio.run(run_meta(config, run_id="run-1", context=ctx, archive=archive))
    state = asyncio.run(run_meta(config, run_id="run-1", context=ctx, archive=archive, resume=fail_once_at is not None))
    return state, trainer, calls


def test_whale_fixed_cycles_continue_the_sampler_and_never_read_validation(tmp_path):
    state, trainer, calls = whale_run(tmp_path, weight_epochs=1.5, search_iterations=2)
    assert "val" not in calls and "train" in calls  # validation poisoned: never evaluated
    assert [p.kind for p in state["phases"]] == ["weights", "harness"] * 2
    assert [p.index for p in state["phases"]] == [0, 1, 2, 3]
    assert [len(d) for d in trainer.phases] == [6, 6]  # 1.5 epochs of 4 tasks, one task a step
    drawn = trainer.phases[0] + trainer.phases[1]  # the second cycle starts mid-epoch
    assert all(sorted(drawn[i:i + 4]) == ["w-apple", "w-fig", "w-pear", "w-plum"] for i in range(0, 12, 4))
    weights = state["phases"][0]
    assert weights.unit == "epochs" and weights.length == 1.5 and weights.stop_reason == "fixed length: 1.5 epochs"
    assert state["phases"][1].stop_reason == "fixed length: 2 iterations"
    assert [(s.phase, s.iteration) for s in state["search_iterations"]] == [(1, 1), (1, 2), (3, 1), (3, 2)]
    assert state["incumbent"] == state["search_iterations"][-1].accepted


def test_adaptive_whale_stops_each_phase_on_training_signals_only(tmp_path):
    state, trainer, calls = whale_run(tmp_path, rewards=(0.1, 0.5, 0.4, 0.3, 0.2, 0.1), schedule="adaptive",
                                      min_epochs=0.5, patience_epochs=0.5, window_epochs=0.25, max_epochs=3,
                                      min_iterations=2, search_patience=1)
    assert "val" not in calls
    weights = [p for p in state["phases"] if p.kind == "weights"]
    # steps: minimum 2, patience 2, window 1: best 0.5 at step 2, stop after step 4
    assert [p.steps for p in weights] == [4, 4] and all("patience 2" in p.stop_reason for p in weights)
    assert weights[0].signal == [0.1, 0.5, 0.4, 0.3]
    harness = [p for p in state["phases"] if p.kind == "harness"]
    assert all(p.length >= 2 for p in harness) and all("iterations" in p.stop_reason for p in harness)
    assert trainer.phases[1][0] == trainer.batches[4][0]  # the second weight phase continues the stream


def entry(hid, iteration, order, score, calls=4):
    return SearchEntry(harness_id=hid, iteration=iteration, order=order, score=score, model_calls=calls,
                       per_task={"t": TaskOutcome(task_id="t", seeds=[0], rewards=[score], passed=[score > 0.5])})


def test_best_of_archive_can_accept_a_harness_older_than_the_last_iteration():
    archive = [entry("seed", 0, 0, 0.2), entry("a", 1, 1, 0.8), entry("b", 2, 2, 0.6), entry("c", 2, 3, 0.8, 5)]
    assert best_of_archive(archive).harness_id == "a"  # ties: fewer model calls, then older
    archive.append(entry("d", 3, 4, 0.8, 4))
    assert best_of_archive(archive).harness_id == "a"
    assert best_of_archive(archive, excluded={"t"}).harness_id == "seed"  # every score 0: fewest calls, oldest


class ScriptedSearch:
    """Iteration 1 adds the rule the fake policy needs; every later iteration rewrites it into a useless one."""

    def propose(self, view, m, iteration):
        best = view.spec(ranked(view.entries)[0].harness_id)
        if "r" not in best.prompt.rules:
            rule = {"slot": "system", "text": "Call exactly the function."}
            op = {"op": "add", "path": "/prompt/rules/r", "value": rule}
        else:
            op = {"op": "replace", "path": "/prompt/rules/r/text", "value": f"Answer in one word ({iteration})."}
        cand = Candidate(id=f"i{iteration}", direction="scripted", parent_id=best.id, patch=[op])
        return [Proposal(candidate=cand)]


def test_whale_graph_accepts_a_harness_older_than_the_last_iteration(tmp_path):
    state, _, _ = whale_run(tmp_path, weight_epochs=0.25, search_iterations=3, proposer=ScriptedSearch())
    first = [s for s in state["search_iterations"] if s.phase == 1]
    archive = {e.harness_id: e for e in state["search"]}
    assert [len(s.candidates) for s in first] == [1, 1, 1]  # every iteration evaluated a new candidate
    assert first[0].changed and first[0].score == 1.0 and not first[1].changed and not first[2].changed
    assert first[2].accepted == first[0].accepted != first[2].candidates[0]
    assert archive[state["incumbent"]].score == 1.0


def test_an_fst_or_pace_prompt_phase_patch_touching_a_control_field_is_rejected(tmp_path):
    archive = Archive(str(tmp_path / "a.db"))
    spec = HarnessSpec()
    parent = archive.add_harness(spec, [], "base", "run-1")
    ctx = MetaContext(config=RunConfig(db=str(tmp_path / "a.db")), env=WordEnv(), archive=archive,
                      policy=lambda c: None, run_id="run-1")
    patches = {"hook": [{"op": "add", "path": "/hooks/h", "value": {"event": "after_model", "condition": "always",
                                                                     "action": "warn", "message": "m"}}],
               "moved": [{"op": "copy", "from": "/prompt/system", "path": "/prompt/system"},
                         {"op": "replace", "path": "/parser/strip_code_fences", "value": True}],
               "prompt": [{"op": "replace", "path": "/prompt/system", "value": "Be brief."}]}
    out = {}
    for name, patch in patches.items():
        cand = Candidate(id=name, direction="d", parent_id=parent, patch=patch)
        out[name] = realise(Proposal(candidate=cand), ctx, 0, allowed=list(PROMPT_FIELDS))
    assert out["hook"].status == "rejected" and "/hooks/h" in out["hook"].reason
    assert "may edit only /prompt" in out["hook"].reason
    assert out["moved"].status == "rejected" and "/parser/strip_code_fences" in out["moved"].reason
    assert out["prompt"].status == "proposed" and out["prompt"].spec_id
    control = realise(Proposal(candidate=Candidate(id="p", direction="d", parent_id=parent,
                                                   patch=patches["prompt"])), ctx, 0, allowed=list(CONTROL_FIELDS))
    assert control.status == "rejected" and "/prompt/system" in control.reason


def test_fst_searches_prompts_only_and_stagewise_holds_whales_cumulative_budget(tmp_path):
    (tmp_path / "f").mkdir()
    (tmp_path / "s").mkdir()
    fst, _, calls = whale_run(tmp_path / "f", "fst", weight_epochs=0.5, search_iterations=1)
    assert "val" not in calls and all(p.fields == ["/prompt"] for p in fst["phases"] if p.kind == "harness")
    archive = Archive(str(tmp_path / "f" / "run.db"))
    for e in archive.list(EditRecord, run_id="run-1"):
        assert e.status == "rejected" or all(op["path"].startswith("/prompt/") for op in e.patch)
    stage, trainer, _ = whale_run(tmp_path / "s", "stagewise", weight_epochs=0.5, search_iterations=1)
    assert [(p.kind, p.length) for p in stage["phases"]] == [("weights", 1.0), ("harness", 2)]
    assert len(trainer.phases) == 1 and len(trainer.phases[0]) == 4


def test_pace_runs_a_prompt_phase_then_a_control_phase_through_the_val_gate(tmp_path):
    state, _, _ = whale_run(tmp_path, "pace", pace_patience=1)
    kinds = [p.kind for p in state["phases"]]
    assert kinds == ["prompt", "control"]
    assert state["phases"][0].fields == ["/prompt"] and state["phases"][1].fields == list(CONTROL_FIELDS)
    assert all(p.stop_reason for p in state["phases"])
    accepted = [d for d in state["decisions"] if d.accepted]
    assert accepted and state["incumbent"] == accepted[-1].candidate_id  # changed only through the val gate
    for e in Archive(str(tmp_path / "run.db")).list(EditRecord, run_id="run-1"):
        if e.status != "rejected" and e.round == 0:
            assert all(op["path"].startswith("/prompt/") for op in e.patch)


def test_whale_strategies_train_with_rsft_whatever_the_train_section_says():
    assert RunConfig(strategy="whale").train.algorithm == "rsft"
    assert parse_config({"strategy": "fst", "train": {"algorithm": "grpo"}}).train.algorithm == "rsft"
    assert parse_config({"strategy": "vace", "train": {"algorithm": "rsft"}}).train.algorithm == "rsft"
    assert RunConfig(strategy="vace").train.algorithm == "grpo"
    with pytest.raises(ConfigError, match="whale.schedule"):
        parse_config({"strategy": "whale", "whale": {"schedule": "sometimes"}})


class ScriptedProposer(LLMProposer):
    def __init__(self, replies):
        super().__init__(ScriptedChatModel(script=list(replies)))

    @property
    def seen(self):
        return [messages[-1].content for messages in self.chat.calls]


def test_llm_proposer_may_inspect_a_harness_before_proposing_and_is_held_to_its_fields():
    spec = HarnessSpec()
    view = SearchView(entries=[entry(spec.id, 0, 0, 0.5)], spec=lambda h: spec, trajectories=lambda h: [],
                      allowed=list(PROMPT_FIELDS))
    good = {"candidates": [{"parent": spec.id[:12], "rationale": "r",
                            "patch": [{"op": "replace", "path": "/prompt/system", "value": "Be brief."}]}]}
    proposer = ScriptedProposer([json.dumps({"inspect": [spec.id[:12]]}), json.dumps(good)])
    out = proposer.propose(view, 2, 1)
    assert len(out) == 1 and out[0].candidate.parent_id == spec.id and len(out[0].calls) == 2
    assert "Details you asked for" in proposer.seen[1] and '"system"' in proposer.seen[1]
    bad = {"candidates": [{"parent": spec.id[:12], "rationale": "r",
                           "patch": [{"op": "replace", "path": "/budget/max_model_calls", "value": 3}]}]}
    out = ScriptedProposer([json.dumps(bad), json.dumps(bad)]).propose(view, 2, 1)
    assert out[0].candidate.status == "rejected" and "/budget/max_model_calls" in out[0].candidate.reason


def test_offline_proposer_recombines_two_parents_and_drops_an_edit_that_regressed_tasks():
    rule = {"slot": "system", "text": "Be exact."}
    demo = {"kind": "demonstration", "input": "q", "output": "a"}
    base = HarnessSpec()
    a = HarnessSpec.model_validate({**base.model_dump(),
                                    "prompt": {**base.prompt.model_dump(), "rules": {"exact": rule}}})
    b = HarnessSpec.model_validate({**base.model_dump(), "skills": {"demo_1": demo}})
    specs = {s.id: s for s in (base, a, b)}

    def outcome(*rewards):
        return {f"t{i}": TaskOutcome(task_id=f"t{i}", seeds=[0], rewards=[r], passed=[r == 1.0])
                for i, r in enumerate(rewards)}

    entries = [SearchEntry(harness_id=base.id, order=0, score=0.5, per_task=outcome(1.0, 0.0)),
               SearchEntry(harness_id=a.id, parent_id=base.id, iteration=1, order=1, score=0.5,
                           per_task=outcome(0.0, 1.0), patch=[{"op": "add", "path": "/prompt/rules/exact",
                                                               "value": rule}]),
               SearchEntry(harness_id=b.id, parent_id=base.id, iteration=1, order=2, score=0.4,
                           per_task=outcome(0.0, 0.8))]
    view = SearchView(entries=entries, spec=specs.__getitem__, trajectories=lambda h: [])
    out = [p.candidate for p in OfflineProposer().propose(view, 3, 2)]
    assert [c.direction for c in out] == ["recombine", "ablate"]
    assert out[0].parent_id == base.id  # the best (score tie: the older) gets the runner-up's rule
    assert out[0].patch == [{"op": "add", "path": "/prompt/rules/exact", "value": rule}]
    assert out[1].parent_id == a.id and out[1].patch == [{"op": "remove", "path": "/prompt/rules/exact"}]
    fenced = SearchView(entries=entries, spec=specs.__getitem__, trajectories=lambda h: [], allowed=["/skills"])
    assert [c.direction for c in (p.candidate for p in OfflineProposer().propose(fenced, 3, 2))] == []


def test_within_keeps_allowed_ops_and_turns_a_demonstration_into_a_prompt_example():
    from coevo.roles.proposer import within

    demo = {"op": "add", "path": "/skills/demo_1", "value": {"kind": "demonstration", "input": "2+2", "output": "4"}}
    hook = {"op": "add", "path": "/hooks/h", "value": {}}
    assert within([demo, hook], None) == [demo, hook]
    assert within([demo, hook], ["/hooks"]) == [hook]
    (rule,) = within([demo, hook], list(PROMPT_FIELDS))
    assert rule["path"] == "/prompt/rules/demo_1" and "2+2" in rule["value"]["text"]


def test_report_shows_phases_their_stopping_reasons_and_the_accepted_harness_per_iteration(tmp_path):
    from coevo.report.html import write_report
    from coevo.report.phases import phases_tables

    state, _, _ = whale_run(tmp_path, weight_epochs=0.5, search_iterations=2, proposer=ScriptedSearch())
    page = write_report("run-1", str(tmp_path / "run.db"), tmp_path / "report", state).read_text()
    assert "<h2>Phases</h2>" in page and "Accepted harness per iteration" in page
    assert "fixed length: 0.5 epochs" in page and "fixed length: 2 iterations" in page
    assert all(s.accepted[:12] in page for s in state["search_iterations"])
    # the final-harness diff is the accepted search harness (no gate decision names it)
    assert "no candidate was accepted" not in page and "Call exactly the function." in page
    assert [t.title for t in phases_tables(state)] == ["phases", "accepted harness per iteration"]
    assert phases_tables({"history": []}) == []


def test_each_phase_is_stored_with_its_time_window_for_budget_attribution(tmp_path):
    state, _, _ = whale_run(tmp_path, weight_epochs=0.5, search_iterations=1)
    stored = Archive(str(tmp_path / "run.db")).list(Phase, run_id="run-1")
    assert [(p.index, p.kind, p.stop_reason) for p in stored] == [(p.index, p.kind, p.stop_reason)
                                                                   for p in state["phases"]]
    assert all(p.started_at is not None and p.started_at <= p.ended_at for p in stored)
    assert all(a.ended_at <= b.started_at for a, b in zip(stored, stored[1:]))  # disjoint, in order


class HookSearch:
    """Proposes a control-logic edit (a hook) of the best harness every iteration."""

    def propose(self, view, m, iteration):
        best = view.spec(ranked(view.entries)[0].harness_id)
        hook = {"event": "after_model", "condition": "always", "action": "warn", "message": f"m{iteration}"}
        return [Proposal(candidate=Candidate(id=f"h{iteration}", direction="scripted", parent_id=best.id,
                                             patch=[{"op": "add", "path": "/hooks/h", "value": hook}]))]


def test_an_fst_run_rejects_a_control_field_patch_in_the_patch_checker(tmp_path):
    state, _, _ = whale_run(tmp_path, "fst", weight_epochs=0.25, search_iterations=1, proposer=HookSearch())
    rejected = [r for s in state["search_iterations"] for r in s.rejected]
    assert len(rejected) == 2 and all("/hooks/h" in r and "may edit only /prompt" in r for r in rejected)
    assert state["incumbent"] == state["start_harness"]
    (tmp_path / "w").mkdir()
    whale, _, _ = whale_run(tmp_path / "w", "whale", weight_epochs=0.25, search_iterations=1, proposer=HookSearch())
    assert not [r for s in whale["search_iterations"] for r in s.rejected]  # WHALE may edit any field


def test_a_whale_run_killed_in_its_second_weight_phase_resumes_to_the_same_end(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    reference, ref_trainer, _ = whale_run(tmp_path / "a", weight_epochs=0.75, search_iterations=2,
                                          proposer=ScriptedSearch())
    resumed, trainer, _ = whale_run(tmp_path / "b", weight_epochs=0.75, search_iterations=2,
                                    proposer=ScriptedSearch(), fail_once_at=1)
    assert [(p.index, p.kind, p.length, p.stop_reason) for p in resumed["phases"]] == \
        [(p.index, p.kind, p.length, p.stop_reason) for p in reference["phases"]]
    assert resumed["sampler_position"] == reference["sampler_position"] == 6
    assert trainer.phases == ref_trainer.phases  # the second phase continued the stream where the first stopped
    assert resumed["incumbent"] == reference["incumbent"] and resumed["plan"] == reference["plan"]


def test_offline_proposer_offers_control_edits_in_a_control_only_phase():
    spec = HarnessSpec()
    entries = [SearchEntry(harness_id=spec.id, score=1.0)]
    view = SearchView(entries=entries, spec=lambda h: spec, trajectories=lambda h: [], allowed=list(CONTROL_FIELDS))
    out = [p.candidate for p in OfflineProposer().propose(view, 3, 1)]
    assert [c.patch[0]["path"] for c in out] == ["/parser/strip_code_fences", "/hooks/finish_before_budget"]
    prompt_only = SearchView(entries=entries, spec=lambda h: spec, trajectories=lambda h: [],
                             allowed=list(PROMPT_FIELDS))
    assert OfflineProposer().propose(prompt_only, 3, 1) == []


def test_whale_adaptive_runs_the_patience_rule_whatever_the_configured_schedule(tmp_path):
    (tmp_path / "adaptive").mkdir()
    (tmp_path / "fixed").mkdir()
    rule = dict(rewards=(0.1, 0.5, 0.4, 0.3, 0.2, 0.1), min_epochs=0.5, patience_epochs=0.5, window_epochs=0.25,
                max_epochs=3, min_iterations=2, search_patience=1, weight_epochs=1.5, search_iterations=2)
    state, trainer, calls = whale_run(tmp_path / "adaptive", strategy="whale_adaptive", schedule="fixed", **rule)
    assert "val" not in calls and state["plan"].adaptive
    weights = [p for p in state["phases"] if p.kind == "weights"]
    assert [p.steps for p in weights] == [4, 4] and all("patience 2" in p.stop_reason for p in weights)
    fixed, _, _ = whale_run(tmp_path / "fixed", strategy="whale", schedule="fixed", **rule)
    assert not fixed["plan"].adaptive  # whale itself follows whale.schedule: 1.5 epochs of 4 tasks
    assert [p.steps for p in fixed["phases"] if p.kind == "weights"] == [6, 6]
