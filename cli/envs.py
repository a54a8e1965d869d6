"""``coevo envs list|show``: the registered task suites and a look at their tasks."""

from __future__ import annotations

import typer
from rich.table import Table

from coevo.cli.common import console, user_errors
from coevo.envs.registry import EnvRefError, available, get_env
from coevo.errors import MissingExtraError

app = typer.Typer(help="List task suites and show their tasks.\n\nExample: `coevo envs show showcase --n 3`",
                  no_args_is_help=True, rich_markup_mode="markdown")


@app.command("list")
def list_() -> None:
    """List the registered suites (built-ins and entry points) and where they come from.

    Example:

    `coevo envs list`"""
    table = Table(title="coevo envs")
    table.add_column("name", style="bold")
    table.add_column("target")
    for name, target in sorted(available().items()):
        table.add_row(name, target)
    console.print(table)


@app.command()
def show(ref: str = typer.Argument(..., help="Suite name or name:key=value,... (e.g. reasoning_gym:size=60)."),
         split: str = typer.Option("train", help="train, val or test."),
         n: int = typer.Option(3, help="How many tasks to show."),
         reveal: bool = typer.Option(False, "--reveal", help="Also show the gold answers (for people only)."),
         baseline: bool = typer.Option(False, "--baseline",
                                       help="Also print the trivial-policy baseline of the split."),
         width: int = typer.Option(400, help="Characters of each prompt to show.")) -> None:
    """Print the first N tasks of a split; the gold answer stays hidden unless --reveal.

    Example:

    `coevo envs show showcase --split train --n 3`"""
    with user_errors():
        try:
            env = get_env(ref)
            tasks = env.tasks(split, n)  # type: ignore[arg-type]
        except MissingExtraError as err:
            raise EnvRefError(str(err)) from None
    config = getattr(env, "config", {})
    table = Table(title=f"{env.name} {split} ({len(tasks)} shown)  config={config}", show_lines=True)
    table.add_column("id", style="bold", no_wrap=True)
    table.add_column("metadata")
    table.add_column("prompt")
    if reveal:
        table.add_column("answer", style="green")
    for task in tasks:
        prompt = task.prompt if len(task.prompt) <= width else task.prompt[:width] + " …"
        meta = ", ".join(f"{k}={v}" for k, v in task.metadata.items())
        row = [task.id, meta, prompt]
        if reveal:
            row.append(env.reveal(task) if hasattr(env, "reveal") else "(not available)")
        table.add_row(*row)
    console.print(table)
    if baseline and hasattr(env, "trivial_baseline"):
        b = env.trivial_baseline(split)  # type: ignore[arg-type]
        answer, value = b["best_constant"]
        shown = answer if (reveal or split == "train") else "(hidden)"
        console.print(f"trivial baseline on {b['n']} {split} tasks: empty={b['empty']:.3f}  "
                      f"best constant={value:.3f} ({shown!r})")
