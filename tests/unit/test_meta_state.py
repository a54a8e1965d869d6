"""The meta state is typed: every domain field holds pydantic models, each on the checkpointer's
allow-list (derived from the graph's schemas), and they survive its serialiser unchanged."""

import typing

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from pydantic import BaseModel

from coevo.evaluation.results import TaskOutcome
from coevo.graphs.registry import STRATEGIES
from coevo.meta.state import (
    Candidate,
    CandidateChecks,
    Direction,
    EvalSummary,
    MetaState,
    RoundSummary,
    state_models,
)
from coevo.records import GateDecision, GatePair

STATE_MODELS = state_models([MetaState])


def _models(tp, seen):
    """Every pydantic model reachable from type ``tp`` (fields, list/dict/Annotated/union args)."""
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        if tp not in seen:
            seen.add(tp)
            for field in tp.model_fields.values():
                _models(field.annotation, seen)
        return seen
    for arg in typing.get_args(tp):
        _models(arg, seen)
    return seen


def test_every_model_in_each_strategys_state_is_on_its_checkpointer_allow_list():
    for name, strategy in STRATEGIES.items():
        schemas = strategy.build().schemas
        reachable = set()
        for schema in schemas:
            for tp in typing.get_type_hints(schema, include_extras=True).values():
                _models(tp, reachable)
        assert reachable == set(state_models(schemas)), name
    assert GateDecision in STATE_MODELS and TaskOutcome in STATE_MODELS


def test_no_state_field_is_an_untyped_dict_or_list_of_dicts():
    for strategy in STRATEGIES.values():
        for schema in strategy.build().schemas:
            for name, tp in typing.get_type_hints(schema).items():
                for arg in (tp, *typing.get_args(tp)):
                    assert arg is not dict and typing.get_args(arg) != (str, typing.Any), f"{schema}.{name}: {tp}"
                assert typing.get_origin(tp) is not dict or issubclass(typing.get_args(tp)[1], BaseModel), name


def test_state_models_survive_the_checkpoint_serialiser():
    serde = JsonPlusSerializer(allowed_msgpack_modules=STATE_MODELS)
    outcome = TaskOutcome(task_id="t", seeds=[0], rewards=[1.0], passed=[True], trajectory_ids=["x"])
    summary = EvalSummary(harness_id="h", checkpoint_id="w", split="val", evaluation_id="e", score=1.0, pass_at_k=1.0,
                          avg_at_k=1.0, timr=0.0, per_task={"t": outcome})
    state = {"directions": [Direction(id="d0", cause="c", description="d", task_ids=["a", "b"])],
             "checked": [Candidate(id="c", direction="d0", parent_id="h", checks=CandidateChecks(local_tasks=3))],
             "validation": {"h": summary},
             "decisions": [GateDecision(id="g", run_id="r", round=0, incumbent_id="h", candidate_id="c", b=0.0, c=1.0,
                                        accepted=True, reason="ok", pairs=GatePair.pairs(summary, summary))],
             "history": [RoundSummary(round=0, incumbent="h", checkpoint="w")]}
    assert serde.loads_typed(serde.dumps_typed(state)) == state


def test_a_per_task_outcome_read_without_its_task_id_takes_its_key():
    """The committed table JSON leaves each outcome's ``task_id`` out beside its key
    (``coevo.app.tables.results_json``); reading fills it back in, and an id written differently from its key is
    kept as written."""
    from coevo.meta.state import EvalSummary

    summary = EvalSummary.model_validate({
        "harness_id": "h", "checkpoint_id": "c", "split": "test", "evaluation_id": "e", "score": 0.5, "pass_at_k": 0.5,
        "avg_at_k": 0.5, "timr": 0.0,
        "per_task": {"t1": {"seeds": [0], "rewards": [1.0], "passed": [True]},
                     "t2": {"task_id": "other", "seeds": [0], "rewards": [0.0], "passed": [False]}}})
    assert summary.per_task["t1"].task_id == "t1" and summary.per_task["t2"].task_id == "other"
    assert summary.per_task["t1"].rewards == [1.0] and summary.estimate.n == 2
