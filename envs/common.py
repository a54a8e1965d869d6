"""Small helpers every suite shares: stable task ids (naming their env config), content splits, cache
dirs, optional imports.

Splits are made from ONE ordered, content-deduplicated item list per suite config, cut by index
ranges (reasoning-gym builds item ``i`` from ``Random(seed + i)``, so datasets built with
neighbouring seeds share items; splitting one list by ranges after dedupe makes the splits disjoint
by content, not just by seed).
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import re
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterable, Mapping, TypeVar

from coevo.envs.base import SPLITS, Split, Task
from coevo.errors import CoevoError, MissingExtraError

__all__ = ["MissingExtraError"]  # re-exported: suites raise it through ``require``

T = TypeVar("T")


class EnvRefError(CoevoError, ValueError):
    """An env reference whose settings the suite cannot be built with (a key it does not take, a value of
    a type or size it cannot use, a target that cannot be loaded); the message names the reference, the
    setting and the fix. Raised by ``coevo.envs.registry`` and by every env's constructor."""


def require(module: str, extra: str, package: str, then: str | None = None) -> ModuleType:
    """Import ``module`` or raise ``MissingExtraError`` naming ``pip install 'coevo[extra]'``.

    ``package`` is the PyPI distribution name shown in the message (e.g. ``bfcl-eval``); ``then``, a
    second install command the message adds (a package the extra cannot list itself).
    """
    try:
        return importlib.import_module(module)
    except ImportError as err:
        install = f"pip install 'coevo[{extra}]'" + (f" && {then}" if then else "")
        raise MissingExtraError(
            f"this suite needs the package {package!r}, which is not installed ({err}). "
            f"Install it with: {install}") from err


SCORING_ONLY = ("reward",)
"""Config keys that change how a reply is scored but not which tasks a config makes, their splits or their
golds: left out of ``config_digest``, so a ``reward=partial`` run and a ``reward=correct`` one share task ids."""


def _canonical(value: Any) -> Any:
    """``value`` as JSON-able data that is the same in every process: mappings with string keys,
    sets sorted, tuples as lists, anything else JSON cannot write as its ``repr``."""
    if isinstance(value, Mapping):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, (set, frozenset)):
        return sorted((_canonical(v) for v in value), key=repr)
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return repr(value)


def config_digest(config: Mapping[str, Any]) -> str:
    """8 hex digits naming a suite's config (its ``config`` dict, normalised by the suite; the keys in
    ``SCORING_ONLY`` left out): equal for equal configs in every process, different for any other value
    of a key that decides the tasks (size, seed, fractions, families, a Gymnasium env's ``make``
    arguments...)."""
    kept = {k: v for k, v in config.items() if k not in SCORING_ONLY}
    text = json.dumps(_canonical(kept), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def task_id(env: str, content: str, config: Mapping[str, Any]) -> str:
    """A stable task id naming the env config it came from:
    ``<env>-<config_digest(config)>-<first 16 hex of sha256(env NUL content)>``.

    The same content under the same config gives the same id in every run, whatever the seed or
    position; under another config (another size, seed or split fraction, where the same prompt may
    sit in another split) it is another task with another id, so no record of one config's task (its
    split in the archive, a demonstration sealed by id, a lesson, a cold-start example) is ever read as
    the other's."""
    digest = hashlib.sha256(f"{env}\0{content}".encode()).hexdigest()[:16]
    return f"{env}-{config_digest(config)}-{digest}"


def check_split(split: str) -> Split:
    """Return ``split`` if it is one of train/val/test; else raise ``ValueError`` naming the choices."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; choose one of {list(SPLITS)}")
    return split  # type: ignore[return-value]


def split_sizes(n: int, val_frac: float, test_frac: float) -> dict[Split, int]:
    """Sizes of train/val/test for ``n`` items: val and test get ``round(n*frac)`` (at least 1 each
    when ``n >= 3`` and the fraction is positive), train gets the rest.

    Raises ``ValueError`` when the fractions are outside [0, 1) or sum to 1 or more.
    """
    if not (0 <= val_frac < 1 and 0 <= test_frac < 1 and val_frac + test_frac < 1):
        raise ValueError(f"val_frac={val_frac} and test_frac={test_frac} must be in [0, 1) and sum below 1")
    n_val = round(n * val_frac)
    n_test = round(n * test_frac)
    if n >= 3:
        n_val = max(n_val, 1 if val_frac > 0 else 0)
        n_test = max(n_test, 1 if test_frac > 0 else 0)
    n_train = max(n - n_val - n_test, 0)
    return {"train": n_train, "val": n_val, "test": n_test}


def dedupe(items: Iterable[T], key: Callable[[T], str], seen: set[str] | None = None) -> list[T]:
    """Keep the first item of each ``key`` (content); ``seen`` may be shared across calls."""
    seen = set() if seen is None else seen
    out = []
    for item in items:
        k = key(item)
        if k not in seen:
            seen.add(k)
            out.append(item)
    return out


def cut_splits(items: list[T], val_frac: float, test_frac: float) -> dict[Split, list[T]]:
    """Cut an ordered, deduplicated list into train (first), val, test by index ranges."""
    sizes = split_sizes(len(items), val_frac, test_frac)
    a = sizes["train"]
    b = a + sizes["val"]
    return {"train": items[:a], "val": items[a:b], "test": items[b:b + sizes["test"]]}


def hash_split(key: str, seed: int, val_frac: float, test_frac: float) -> Split:
    """The split of an item by a seeded hash of its ``key`` (content): items with the same key land
    in the same split in every category and every run. Used where near-identical content recurs
    across categories (BFCL's multi-turn variants share scenarios), so index ranges per category
    would not keep the splits disjoint by content."""
    split_sizes(10, val_frac, test_frac)  # validates the fractions
    u = int(hashlib.sha256(f"{seed}\0{key}".encode()).hexdigest()[:15], 16) / 16**15
    if u < val_frac:
        return "val"
    if u < val_frac + test_frac:
        return "test"
    return "train"


def round_robin(groups: list[list[T]]) -> list[T]:
    """Interleave groups (one item of each in turn), so the first ``n`` tasks mix families."""
    out: list[T] = []
    for i in range(max((len(g) for g in groups), default=0)):
        out += [g[i] for g in groups if i < len(g)]
    return out


def cache_dir(*parts: str) -> Path:
    """A cache directory (created) under coevo's one cache root, shared by suites and models
    (``coevo.models.smollm2``): ``$COEVO_CACHE_DIR``, else ``$XDG_CACHE_HOME/coevo``
    (``~/.cache/coevo``), plus ``parts``."""
    if os.environ.get("COEVO_CACHE_DIR"):
        root = Path(os.environ["COEVO_CACHE_DIR"]).expanduser()
    else:
        root = Path(os.environ.get("XDG_CACHE_HOME") or "~/.cache").expanduser() / "coevo"
    path = root.joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


def as_list(value: Any) -> list[str]:
    """A config value as a list of strings: a list stays, ``"a+b"`` / ``"a,b"`` split, ``None`` -> []."""
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    text = str(value)
    for sep in ("+", ","):
        if sep in text:
            return [p.strip() for p in text.split(sep) if p.strip()]
    return [text] if text else []


def first_tasks(splits: Mapping[str, list[Task]], split: str, n: int | None = None) -> list[Task]:
    """Copies of the first ``n`` tasks of ``splits[split]`` (all when ``n`` is None): what a suite's
    ``tasks`` returns. Raises ``ValueError`` for an unknown split or a negative ``n``."""
    split = check_split(split)
    if n is not None and n < 0:
        raise ValueError(f"n={n} must be >= 0 or None")
    items = splits[split]
    return [t.model_copy(deep=True) for t in (items if n is None else items[:n])]


CHOICE = re.compile(r"^\s*(?:option\s+)?(\d{1,4})(?:\s*[.):])?(?=\s|$)", re.IGNORECASE)
"""A reply that picks a numbered option: the number at its very start (see ``leading_choice``)."""


def leading_choice(text: str) -> int | None:
    """The option number ``text`` starts with, or ``None``: ``3``, ``3.``, ``3)``, ``3:`` or ``option 3``
    (any case), then whitespace or the end, so "3. go north" and "2\nBecause ..." pick 3 and 2,
    while "3.5", "30kg", "go 3" and "I pick 3" pick nothing. Used by numbered-choice envs
    (``textworld:admissible=numbered``) and the harness parser's ``choice_action``."""
    m = CHOICE.match(str(text))
    return int(m.group(1)) if m else None
