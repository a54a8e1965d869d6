"""The offline operator library (issue 23, item 2): every operator applies, validates, stays in the
paths it declares and addresses the causes it declares; candidates are sampled deterministically
per (seed, round, direction, sample); the hook conditions and stop sequences the operators use."""

import asyncio
import json
import random

import pytest
from langchain_core.messages import AIMessage

from coevo.envs.base import Episode, Score, Task
from coevo.envs.redact import redact_detail
from coevo.harnesses import load_harness
from coevo.harnesses.engine import EngineContext
from coevo.harnesses.patch import CONTROL_FIELDS, apply_patch
from coevo.harnesses.registry import CONDITIONS, HookContext, repeats
from coevo.harnesses.runtime import arun_rollout
from coevo.harnesses.spec import BPE, HarnessSpec
from coevo.meta.state import Direction, Evidence
from coevo.models.fake import ScriptedChatModel
from coevo.roles.editor import OfflineEditor
from coevo.roles.operators import OPERATORS, Material, applicable, assignments, draw, order, seed_of, specific
from coevo.roles.operators.control import unreadable

KIND_FOR = {
    "answer_format_rule": "format:no_marker", "budget_model_calls": "no_answer:budget:model_calls",
    "budget_output_tokens": "truncated:output_tokens", "category_procedure": "value:sign",
    "concise_system": "truncated:output_tokens", "context_history": "loop:repetition",
    "context_tool_output": "tool:python", "decoding_stop": "loop:repetition", "decoding_temperature": "value:sign",
    "demonstrations": "value:wrong", "exact_value_rule": "value:operand",
    "hook_finish_before_budget": "no_answer:budget:model_calls", "hook_repetition": "loop:repetition",
    "hook_retry_unparsed": "format:no_marker", "hook_self_check": "value:sign", "hook_tool_error": "tool:python",
    "bpe_settings": "wrong_answer",
    "lesson": "value:sign", "parser_json_field": "format:no_marker", "parser_marker_variant": "form:extra_text",
    "parser_number": "format:no_marker", "parser_on_no_action": "format:no_marker",
    "parser_strip_fences": "format:violation", "tool_describe": "tool:python", "tool_hide": "tool:python",
    "tool_output_json": "tool:python", "tool_rename": "tool:python",
    "verifier_hint_rule": "simple_function_checker:wrong_func_name", "tool_expose": "value:wrong",
    "decoding_constrain": "format:no_marker", "demo_quote_evidence": "value:operand"}
"""A cause each operator declares it addresses (every registered operator must be listed)."""

H0 = load_harness("reasoning_gym")
H0_BPE = H0.model_copy(update={"bpe": BPE()})
H0_HIDDEN = H0.model_copy(update={"tool_view": H0.tool_view.model_copy(update={"exposed": []})})
SPEC_FOR = {"bpe_settings": H0_BPE, "tool_expose": H0_HIDDEN, "demo_quote_evidence": load_harness("showcase")}
"""The spec an operator that needs more than H0 edits (``Operator.needs``)."""


def train_tasks():
    fams = {"chain_sum": "State the final answer to the following arithmetic problem: {i} + 2 =",
            "spell_backward": "Spell this word backward (example: sun -> nus): w{i}rd"}
    return {f"{f}-{i}": Task(id=f"{f}-{i}", env="rg", split="train", prompt=p.format(i=i), metadata={"family": f})
            for f, p in fams.items() for i in range(4)}


def material(kind, category="chain_sum", spec=H0, env_tools=("calculator",)):
    tasks = train_tasks()
    ids = [t for t in tasks if t.startswith(category or "chain_sum")][:2]
    # diagnostics as a real run hands them to the editor: redacted (no gold, its answer_kind)
    evidence = [Evidence(task_id=i, answer="9", diagnostics=redact_detail("train", {"expected": str(int(i[-1]) + 2)}))
                for i in ids]
    cause = f"{kind}@{category}" if category else kind
    return Material(Direction(id="d0", cause=cause, description="", task_ids=ids, evidence=evidence), spec, tasks,
                    demo_answer=lambda task, diagnostics: str(int(task.id[-1]) + 2),  # the env's reveal, as in a run
                    env_tools=env_tools)


def test_every_registered_operator_has_a_cause_in_this_test_and_a_known_component():
    assert set(KIND_FOR) == set(OPERATORS)
    assert {op.component for op in OPERATORS.values()} >= {"prompt", "skills", "parser", "hooks", "budget",
                                                           "decoding", "context", "tool_view", "memory"}


@pytest.mark.parametrize("name", sorted(KIND_FOR))
def test_each_operator_applies_validates_and_declares_its_causes(name):
    op, kind, spec = OPERATORS[name], KIND_FOR[name], SPEC_FOR.get(name, H0)
    assert op.causes and op.addresses([kind]) and op in applicable([kind], spec=spec)
    m = material(kind, spec=spec)
    edits = [e for e in (op.make(m, random.Random(s)) for s in range(6)) if e is not None]
    assert edits, f"{name} made no edit for {kind}"
    for edit in edits:
        child = apply_patch(spec, edit.ops)  # applies and validates (hooks name registered conditions)
        assert child.id != spec.id and edit.why
        assert all(any(o["path"] == p or o["path"].startswith(p.rstrip("/") + "/") for p in op.paths)
                   for o in edit.ops), (name, edit.ops)
        assert set(edit.demo_tasks) <= set(m.tasks) and all(m.tasks[t].split == "train" for t in edit.demo_tasks)
        carried = [t for t in m.tasks if m.tasks[t].prompt in str(edit.ops)]
        assert sorted(carried) == sorted(edit.demo_tasks)  # a demonstration names every task it carries


def test_operators_not_addressing_a_cause_are_not_drawn():
    kinds = ["tool:python"]
    names = {op.name for op in applicable(kinds)}
    assert "hook_tool_error" in names and "parser_number" not in names and "hook_self_check" not in names
    assert all(op.inside(list(CONTROL_FIELDS)) for op in applicable(kinds, list(CONTROL_FIELDS)))
    assert "tool_describe" in {op.name for op in applicable(kinds, list(CONTROL_FIELDS))}
    assert "lesson" not in {op.name for op in applicable(kinds, list(CONTROL_FIELDS))}


def test_number_parser_only_for_numeric_answers_and_demonstrations_never_use_val_tasks():
    m = material("format:no_marker", "spell_backward")
    for ev in m.direction.evidence:
        ev.diagnostics = redact_detail("train", {"expected": "drow", "got": "word"})
    assert OPERATORS["parser_number"].make(m, random.Random(0)) is None
    m = material("value:wrong")
    for t in m.tasks.values():
        t.split = "val"
    assert OPERATORS["demonstrations"].make(m, random.Random(0)) is None


def test_the_number_parser_fires_on_evidence_as_a_real_run_builds_it():
    from coevo.models.trajectory import Trajectory
    from coevo.training.harness_r1.edit_env import failure_excerpt

    ids = [t for t in train_tasks() if t.startswith("chain_sum")][:2]
    evidence = [Evidence(**failure_excerpt(Trajectory(
        task_id=i, split="train", final_answer="so it is 4710", stop_reason="final",
        score_detail={"expected": "4711", "got": "so it is 4710", "public": {"family": "chain_sum"}}))) for i in ids]
    assert all("4711" not in json.dumps(ev.diagnostics) and ev.diagnostics["answer_kind"] == "number"
               for ev in evidence)  # the role reads the kind of answer, never the answer
    m = Material(Direction(id="d0", cause="format:no_marker@chain_sum", description="", task_ids=ids,
                           evidence=evidence), H0, train_tasks())
    assert OPERATORS["parser_number"].make(m, random.Random(0)) is not None

def test_asking_again_without_a_marker_caps_model_calls_at_three_or_the_specs_lower_cap():
    op = OPERATORS["parser_on_no_action"]
    for s in range(6):
        child = apply_patch(H0, op.make(material("format:no_marker"), random.Random(s)).ops)
        assert child.parser.on_no_action == "violation" and child.budget.max_model_calls in (2, 3)
    low = apply_patch(H0, [{"op": "replace", "path": "/budget/max_model_calls", "value": 1}])
    edit = op.make(material("format:no_marker", spec=low), random.Random(0))
    assert apply_patch(low, edit.ops).budget.max_model_calls == 1
    back = apply_patch(H0, edit.ops)
    assert op.make(material("format:no_marker", spec=back), random.Random(0)).ops == [
        {"op": "replace", "path": "/parser/on_no_action", "value": "finish"}]


def test_sampling_is_deterministic_per_seed_round_direction_and_sample():
    m = material("format:no_marker")
    one = [draw(m, seed_of(0, 1, "d0"), s) for s in range(4)]
    again = [draw(m, seed_of(0, 1, "d0"), s) for s in range(4)]
    assert [(o.name, e.ops) for o, e in one] == [(o.name, e.ops) for o, e in again]
    assert len({o.name for o, _ in one}) == 4  # the samples of one direction use distinct operators
    firsts = {draw(m, seed_of(seed, rnd, "d0"), 0)[0].name for seed in range(3) for rnd in range(4)}
    assert len(firsts) > 1  # other seeds and rounds order the operators differently
    editor = OfflineEditor(seed=3)
    a = editor.propose(m.direction, H0, m.tasks, round=2, sample=1).candidate
    b = OfflineEditor(seed=3).propose(m.direction, H0, m.tasks, round=2, sample=1).candidate
    assert a.patch == b.patch and a.id.endswith("-s1") and "by operator" in a.rationale


def test_weighted_order_puts_heavy_operators_first_more_often():
    ops = applicable(["format:no_marker"])
    heavy = max(ops, key=lambda o: o.weight)
    light = min(ops, key=lambda o: o.weight)
    ranks = [(order(ops, random.Random(s)).index(heavy), order(ops, random.Random(s)).index(light))
             for s in range(200)]
    assert sum(h < lo for h, lo in ranks) > 120


def test_operators_naming_the_exact_cause_come_before_those_for_its_family_on_every_seed():
    """``value:operand`` (a number copied from the task): ``demo_quote_evidence`` declares it, the
    rest declare ``value:`` or ``*``; it is the first sample on every seed and round, and the later
    samples still draw the family's operators in a seeded order."""
    m = material("value:operand", spec=load_harness("showcase"))
    assert [op.name for op in applicable(m.kinds, spec=m.spec) if specific(op, m.kinds)] == ["demo_quote_evidence"]
    for seed in range(6):
        for rnd in range(2):
            assert draw(m, seed_of(seed, rnd, "d0"), 0)[0].name == "demo_quote_evidence"
    seconds = {draw(m, seed_of(seed, rnd, "d0"), 1)[0].name for seed in range(6) for rnd in range(2)}
    assert "demo_quote_evidence" not in seconds and len(seconds) > 1


def test_assignments_give_each_direction_its_samples_best_supported_first():
    d = [Direction(id=i, cause="c", description="", task_ids=[]) for i in "ab"]
    assert [(x.id, s) for x, s in assignments(d, 2)] == [("a", 0), ("b", 0), ("a", 1), ("b", 1)]
    assert assignments([], 3) == []


def test_editor_restricted_to_named_operators_and_allowed_fields():
    m = material("format:no_marker")
    for s in range(3):
        cand = OfflineEditor(operators=("parser_marker_variant",)).propose(m.direction, H0, m.tasks, sample=s).candidate
        assert [op["path"] for op in cand.patch] == ["/parser/final_answer_pattern"]
        cand = OfflineEditor().propose(m.direction, H0, m.tasks, sample=s, allowed=["/hooks", "/budget"]).candidate
        assert all(op["path"].startswith(("/hooks", "/budget")) for op in cand.patch)


def test_new_hook_conditions_read_the_reply_and_the_call_count():
    lacks, rep, lt = CONDITIONS["reply_lacks"], CONDITIONS["reply_repeats"], CONDITIONS["model_calls_lt"]
    pattern = unreadable(H0.parser.final_answer_pattern)
    assert lacks(HookContext("after_model", reply="I think so, but let me check."), pattern=pattern)
    assert not lacks(HookContext("after_model", reply="Sure. Final answer: 7"), pattern=pattern)
    assert not lacks(HookContext("after_model", reply=" 7 "), pattern=pattern)  # a bare answer is readable
    assert rep(HookContext("after_model", reply="a b c d a b c d a b c d")) and not rep(HookContext("after_model",
                                                                                                     reply="a b c"))
    assert repeats("x\nx\nx") and lt(HookContext("before_finish", model_calls=1), n=2)
    assert not lt(HookContext("before_finish", model_calls=2), n=2)


def test_an_empty_stop_list_keeps_old_spec_ids_and_stop_sequences_reach_the_model():
    data = H0.model_dump(mode="json")
    assert "stop" not in data["decoding"]
    stopped = apply_patch(H0, [{"op": "add", "path": "/decoding/stop", "value": ["\n\n"]}])
    assert stopped.id != H0.id and stopped.decoding.stop == ["\n\n"]
    task = Task(id="t", env="e", split="train", prompt="q")
    ctx = EngineContext(spec=stopped, model=ScriptedChatModel(script=["Final answer: 1"]), episode=Episode(task=task))
    assert ctx.call_kwargs(0)["stop"] == ["\n\n"] and "stop" not in EngineContext(
        spec=H0, model=ScriptedChatModel(script=["x"]), episode=Episode(task=task)).call_kwargs(0)
    with pytest.raises(ValueError):
        HarnessSpec.model_validate({**data, "decoding": {**data["decoding"], "stop": [""]}})


class OneTaskEnv:
    name = "one"

    def episode(self, task, seed=0):
        return Episode(task=task)

    def score(self, task, answer, episode):
        ok = answer == "7"
        return Score(reward=float(ok), passed=ok, detail={"expected": "7"})


def test_self_check_and_retry_hooks_change_a_rollout_as_declared():
    task = Task(id="t", env="one", split="train", prompt="What is 3 + 4?")
    m = material("value:sign")
    check = apply_patch(H0, OPERATORS["hook_self_check"].make(m, random.Random(0)).ops)
    model = ScriptedChatModel(script=["Final answer: 8", "Final answer: 7"])
    traj = asyncio.run(arun_rollout(check, model, OneTaskEnv(), task))
    assert traj.passed and traj.model_turns == 2  # the first answer was blocked once, then checked
    retry = apply_patch(H0, OPERATORS["hook_retry_unparsed"].make(material("format:no_marker"),
                                                                  random.Random(0)).ops)
    model = ScriptedChatModel(script=[AIMessage("Three plus four makes seven"), "Final answer: 7"])
    traj = asyncio.run(arun_rollout(retry, model, OneTaskEnv(), task))
    assert traj.passed and traj.model_turns == 2


CAUSES = ["format:no_marker", "value:sign", "wrong_answer", "loop:repetition", "truncated:output_tokens",
          "no_answer:budget:model_calls", "tool:python", "no_answer:budget:context_tokens"]


def test_the_bpe_operator_leaves_every_proposal_for_a_spec_without_bpe_unchanged(monkeypatch):
    def proposals():
        out = []
        for kind in CAUSES:
            m = material(kind)
            for seed in range(4):
                for sample in range(3):
                    cand = OfflineEditor(seed=seed).propose(m.direction, H0, m.tasks, round=1, sample=sample).candidate
                    out.append((cand.id, cand.patch, cand.rationale))
        return out

    with_bpe_operator = proposals()
    assert "bpe_settings" not in {op.name for op in applicable(["wrong_answer"], spec=H0)}
    monkeypatch.delitem(OPERATORS, "bpe_settings")  # the library as it was before the operator existed
    assert proposals() == with_bpe_operator
    assert not any("bpe" in str(patch) for _, patch, _ in with_bpe_operator)


def test_a_bpe_spec_gets_bpe_setting_candidates_from_the_offline_editor():
    assert OPERATORS["bpe_settings"].make(material("wrong_answer"), random.Random(0)) is None  # no BPE: nothing
    seen = {}
    for kind in CAUSES:
        m = material(kind, spec=H0_BPE)
        for seed in range(6):
            for sample in range(4):
                cand = OfflineEditor(seed=seed).propose(m.direction, H0_BPE, m.tasks, sample=sample).candidate
                if "bpe_settings" in cand.rationale:
                    child = apply_patch(H0_BPE, cand.patch)
                    seen.setdefault(kind, set()).add((child.bpe.render, child.bpe.max_experience, child.bpe.costs.read))
    assert {"wrong_answer", "truncated:output_tokens"} <= set(seen)  # drawn among the other operators
    assert seen["wrong_answer"] <= {("always", 16, 0.05), ("on_read", 32, 0.05), ("on_read", 16, 0.025)}
    assert seen["truncated:output_tokens"] <= {("on_read", 8, 0.05), ("on_read", 16, 0.1)}  # context pressure
    only = OfflineEditor(operators=("bpe_settings",))
    m = material("wrong_answer")
    assert only.propose(m.direction, H0, m.tasks).candidate.status == "rejected"  # never for a spec without BPE
    assert only.propose(m.direction, H0_BPE, m.tasks).candidate.patch[0]["path"].startswith("/bpe/")


@pytest.mark.parametrize("bpe, kind", [(BPE(max_experience=1), "truncated:output_tokens"),
                                       (BPE(max_experience=100), "wrong_answer"),
                                       (BPE(costs={"read": 2.0}), "truncated:output_tokens"),
                                       (BPE(render="on_read", max_experience=64, costs={"read": 0.0}), "wrong_answer")])
def test_bpe_settings_never_moves_a_setting_against_its_direction(bpe, kind):
    spec = H0.model_copy(update={"bpe": bpe})
    full = kind.startswith("truncated:")
    for seed in range(12):
        edit = OPERATORS["bpe_settings"].make(material(kind, spec=spec), random.Random(seed))
        if edit is None:
            continue
        child = apply_patch(spec, edit.ops).bpe
        assert child.max_experience <= bpe.max_experience if full else child.max_experience >= bpe.max_experience
        assert child.costs.read >= bpe.costs.read if full else child.costs.read <= bpe.costs.read


def test_under_an_eval_temperature_the_offline_editor_proposes_no_decoding_temperature_edit():
    """With ``eval.temperature`` set, val and test sample at it and training at ``train.temperature``,
    so a decoding-temperature edit would score exactly its parent: ``editor_for`` leaves the operator
    out; without it (the default job) the editor draws as before."""
    from coevo.config import RunConfig
    from coevo.roles.editor import editor_for

    def drawn(editor):
        names = []
        for kind in ("value:sign", "loop:repetition", "wrong_answer", "truncated:output_tokens"):
            m = material(kind)
            for sample in range(4):
                cand = editor.propose(m.direction, H0, m.tasks, round=1, sample=sample).candidate
                names.append(cand.rationale.split(" by operator ")[-1].split(" ")[0])
        return names

    sampled, greedy = RunConfig(eval={"k": 3, "temperature": 0.7}), RunConfig()
    assert "decoding_temperature" in drawn(editor_for(greedy, None))
    assert "decoding_temperature" not in drawn(editor_for(sampled, None))
    plain = [OfflineEditor(seed=0).propose(material(k).direction, H0, material(k).tasks, round=1).candidate.patch
             for k in CAUSES]
    assert plain == [editor_for(greedy, None).propose(material(k).direction, H0, material(k).tasks, round=1)
                     .candidate.patch for k in CAUSES]  # unset: the same candidates as before


def test_tool_expose_shows_only_a_tool_the_env_offers_and_the_view_hides():
    op = OPERATORS["tool_expose"]
    assert not op.fits(H0)  # H0 shows every env tool already (exposed = None)
    assert op.make(material("value:wrong", spec=H0_HIDDEN, env_tools=()), random.Random(0)) is None
    only = H0.model_copy(update={"tool_view": H0.tool_view.model_copy(update={"exposed": ["python"]})})
    assert op.make(material("value:wrong", spec=only, env_tools=("python",)), random.Random(0)) is None
    edit = op.make(material("value:wrong", spec=only, env_tools=("python", "calculator")), random.Random(0))
    child = apply_patch(only, edit.ops)
    assert child.tool_view.exposed == ["python", "calculator"] and "calculator" in child.tool_view.descriptions


def test_decoding_constrain_turns_the_schema_on_once_and_the_rollout_answers_under_it():
    op = OPERATORS["decoding_constrain"]
    child = apply_patch(H0, op.make(material("format:no_marker"), random.Random(0)).ops)
    assert child.decoding.constrain == "actions_or_answer" and child.parser.mode == "json"
    assert not op.fits(child)  # already constrained: nothing left to turn on
    task = Task(id="t", env="rg", split="train", prompt="1 + 2 =")

    class Env:
        name = "rg"

        def episode(self, task, seed=0):
            return Episode(task=task)

        def score(self, task, answer, episode):
            return Score(reward=float(answer == "3"), passed=answer == "3")

    model = ScriptedChatModel(script=['{"final_answer": "3"}'])
    traj = asyncio.run(arun_rollout(child, model, Env(), task))
    assert traj.passed and "final_answer" in str(model.call_kwargs[0]["response_format"])


def test_the_offline_editor_reads_the_env_tools_once_when_first_needed():
    from coevo.envs.registry import get_env
    from coevo.roles.editor import env_tool_names

    env = get_env("reasoning_gym:families=chain_sum,size=20,seed=0,tools=calculator+python")
    assert env_tool_names(env) == ["python", "calculator"]
    asked = []
    editor = OfflineEditor(operators=["tool_expose"], env_tools=lambda: asked.append(1) or ["calculator"])
    m = material("value:wrong", spec=H0_HIDDEN)
    for sample in range(2):
        cand = editor.propose(m.direction, H0_HIDDEN, m.tasks, sample=sample).candidate
        assert cand.patch[0]["value"] == ["calculator"]
    assert asked == [1]


def test_demo_quote_evidence_quotes_the_one_clause_that_holds_each_demonstrations_answer():
    from coevo.roles.operators.demos import evidence_span

    assert evidence_span("Prices: fig 12, kiwi 64, plum 18. What does the kiwi cost?", "64") == "kiwi 64"
    assert evidence_span("a 64, b 64.", "64") is None  # two clauses hold it: ambiguous, left alone
    assert evidence_span("a 164, b 6.4", "64") is None  # not as a whole number
    spec = load_harness("showcase")
    op = OPERATORS["demo_quote_evidence"]
    assert not op.fits(H0)  # no demonstration to rewrite
    child = apply_patch(spec, op.make(material("value:operand", spec=spec), random.Random(0)).ops)
    demos = [s for s in child.skills.values() if s.kind == "demonstration"]
    assert demos and all(s.output.split("\n")[0] in s.input for s in demos)
    assert all(s.output.endswith(f"Final answer: {s.output.split()[1]}") for s in demos)
    assert op.make(material("value:operand", spec=child), random.Random(0)) is None  # quoted already
