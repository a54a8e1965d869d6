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
    assert score.detail == {"got": "41", "public": {"family": "f"}}  # what the agent answered, public diagnostics


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
