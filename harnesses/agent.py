"""A user's LangGraph agent as the harness: ``harness = "package.module:make_agent"``
(docs/how-to/own-agent.md).

The factory is ``make_agent(params, model)`` (optionally ``make_agent(params, model, tools)``)
returning a LangGraph graph (anything with ``ainvoke`` taking ``{"messages": [...]}``). ``params``
is the evolvable part the user declares by annotating the first argument with a pydantic model
whose fields are a subset of ``HarnessSpec``'s components (``prompt``, ``skills``, ``context``,
``memory``, ``hooks``, ``tool_view``, ``parser``, ``budget``, ``decoding``; coevo ships one,
``AgentParams``: prompt, skills, tool view, decoding), or with ``HarnessSpec`` itself. The model may
add its own validators (constraints the app needs).

coevo then evolves a ``HarnessSpec`` whose ``agent`` field names the factory: the editors' patches,
the checks and the gate are the usual ones, limited to the declared fields (``editable``; a patch
outside them, or whose params fail the model's validation, is a rejected candidate with the reason:
``coevo.harnesses.patch.apply_patch``). A rollout (``coevo.harnesses.agent_run``) calls the factory with the spec's
params and coevo's recording model wrapper, and runs the user's graph unchanged.
"""

from __future__ import annotations

import importlib
import inspect
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Sequence, get_type_hints

from pydantic import BaseModel, Field, ValidationError

from coevo.harnesses.errors import HarnessError, Problem
from coevo.harnesses.spec import AGENT_REF, Decoding, HarnessSpec, Prompt, Skill, ToolView, load_harness

__all__ = ["PARAM_FIELDS", "Agent", "AgentError", "AgentParams", "agent_harness", "editable",
           "is_agent_ref", "load_agent", "load_params", "narrow", "start_harness"]

PARAM_FIELDS: tuple[str, ...] = ("prompt", "skills", "context", "memory", "hooks", "tool_view", "parser", "budget",
                                 "decoding")
"""The ``HarnessSpec`` components a params model may declare (the rest — name, parents, ``agent`` — are not params)."""


class AgentError(HarnessError):
    """A user agent factory that cannot serve as a harness (not importable, wrong signature, params
    that do not validate); each problem names the input and the fix."""

    def __init__(self, ref: str, message: str, path: str = "/agent") -> None:
        super().__init__([Problem(path, message)], f"agent {ref!r}")


class AgentParams(BaseModel):
    """The evolvable part of a typical agent: its prompt texts (``prompt.system``, the slots and
    named rules), few-shot ``skills``, its tools' descriptions (``tool_view.descriptions``, keyed by
    tool name) and ``decoding``. Annotate a factory's ``params`` with it, or with a subclass or
    another model whose fields are a subset of ``PARAM_FIELDS``."""

    prompt: Prompt = Field(default_factory=Prompt)
    skills: dict[str, Skill] = Field(default_factory=dict)
    tool_view: ToolView = Field(default_factory=ToolView)
    decoding: Decoding = Field(default_factory=Decoding)


@dataclass(frozen=True)
class Agent:
    """A loaded factory: ``ref`` (``module:attr``), the ``factory``, its ``params_model`` and whether
    it takes the episode's ``tools`` as a third argument."""

    ref: str
    factory: Callable[..., Any]
    params_model: type[BaseModel]
    takes_tools: bool

    @property
    def fields(self) -> tuple[str, ...]:
        """The spec components the params declare (what an edit may change)."""
        if self.params_model is HarnessSpec:
            return PARAM_FIELDS
        return tuple(self.params_model.model_fields)

    def params(self, spec: HarnessSpec) -> Any:
        """The factory's ``params`` for ``spec``: its declared fields validated by the params model
        (``HarnessSpec``: the spec itself). Raises ``AgentError`` naming each field that fails."""
        if self.params_model is HarnessSpec:
            return spec
        data = spec.model_dump(mode="json", include=set(self.fields))
        try:
            return self.params_model.model_validate(data)
        except ValidationError as err:
            where = "; ".join(f"/{'/'.join(map(str, e['loc']))}: {e['msg']}" for e in err.errors())
            raise AgentError(self.ref, f"params do not validate as {self.params_model.__name__}: {where}; the "
                                       "harness's values must satisfy the params model's own rules",
                             "/" + "/".join(map(str, err.errors()[0]["loc"]))) from None

    def build(self, params: Any, model: Any, tools: Sequence[Any] = ()) -> Any:
        """The user's graph: ``factory(params, model[, tools])``. Raises ``AgentError`` when the
        factory raises or returns something without ``ainvoke``."""
        try:
            graph = self.factory(params, model, list(tools)) if self.takes_tools else self.factory(params, model)
        except Exception as err:
            raise AgentError(self.ref, f"the factory raised {type(err).__name__}: {err}") from err
        if not callable(getattr(graph, "ainvoke", None)):
            raise AgentError(self.ref, f"the factory returned a {type(graph).__name__}, not a LangGraph graph; "
                                       "return builder.compile() (anything with ainvoke)")
        return graph


def is_agent_ref(source: str) -> bool:
    """Whether ``source`` (a run config's ``harness``) names an agent factory (``module:attr``) rather
    than a spec file, JSON text or shipped base harness."""
    return bool(source) and re.fullmatch(AGENT_REF, source) is not None and not Path(source).exists()


def _params_model(ref: str, factory: Callable[..., Any], first: str) -> type[BaseModel]:
    try:
        hint = get_type_hints(factory).get(first)
    except Exception as err:  # an annotation naming something the module does not define
        raise AgentError(ref, f"the annotation of {first!r} does not resolve ({err})") from None
    if not (isinstance(hint, type) and issubclass(hint, BaseModel)):
        raise AgentError(ref, f"annotate the first argument ({first!r}) with the params model: coevo.AgentParams, "
                              "a pydantic model whose fields are a subset of " + ", ".join(PARAM_FIELDS)
                              + ", or HarnessSpec")
    if hint is not HarnessSpec and (extra := [f for f in hint.model_fields if f not in PARAM_FIELDS]):
        raise AgentError(ref, f"params model {hint.__name__} declares {extra}, which are no harness components; "
                              f"name its fields after them ({', '.join(PARAM_FIELDS)}) so coevo's edits reach them")
    return hint


@lru_cache(maxsize=32)
def load_agent(ref: str) -> Agent:
    """Import and check the factory ``ref`` names (``package.module:make_agent``).

    Raises ``AgentError`` for a ref of the wrong shape, a module that does not import, a missing or
    non-callable attribute, a signature that is not ``(params, model)`` or ``(params, model, tools)``,
    or a params annotation that is not a params model (``_params_model``).
    """
    if re.fullmatch(AGENT_REF, ref or "") is None:
        raise AgentError(ref, "write the factory as package.module:make_agent")
    module, _, attr = ref.partition(":")
    try:
        factory = getattr(importlib.import_module(module), attr)
    except ImportError as err:
        raise AgentError(ref, f"module {module!r} does not import ({err}); install the package or put it on "
                              "PYTHONPATH") from None
    except AttributeError:
        raise AgentError(ref, f"module {module!r} has no {attr!r}") from None
    if not callable(factory):
        raise AgentError(ref, f"{attr!r} is a {type(factory).__name__}, not a function")
    params = [p for p in inspect.signature(factory).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in params if p.default is p.empty]
    if len(params) < 2 or len(required) > 3 or (len(required) == 3 and params[2].name != "tools"):
        raise AgentError(ref, f"the factory takes ({', '.join(p.name for p in params)}); write "
                              "make_agent(params, model) or make_agent(params, model, tools)")
    takes_tools = len(params) >= 3 and params[2].name == "tools"
    return Agent(ref, factory, _params_model(ref, factory, params[0].name), takes_tools)


def agent_harness(ref: str, base: HarnessSpec) -> HarnessSpec:
    """H0 for the agent ``ref``: ``base`` (the env's base harness: budgets, answer pattern) with each
    declared field set to the params model's default where it has one, ``agent = ref`` and the name
    ``agent:<attr>``. Raises ``AgentError`` as ``load_agent``, or when the result's params fail."""
    agent = load_agent(ref)
    doc = base.model_dump(mode="json", exclude={"parents"})
    if agent.params_model is not HarnessSpec:
        for name, field in agent.params_model.model_fields.items():
            if not field.is_required():
                value = field.get_default(call_default_factory=True)
                doc[name] = value.model_dump(mode="json") if isinstance(value, BaseModel) else _json(value)
    doc.update(agent=ref, name=f"agent:{ref.partition(':')[2]}")
    spec = load_harness(doc)
    agent.params(spec)
    return spec


def _json(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json(v) for v in value]
    return value.model_dump(mode="json") if isinstance(value, BaseModel) else value


def start_harness(source: str, env_name: str) -> HarnessSpec:
    """A run's H0 from its config's ``harness``: an agent factory (``is_agent_ref``) around the env's
    base harness, else ``load_harness(source or env_name)``. Raises ``HarnessError`` (``AgentError``)."""
    if is_agent_ref(source):
        return agent_harness(source, load_harness(env_name))
    return load_harness(source or env_name)


def editable(spec: HarnessSpec) -> tuple[str, ...] | None:
    """JSON Pointer prefixes an edit of ``spec`` may change: the agent's declared fields; None (any)
    for a spec without an agent."""
    if spec.agent is None:
        return None
    return tuple(f"/{f}" for f in load_agent(spec.agent).fields)


def narrow(allowed: Sequence[str] | None, spec: HarnessSpec) -> Sequence[str] | None:
    """``allowed`` (a phase's JSON Pointer prefixes; None: any) narrowed to what ``spec``'s agent
    declares: the prefixes under one of its fields, or its fields when ``allowed`` is None."""
    fields = editable(spec)
    if fields is None:
        return allowed
    if allowed is None:
        return fields
    under = [a for a in allowed if any(a == f or a.startswith(f + "/") for f in fields)]
    above = [f for f in fields if any(f.startswith(a.rstrip("/") + "/") for a in allowed)]
    return tuple(under + above)


def load_params(source: str | Path | dict[str, Any] | HarnessSpec, model: type[BaseModel] = AgentParams) -> Any:
    """An evolved harness's params for the app: ``source`` (an exported spec file, e.g. from
    ``coevo archive export ID -o evolved.json``, a dict or a ``HarnessSpec``) read as ``model``
    (its declared fields). Raises ``HarnessError`` for a bad spec, pydantic ``ValidationError``
    when the params do not fit ``model``."""
    spec = load_harness(str(source) if isinstance(source, Path) else source)
    if model is HarnessSpec:
        return spec
    return model.model_validate(spec.model_dump(mode="json", include=set(model.model_fields)))
