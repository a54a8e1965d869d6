"""``coevo harness show|validate|diff|graph``: read, check, compare and draw harness specs."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.syntax import Syntax

from coevo.cli.common import console, user_errors
from coevo.harnesses import check_tools, diff, harness_warnings, load_harness, render
from coevo.harnesses.fit import check_prompt_fits

app = typer.Typer(help="Read, check, compare and draw harness specs.\n\nExample: `coevo harness show showcase`",
                  no_args_is_help=True, rich_markup_mode="markdown")


@app.command()
def show(spec: str = typer.Argument(..., help="Spec file, JSON text, or a shipped base harness name."),
         task: str = typer.Option("<the task text>", help="Sample task text for the rendered prompt."),
         json_only: bool = typer.Option(False, "--json", help="Print only the spec JSON.")) -> None:
    """Print a spec (JSON) and the prompt a model sees for a sample task.

    Example:

    `coevo harness show showcase`"""
    with user_errors():
        s = load_harness(spec)
    console.print(f"[bold]{s.name}[/bold]  id={s.short_id}  parents={[p[:12] for p in s.parents]}")
    console.print(Syntax(s.model_dump_json(indent=2), "json"))
    if not json_only:
        console.rule("rendered prompt")
        console.print(render(s, task), markup=False, highlight=False)


@app.command()
def validate(spec: str = typer.Argument(..., help="Spec file to check."),
             tools: str = typer.Option("", help="Comma-separated env tool names the tool view may name.")) -> None:
    """Validate a spec file; exit code 1 when it is invalid.

    Errors name the JSON path of each problem (a rendered prompt that cannot fit the harness's
    context budget is one); warnings say what is valid but works against its use (a fixed
    decoding seed).

    Example:

    `coevo harness validate spec.json`"""
    with user_errors():
        s = load_harness(spec)
        if tools:
            check_tools(s, [t.strip() for t in tools.split(",") if t.strip()])
        fit = check_prompt_fits(s, source=spec)
    console.print(f"[green]valid[/green] {s.name} id={s.id}; prompt without the task: ~{fit.largest:,} of "
                  f"{fit.budget:,} context tokens", highlight=False)
    for warning in harness_warnings(s):
        console.print(f"[yellow]warning[/yellow] {warning}", markup=True, highlight=False)


@app.command("diff")
def diff_cmd(a: str = typer.Argument(..., help="First spec."),
             b: str = typer.Argument(..., help="Second spec.")) -> None:
    """Show what changed between two specs, component by component.

    Example:

    `coevo harness diff parent.json child.json`"""
    with user_errors():
        sa, sb = load_harness(a), load_harness(b)
    text = diff(sa, sb)
    console.print(Syntax(text, "diff") if text else "[green]same content[/green]")


@app.command()
def graph(spec: str = typer.Argument("demo", help="Spec to compile (default: the demo harness)."),
          out: Path = typer.Option(Path("harness_graph"), "-o", "--out",
                                   help="Output path stem: writes STEM.mmd and STEM.png.")) -> None:
    """Write the compiled harness graph as Mermaid (STEM.mmd) and PNG (STEM.png), offline.

    Example:

    `coevo harness graph showcase -o graph`"""
    from coevo.envs.base import Episode
    from coevo.graphs.demo import CALCULATOR, DEMO_TASK
    from coevo.graphs.draw import write_graph
    from coevo.harnesses.runtime import build_harness_graph
    from coevo.models.fake import ScriptedChatModel

    with user_errors():
        s = load_harness(spec)
    g = build_harness_graph(s, ScriptedChatModel(script=["Final answer: 0"]),
                            Episode(task=DEMO_TASK, tools=[CALCULATOR]))
    mmd, png = write_graph(g, out)
    console.print(f"wrote {mmd} and {png}")
