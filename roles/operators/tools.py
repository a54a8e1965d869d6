"""Tool-view operators (``/tool_view``) for tool errors (cause ``tool:<name>``): describe the failing
tool better, rename it, hide it (expose the others), or show tool outputs as pretty-printed JSON; and
for wrong values, expose a tool the env offers that the view hides (``tool_expose``)."""

from __future__ import annotations

import random

from coevo.roles.operators.base import Edit, Material, operator


def failing_tools(m: Material) -> list[str]:
    """The names of the tools the direction's causes say failed (``tool:<name>``; not ``unknown``)."""
    return sorted({k.split(":", 1)[1] for k in m.kinds if k.startswith("tool:") and k.split(":", 1)[1] != "unknown"})


def _env_name(m: Material, shown: str) -> str:
    """The env's name of a tool the model saw as ``shown`` (undoing a rename)."""
    return next((env for env, new in m.spec.tool_view.renames.items() if new == shown), shown)


@operator("tool_describe", "tool_view", ("tool:",), ("/tool_view/descriptions",))
def tool_describe(m: Material, rng: random.Random) -> Edit | None:
    """A description of the failing tool that says how to call it and when not to."""
    tools = failing_tools(m)
    if not tools:
        return None
    name = _env_name(m, rng.choice(tools))
    text = rng.choice([f"{name}: call it only with the arguments of its schema, all of them, by name.",
                       f"{name}: use it only when the task needs it; otherwise answer directly."])
    return Edit([{"op": "add", "path": f"/tool_view/descriptions/{name}", "value": text}], f"describe {name}")


@operator("tool_rename", "tool_view", ("tool:",), ("/tool_view/renames",), weight=0.4)
def tool_rename(m: Material, rng: random.Random) -> Edit | None:
    """Show the failing tool under a more explicit name (``<name>_tool``)."""
    tools = [t for t in failing_tools(m) if _env_name(m, t) not in m.spec.tool_view.renames]
    if not tools:
        return None
    name = rng.choice(tools)
    return Edit([{"op": "add", "path": f"/tool_view/renames/{name}", "value": f"{name}_tool"}],
                f"show {name} as {name}_tool")


@operator("tool_hide", "tool_view", ("tool:",), ("/tool_view/exposed",), weight=0.6)
def tool_hide(m: Material, rng: random.Random) -> Edit | None:
    """Hide the failing tools: expose only the others the view already lists, or none."""
    tools = {_env_name(m, t) for t in failing_tools(m)}
    if not tools:
        return None
    exposed = [t for t in (m.spec.tool_view.exposed or []) if t not in tools]
    return Edit([{"op": "replace", "path": "/tool_view/exposed", "value": exposed}], f"hide {sorted(tools)}")


@operator("tool_output_json", "tool_view", ("tool:",), ("/tool_view/output_format",), weight=0.4)
def tool_output_json(m: Material, rng: random.Random) -> Edit | None:
    """Show tool outputs pretty-printed as JSON when they parse."""
    if m.spec.tool_view.output_format == "json":
        return None
    return Edit([{"op": "replace", "path": "/tool_view/output_format", "value": "json"}], "tool outputs as JSON")


def hidden_tools(m: Material) -> list[str]:
    """The env's tools (``Material.env_tools``) that the spec's view does not expose, by name."""
    exposed = m.spec.tool_view.exposed
    return [] if exposed is None else [t for t in m.env_tools if t not in exposed]


@operator("tool_expose", "tool_view", ("value:", "wrong_answer"), ("/tool_view/exposed", "/tool_view/descriptions"),
          needs=lambda spec: spec.tool_view.exposed is not None)
def tool_expose(m: Material, rng: random.Random) -> Edit | None:
    """Expose a tool the env offers and the view hides (a calculator for wrong arithmetic), with a
    description that says when to use it: the model can then compute what it got wrong. Carries no
    task content (the tool's name only)."""
    hidden = hidden_tools(m)
    if not hidden:
        return None
    name = rng.choice(hidden)
    text = rng.choice([f"{name}: call it first with the task's expression, then answer with its result.",
                       f"{name}: use it to compute the answer instead of guessing; copy its result as the answer."])
    return Edit([{"op": "replace", "path": "/tool_view/exposed", "value": [*(m.spec.tool_view.exposed or []), name]},
                 {"op": "add", "path": f"/tool_view/descriptions/{name}", "value": text}],
                f"expose the env's {name} tool")
