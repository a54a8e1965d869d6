"""Sealed splits: val/test scoring diagnostics are cut to `public` and train ones lose the gold answer before
meta roles see them."""

from coevo.envs.base import Score, Task
from coevo.envs.redact import redact_detail, redact_for_meta, redact_trajectory_detail
from coevo.models.trajectory import Trajectory

DETAIL = {"expected": "GOLD-42", "got": "41", "error": "expected GOLD-42", "public": {"family": "f"}}


def _task(split):
    return Task(id="t", env="e", split=split, prompt="p")


def test_train_detail_reaches_meta_roles_without_the_gold_answer():
    score = redact_for_meta(_task("train"), Score(reward=0.5, passed=False, detail=DETAIL))
    assert "GOLD-42" not in str(score.detail) and score.reward == 0.5
    # what the agent answered, the public diagnostics and the kind of answer expected
    assert score.detail == {"got": "41", "public": {"family": "f"}, "answer_kind": "text"}


def test_val_and_test_details_are_redacted_to_public():
    for split in ("val", "test"):
        score = redact_for_meta(_task(split), Score(reward=1.0, passed=True, detail=DETAIL))
        assert "GOLD-42" not in str(score.detail)
        assert score.detail["public"] == {"family": "f"} and score.detail["redacted"] is True
        assert score.reward == 1.0 and score.passed


def test_trajectory_detail_is_redacted_by_its_split():
    traj = Trajectory(task_id="t", split="val", score_detail=DETAIL)
    assert "GOLD-42" not in str(redact_trajectory_detail(traj).score_detail)
    assert "GOLD-42" not in str(redact_detail("train", DETAIL))


def test_a_train_detail_keeps_only_what_a_curator_may_read_whatever_a_user_env_writes():
    detail = {"got": "41", "solution": "GOLD-42", "target": ["GOLD-42"], "hint": {"answer": "GOLD-42"},
              "public": {"family": "f"}}
    assert redact_detail("train", detail) == {"got": "41", "public": {"family": "f"}}
    assert "GOLD-42" not in str(redact_detail("val", detail))


def test_the_kind_of_answer_reaches_a_curator_without_the_answer():
    kinds = {gold: redact_detail("train", {"expected": gold})["answer_kind"] for gold in ("42", " -3.5 ", "drow")}
    assert kinds == {"42": "number", " -3.5 ": "number", "drow": "text"}
    assert redact_detail("train", {"expected": 7})["answer_kind"] == "number"
    assert redact_detail("train", {"expected": [{"f": {"x": 1}}]})["answer_kind"] == "structured"
    assert "answer_kind" not in redact_detail("val", {"expected": "42"})  # val/test: public only
