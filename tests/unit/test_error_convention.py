"""One error convention (``coevo.errors``): what a user gave that is wrong is raised as a ``CoevoError``
(which the CLI prints as one paragraph), never as a bare ``ValueError``. The check walks the source of
the user-facing rooms: config, the CLI, the app, the archive, the reports, the strategy table, the
tracker names, env references (the registry and every env's constructor, which reads the reference's
settings) and harness loading and registration. Pydantic validators are exempt: pydantic wraps what
they raise in a ``ValidationError``, which the loaders report as ``ConfigError`` or ``HarnessError``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from typer.testing import CliRunner

from coevo.cli.app import app
from coevo.errors import CoevoError, InputError

ROOT = Path(__file__).resolve().parents[2]

USER_FACING = ("config", "cli", "app", "storage", "report", "strategies.py", "observe/tracking.py",
               "envs/registry.py", "harnesses/spec.py", "harnesses/registry.py", "harnesses/agent.py")
"""Rooms whose every raise of a bare ``ValueError`` is a user's mistake left unnamed."""

ENV_MODULES = "envs"
"""Env suites and adapters: their constructors read an env reference's settings (``coevo.envs.registry``)."""

ALLOWED = {
    ("storage/tables.py", "UTCTimestamp.process_bind_param"):
        "a naive datetime handed to a timestamp column by coevo's own code: a programming error",
}
"""(module, function) -> why its bare ``ValueError`` is not a user's mistake."""


def bare_value_errors(source: str, constructors_only: bool = False) -> list[tuple[int, str]]:
    """``(line, qualified function)`` of every ``raise ValueError`` in ``source`` outside a pydantic
    validator (a decorator named ``*validator``); only inside a class's ``__init__`` when
    ``constructors_only``."""
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST, scope: tuple[str, ...], exempt: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                validator = any("validator" in ast.unparse(d) for d in getattr(child, "decorator_list", []))
                visit(child, (*scope, child.name), exempt or validator)
                continue
            if isinstance(child, ast.Raise) and not exempt:
                exc = child.exc.func if isinstance(child.exc, ast.Call) else child.exc
                if isinstance(exc, ast.Name) and exc.id == "ValueError":
                    if not constructors_only or (len(scope) >= 2 and scope[-1] == "__init__"):
                        found.append((child.lineno, ".".join(scope)))
            visit(child, scope, exempt)

    visit(ast.parse(source), (), False)
    return found


def modules(entry: str) -> list[Path]:
    path = ROOT / entry
    return sorted(path.rglob("*.py")) if path.is_dir() else [path]


def test_no_user_facing_room_raises_a_bare_value_error():
    offenders = []
    for entry in USER_FACING:
        for path in modules(entry):
            rel = path.relative_to(ROOT).as_posix()
            offenders += [f"{rel}:{line} ({where})" for line, where in bare_value_errors(path.read_text())
                          if (rel, where) not in ALLOWED]
    for path in modules(ENV_MODULES):
        rel = path.relative_to(ROOT).as_posix()
        offenders += [f"{rel}:{line} ({where})" for line, where in bare_value_errors(path.read_text(), True)]
    assert not offenders, ("raise the room's CoevoError (ConfigError, RunError, EnvRefError, InputError, ...) "
                           "for a user's mistake:\n" + "\n".join(offenders))


def test_every_user_facing_entry_and_allowed_place_exists():
    assert all((ROOT / entry).exists() for entry in (*USER_FACING, ENV_MODULES))
    for rel, where in ALLOWED:  # an allowance outliving its raise would hide a new one there
        assert any(w == where for _, w in bare_value_errors((ROOT / rel).read_text())), f"{rel}: {where} is gone"


SAMPLE = '''
class Env:
    def __init__(self, size):
        if size < 1:
            raise ValueError("size")

    def step(self, action):
        raise ValueError("an action the model wrote")


class Config:
    @field_validator("k")
    def _k(cls, k):
        raise ValueError("pydantic wraps it")


def parse(ref):
    raise ValueError(f"bad {ref}")
'''


def test_the_check_finds_a_bare_raise_and_exempts_validators():
    assert bare_value_errors(SAMPLE) == [(5, "Env.__init__"), (8, "Env.step"), (18, "parse")]
    assert bare_value_errors(SAMPLE, constructors_only=True) == [(5, "Env.__init__")]


@pytest.mark.parametrize("argv, says", [
    (["run", "--set", "rounds"], "--set 'rounds': write KEY=VALUE"),
    (["run", "--strategy", "vac"], "unknown strategy 'vac' (did you mean vace?)"),
    (["envs", "show", "showcase:size=1"], "showcase size=1"),
])
def test_the_cli_prints_a_user_error_as_one_paragraph(argv, says, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert says in " ".join(result.output.split()), result.output


def test_a_user_error_is_still_a_value_error():
    assert issubclass(InputError, CoevoError) and issubclass(InputError, ValueError)
