"""Finding suites by name: built-ins plus the entry-point group ``coevo.envs`` (docs/design.md, Task and Env).

A reference is ``name`` or ``name:key=value,key=value`` — e.g.
``reasoning_gym:families=word_sorting,size=60,seed=0`` or ``bfcl:categories=simple_python``.
Values become int/float/bool when they look like one; a list is written with ``+``
(``families=word_sorting+chain_sum``), or as bare items after a key
(``families=word_sorting,chain_sum,size=60``). A bare first item names an adapter's target and
becomes the keyword ``id``: ``gym:Taxi-v4,size=20`` is ``GymEnv(id="Taxi-v4", size=20)``. A
third-party suite registers a class (or factory) taking keyword arguments::

    [project.entry-points."coevo.envs"]
    my_suite = "my_pkg.envs:MySuite"
"""

from __future__ import annotations

import importlib
import inspect
from importlib.metadata import entry_points
from typing import Any, Callable

from coevo.envs.base import Env
from coevo.envs.common import EnvRefError

BUILTINS: dict[str, str] = {
    "reasoning_gym": "coevo.envs.rg_suite:ReasoningGymEnv",
    "bfcl": "coevo.envs.bfcl_suite:BfclEnv",
    "textworld": "coevo.envs.textworld_suite:TextWorldEnv",
    "gym": "coevo.envs.gym_adapter:GymEnv",
    "openenv": "coevo.envs.openenv_adapter:OpenEnvEnv",
    "verifiers": "coevo.envs.verifiers_adapter:VerifiersEnv",
    "showcase": "coevo.envs.showcase_suite:ShowcaseEnv",
}
GROUP = "coevo.envs"


def _coerce(text: str) -> Any:
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    if "+" in text:
        return [_coerce(p) for p in text.split("+") if p]
    return text


def parse_ref(ref: str) -> tuple[str, dict[str, Any]]:
    """Split ``name:key=value,...`` into ``(name, kwargs)``.

    Raises ``ValueError`` for an empty name or a second item with no key before it.
    """
    name, _, rest = ref.strip().partition(":")
    if not name:
        raise EnvRefError(f"env reference {ref!r} has no name; write e.g. 'reasoning_gym:size=60'")
    kwargs: dict[str, Any] = {}
    last: str | None = None
    for item in (p.strip() for p in rest.split(",")) if rest else ():
        if not item:
            continue
        if "=" in item:
            key, _, value = item.partition("=")
            last = key.strip()
            kwargs[last] = _coerce(value.strip())
        elif last is None and "id" not in kwargs:
            kwargs["id"] = item  # an adapter's target: gym:Taxi-v4, verifiers:NAME, openenv:NAME
        elif last is None:
            raise EnvRefError(f"env reference {ref!r}: {item!r} has no key; write key=value")
        else:
            prev = kwargs[last]
            kwargs[last] = (prev if isinstance(prev, list) else [prev]) + [_coerce(item)]
    return name, kwargs


def _load(target: str) -> Callable[..., Env]:
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


def available() -> dict[str, str]:
    """Registered suite names -> ``module:attr`` targets (built-ins, then entry points)."""
    found = dict(BUILTINS)
    for ep in entry_points(group=GROUP):
        found.setdefault(ep.name, ep.value)
    return found


def get_env(ref: str, **settings: Any) -> Env:
    """Build the suite named by ``ref`` (see module doc) with its keyword arguments plus
    ``settings`` (e.g. ``reward="partial"`` from a run config; ``None`` values are left out).

    Raises ``KeyError`` naming the known suites for an unknown name, ``MissingExtraError`` (an
    ``ImportError``) naming the extra to install when a suite's optional package is missing,
    ``EnvRefError`` (a ``ValueError``) for a key the suite does not take or a value it cannot be built
    with (a list or an infinite number where it wants a number), and ``ValueError`` from the suite for
    other bad arguments or for a setting the ref gives a different value.
    """
    name, kwargs = parse_ref(ref)
    known = available()
    if name not in known:
        raise KeyError(f"unknown env {name!r}; registered: {sorted(known)} (third parties register under "
                       f"the entry-point group {GROUP!r})")
    factory = _load(known[name])
    if "id" in kwargs and not _accepts(factory, "id"):
        raise EnvRefError(f"env reference {ref!r}: {kwargs['id']!r} has no key, and {name!r} takes no target; "
                          "write key=value")
    for key in kwargs:
        if not key or not _accepts(factory, key):
            what = f"takes no setting {key!r}" if key else "has an item '=...' with no key"
            raise EnvRefError(f"env reference {ref!r}: {name!r} {what}; its settings: {_settings(factory)} "
                              f"(coevo envs list shows the suites)")
    for key, value in settings.items():
        if value is None:
            continue
        if key in kwargs and kwargs[key] != value:
            raise EnvRefError(f"env reference {ref!r} sets {key}={kwargs[key]} but {key}={value} was also asked for; "
                              f"keep one of them")
        if not _accepts(factory, key):
            raise EnvRefError(f"env {name!r} takes no setting {key!r} (asked for {key}={value}); remove it, "
                              f"the suite decides that itself")
        kwargs[key] = value
    try:
        return factory(**kwargs)
    except (TypeError, ArithmeticError) as err:  # e.g. size=1+2 (a list) or size=inf where a number is wanted
        raise EnvRefError(f"env reference {ref!r} cannot be built: {err}; write each setting as {name!r} takes it "
                          f"(its settings: {_settings(factory)}), e.g. size=60 for a whole number") from None


def _settings(factory: Callable[..., Any]) -> str:
    """The keyword parameters ``factory`` takes, comma-separated (``any`` when it takes ``**kwargs`` or has
    no signature)."""
    try:
        params = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return "any"
    named = [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    return ", ".join(named) + (", ..." if any(p.kind is p.VAR_KEYWORD for p in params) else "") or "none"


def _accepts(factory: Callable[..., Any], key: str) -> bool:
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return True
    return key in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
