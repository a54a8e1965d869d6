"""``coevo export RUN -o DIR``: a run's final pair as an agent folder (``coevo.app.export``), and
``coevo release rollback DIR``: a versioned folder's pointer moved back (``coevo.app.release``)."""

from __future__ import annotations

from pathlib import Path

import typer

from coevo.cli.common import DB_HELP, DEFAULT_DB, console, open_archive, shown, user_errors


def export_cmd(run_id: str = typer.Argument(..., help="The run id or a unique prefix (see `coevo archive list runs`)."),
               out: Path = typer.Option(..., "-o", "--out", help="The agent folder to write."),
               harness: str = typer.Option(None, "--harness", help="Export this harness (an id or unique prefix) "
                                           "instead of the run's final one."),
               checkpoint: str = typer.Option(None, "--checkpoint", help="Export this checkpoint (an id or unique "
                                              "prefix) instead of the run's final one."),
               version: bool = typer.Option(False, "--version", help="Write DIR/vN (the next N) and point "
                                            "DIR/current at it; `coevo release rollback DIR` moves the pointer back."),
               force: bool = typer.Option(False, "--force", help="Replace a folder coevo exported before."),
               db: str = typer.Option(DEFAULT_DB, "--db", envvar="COEVO_DB", help=DB_HELP)) -> None:
    """Write a run's final pair as a self-contained agent folder.

    The folder holds the harness spec (a user agent's params and factory; a Harness-S run's pool and
    router), the adapter's files (copied, checksummed), the base model's reference, an agent card
    (README.md) and langgraph.json. Load it with coevo.load_agent(DIR); serve it with `langgraph dev`
    in DIR. --harness/--checkpoint export another pair of the archive.

    Example:

    `coevo export RUN_ID -o agents/RUN_ID`"""
    from coevo.app.export import run_export

    with user_errors():
        open_archive(db).close()  # a missing file is an error here, never a new empty archive
        done = run_export(db, run_id, out, harness=harness, checkpoint=checkpoint, version=version, force=force)
    m = done.manifest
    what = {"agent": f"user agent {m.harness_id[:12]} ({done.folder / 'params.json'})",
            "routed": f"Harness-S pool and router, H0 {m.harness_id[:12]}"}.get(m.kind, f"harness {m.harness_id[:12]}")
    # paths as they are (a folder may be named a[1]): no markup in these lines
    console.print(f"exported run {m.run_id}: {what} x checkpoint {m.checkpoint_id} "
                  f"({'adapter copied' if m.adapter else 'base weights, no adapter'}) to {done.folder}"
                  + (f" (version {m.version}, now current)" if m.version else ""), markup=False, highlight=False)
    folder = done.folder.parent if m.version else done.folder
    console.print(f"load it: coevo.load_agent({str(folder)!r}); serve it: cd {folder} && langgraph dev; "
                  f"export {done.record.id[:12]} is stored in {shown(db)}", markup=False, highlight=False,
                  soft_wrap=True)

release = typer.Typer(help="Versioned agent folders (coevo export RUN -o DIR --version): move the pointer."
                           "\n\nExample: `coevo release rollback agents/RUN_ID`", no_args_is_help=True)


@release.command()
def rollback(folder: Path = typer.Argument(..., help="A versioned agent folder (with a `current` pointer)."),
             to: str = typer.Option(None, "--to", help="The version to point at, e.g. v2 (default: the newest one "
                                    "older than the current).")) -> None:
    """Point a versioned folder's `current` at an older version.

    coevo.load_agent(DIR) and `langgraph dev` in DIR (after a restart) then load it. Nothing is
    deleted; roll forward with --to.

    Example:

    `coevo release rollback agents/RUN_ID --to v1`"""
    from coevo.app.release import AgentFolderError
    from coevo.app.release import rollback as move

    with user_errors():
        number = None
        if to is not None:
            if not to.lstrip("v").isdigit():
                raise AgentFolderError(f"--to {to!r}: name a version as vN, e.g. --to v2")
            number = int(to.lstrip("v"))
        before, after = move(folder, number)
    was = "none" if before is None else f"v{before}"
    console.print(f"{folder}/current: {was} -> v{after}", markup=False, highlight=False)
