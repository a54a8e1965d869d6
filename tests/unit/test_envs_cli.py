"""`coevo envs list|show`: suites listed; answers hidden unless --reveal."""

from typer.testing import CliRunner

from coevo.cli.envs import app
from coevo.envs.registry import get_env

runner = CliRunner()
REF = "reasoning_gym:size=10"


def test_list_names_the_builtin_suites():
    result = runner.invoke(app, ["list"])
    assert result.exit_code == 0
    for name in ("reasoning_gym", "bfcl", "textworld"):
        assert name in result.output


def test_show_hides_the_answer_unless_revealed():
    env = get_env(REF)
    task = env.tasks("train", 1)[0]
    gold_word = env.reveal(task).split(",")[0].strip()
    hidden = runner.invoke(app, ["show", REF, "--split", "train", "--n", "1"], env={"COLUMNS": "400"})
    shown = runner.invoke(app, ["show", REF, "--split", "train", "--n", "1", "--reveal"], env={"COLUMNS": "400"})
    assert hidden.exit_code == 0 and shown.exit_code == 0
    assert task.id in hidden.output and "answer" not in hidden.output
    assert "answer" in shown.output and env.reveal(task) in shown.output and gold_word


def test_show_unknown_env_is_a_clean_error():
    result = runner.invoke(app, ["show", "nope"])
    assert result.exit_code == 1 and "unknown env" in result.output
