"""The demo harness graph (Studio's ``harness_demo``) runs offline on the guarded env calculator."""

from __future__ import annotations

from coevo.envs.calculator import MAX_EXPONENT
from coevo.graphs.demo import graph


def test_demo_graph_answers_the_demo_task():
    out = graph.invoke({"task": "What is (17 + 25) * 3?"})
    assert out["answer"] == "126"
    assert out["stop_reason"] == "final_answer"


def test_demo_calculator_refuses_an_oversized_exponent():
    out = graph.invoke({"task": f"What is 9 ** {MAX_EXPONENT + 1}?"})
    assert f"larger than {MAX_EXPONENT}" in out["answer"]
