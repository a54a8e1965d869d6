"""``coevo --help`` and every command's help read at 80 columns: no line wider, no word cropped with an
ellipsis, no sentence broken mid-line by the docstring's own line breaks, and one example each."""

from __future__ import annotations

import re

import pytest
import typer
from typer.testing import CliRunner

from coevo.cli.app import app


def command_paths() -> list[list[str]]:
    root = typer.main.get_command(app)
    ctx = root.make_context("coevo", ["--help"], resilient_parsing=True)
    paths = [[]]
    for name in root.list_commands(ctx):
        sub = root.get_command(ctx, name)
        paths.append([name])
        if hasattr(sub, "list_commands"):
            sub_ctx = type(ctx)(sub, info_name=name, parent=ctx)
            paths += [[name, leaf] for leaf in sub.list_commands(sub_ctx)]
    return paths


PATHS = command_paths()


def help_text(path: list[str]) -> str:
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "80"}, terminal_width=80)
    assert result.exit_code == 0, result.output
    return result.output


def test_the_command_tree_is_walked():
    assert ["eval"] in PATHS and ["archive", "gc"] in PATHS and len(PATHS) > 15


@pytest.mark.parametrize("path", PATHS, ids=lambda p: " ".join(p) or "coevo")
def test_help_fits_80_columns_without_cropped_words(path):
    lines = help_text(path).splitlines()
    wide = [line for line in lines if len(line) > 80]
    cropped = [line for line in lines if "…" in line]
    assert not wide and not cropped, "\n".join(wide + cropped)


def command(path: list[str]):
    cmd = typer.main.get_command(app)
    ctx = cmd.make_context("coevo", ["--help"], resilient_parsing=True)
    for name in path:
        cmd = cmd.get_command(ctx, name)
        ctx = type(ctx)(cmd, info_name=name, parent=ctx)
    return cmd


@pytest.mark.parametrize("path", PATHS, ids=lambda p: " ".join(p) or "coevo")
def test_help_gives_one_example_on_one_line(path):
    source = command(path).help or ""
    examples = re.findall(r"Example:\s*`([^`]+)`", source)
    assert len(examples) == 1, f"one `Example: ...` in the help of coevo {' '.join(path)}, found {examples}"
    assert examples[0].startswith(f"coevo {' '.join(path)}".strip())
    assert any(examples[0] in line for line in help_text(path).splitlines()), "the example is wrapped"


@pytest.mark.parametrize("path", [p for p in PATHS if len(p) == 1], ids=lambda p: p[0])
def test_a_commands_summary_in_the_listing_is_one_sentence(path):
    summary = (command(path).help or "").strip().split("\n\n")[0]
    assert len(" ".join(summary.split())) <= 100, summary
