"""mkdocs hooks (``hooks:`` in mkdocs.yml), run by every ``mkdocs build``.

The CLI reference (``docs/reference/cli.md``) is generated here from the typer app itself: each command's
usage, help text, arguments and options come from ``coevo.cli.app.app`` at build time, so the page cannot
drift from ``coevo --help``. The page holds the marker ``<!-- coevo-cli -->`` where the reference goes.

A module's docstring goes where a page holds ``<!-- docstring: coevo.graphs.vace.vace -->`` (the paper
pages show each strategy's algorithm this way): read from the source without importing it, its prose as
markdown and each reStructuredText literal block (a paragraph ending in ``::`` and the indented lines under
it) as a code block, indentation kept.

The API reference's loader (griffe) finds a package by its folder's name, and the repository root *is* the
package ``coevo`` under whatever name it was cloned as. ``on_config`` therefore lays out a temporary folder
holding ``coevo/``, whose entries link to the package's own modules and subpackages (not ``tests/``, ``docs/``
or ``.venv/``), and puts it first on ``sys.path``. It also drops the console scripts' folder from ``sys.path``:
run as ``.venv/bin/mkdocs``, Python lists that folder, and its ``coevo`` script would pass for the package.
"""

from __future__ import annotations

import ast
import atexit
import inspect
import os
import re
import shutil
import sys
import tempfile
from typing import Any

from mkdocs.plugins import event_priority

MARKER = "<!-- coevo-cli -->"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOT_PACKAGE = {"tests", "benchmarks", "scripts", "docs", "site"}



def _cell(text: str) -> str:
    """Text for one cell of a markdown table: one line, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _default(param: Any) -> str:
    if param.required or param.default is None or getattr(param, "is_flag", False) and param.default is False:
        return ""
    default = param.default() if callable(param.default) else param.default
    if isinstance(default, (list, tuple)):
        return ", ".join(map(str, default)) if default else ""
    return f"`{default}`" if default != "" else ""


def _type_name(param: Any, ctx: Any) -> str:
    """The type a user types, as the help shows it (typer's own parameters, or plain click's)."""
    shown = getattr(param, "display_type", None)
    if shown is not None:
        return str(shown(ctx) if callable(shown) else shown).strip("<>")
    return param.type.name


def _param_rows(command: Any, ctx: Any) -> list[str]:
    rows = []
    for param in command.get_params(ctx):
        if param.name == "help" or getattr(param, "hidden", False):
            continue
        if param.param_type_name == "argument":
            name = f"`{param.name.upper()}`"
            kind = "argument"
        else:
            names = [*param.opts, *param.secondary_opts]
            name = " / ".join(f"`{n}`" for n in names)
            kind = "flag" if getattr(param, "is_flag", False) else _type_name(param, ctx)
        help_text = getattr(param, "help", None) or ""
        required = " (required)" if param.required else ""
        rows.append(f"| {name} | {_cell(kind)}{required} | {_cell(_default(param))} | {_cell(help_text)} |")
    return rows


def _help(command: Any) -> str:
    text = inspect.cleandoc(command.help or "")
    return text.replace("\b\n", "").replace("\b", "")


def _root_context(command: Any) -> Any:
    """A context of the click that ``command`` was built with (typer vendors its own)."""
    return command.make_context("coevo", ["--help"], resilient_parsing=True)


def render(command: Any, path: list[str], parent: Any = None, level: int = 2) -> str:
    """Markdown for ``command`` and, for a group, each of its subcommands in the order they were added."""
    ctx = type(parent or _root_context(command))(command, info_name=path[-1], parent=parent)
    parts = [f"{'#' * level} `{' '.join(path)}`", ""]
    if command.help:
        parts += [_help(command), ""]
    usage = " ".join(command.collect_usage_pieces(ctx))
    parts += ["```", f"{' '.join(path)} {usage}".rstrip(), "```", ""]
    rows = _param_rows(command, ctx)
    if rows:
        parts += ["| name | type | default | help |", "|---|---|---|---|", *rows, ""]
    if hasattr(command, "list_commands"):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                parts.append(render(sub, [*path, name], ctx, level + 1 if level < 3 else 3))
    return "\n".join(parts)


def cli_reference() -> str:
    """The whole ``coevo`` command tree as markdown."""
    os.environ.setdefault("COLUMNS", "100")
    import typer

    from coevo.cli.app import app

    return render(typer.main.get_command(app), ["coevo"])


@event_priority(100)  # before mkdocstrings' own on_config, which sets its search paths
def on_config(config):  # noqa: ANN001, ANN201  (mkdocs hook signature)
    """Let the API reference's loader find the package as ``coevo`` (see the module's docstring)."""
    scripts = os.path.dirname(os.path.abspath(sys.argv[0]))
    if os.path.isfile(os.path.join(scripts, "coevo")):
        sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != scripts]
    shadow = tempfile.mkdtemp(prefix="coevo-docs-")
    atexit.register(shutil.rmtree, shadow, ignore_errors=True)
    package = os.path.join(shadow, "coevo")
    os.mkdir(package)
    for name in os.listdir(ROOT):
        path = os.path.join(ROOT, name)
        is_module = name.endswith(".py") and os.path.isfile(path)
        is_package = os.path.isfile(os.path.join(path, "__init__.py")) and name not in NOT_PACKAGE
        if is_module or is_package:
            os.symlink(path, os.path.join(package, name))
    sys.path.insert(0, shadow)
    return config


DOCSTRING = re.compile(r"<!-- docstring: (coevo(?:\.\w+)*) -->")


def module_docstring(name: str) -> str:
    """The docstring of module ``name`` (``coevo.x.y``) as markdown, read from its source file."""
    parts = name.split(".")[1:]
    path = os.path.join(ROOT, *parts) + ".py"
    if not os.path.isfile(path):
        path = os.path.join(ROOT, *parts, "__init__.py")
    with open(path, encoding="utf-8") as f:
        doc = ast.get_docstring(ast.parse(f.read()), clean=False)
    if not doc:
        raise ValueError(f"{name} has no docstring ({path})")
    out: list[str] = []
    lines = doc.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.rstrip().endswith("::"):
            out.append(line.rstrip()[:-1])
            i += 1
            block: list[str] = []
            while i < len(lines) and (not lines[i].strip() or lines[i].startswith(" ")):
                block.append(lines[i])
                i += 1
            while block and not block[-1].strip():
                block.pop()
            out += ["", "```text", *inspect.cleandoc("\n".join(block)).split("\n"), "```", ""]
            continue
        out.append(line.strip())
        i += 1
    return "\n".join(out)


def on_page_markdown(markdown: str, page, config, files) -> str:  # noqa: ANN001  (mkdocs hook signature)
    """Put the generated CLI reference and the modules' docstrings where their pages hold the markers."""
    if MARKER in markdown:
        markdown = markdown.replace(MARKER, cli_reference())
    return DOCSTRING.sub(lambda m: module_docstring(m.group(1)), markdown)
