"""Fuzzed parsers (Hypothesis): a harness spec, a JSON Patch, a run config and an env reference are
either accepted and round-trip, or refused with coevo's one-paragraph error (a ``CoevoError``, or the
``ValueError``/``KeyError`` the CLI prints as one) — never another exception, never a traceback from the
CLI, never a file written for an input it refused. Bounded (``max_examples``) to stay a few seconds."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any
from unittest import mock

import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from coevo.cli.app import app
from coevo.cli.common import key_values
from coevo.config import ConfigError, RunConfig, load_config
from coevo.envs.registry import get_env, parse_ref
from coevo.errors import CoevoError
from coevo.harnesses import HarnessSpec, load_harness
from coevo.harnesses.agent import is_agent_ref, start_harness
from coevo.harnesses.errors import HarnessError
from coevo.harnesses.patch import apply_patch, make_patch
from coevo.harnesses.spec import validate_spec

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow],
                database=None, derandomize=True)  # the same examples on every run, so CI never flakes
USER_ERRORS = (CoevoError, ValueError, KeyError)
"""What ``coevo.cli.common.user_errors`` prints as one paragraph (exit 1, no traceback)."""

scalars = (st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=True)
           | st.text(max_size=12))
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=10)


def pointers(doc: Any, prefix: str = "") -> list[str]:
    """Every JSON Pointer into ``doc`` (its root first)."""
    out = [prefix]
    if isinstance(doc, dict):
        for key, value in doc.items():
            out += pointers(value, f"{prefix}/{str(key).replace('~', '~0').replace('/', '~1')}")
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            out += pointers(value, f"{prefix}/{i}")
    return out


BASE = load_harness("showcase")
BASE_DOC = BASE.model_dump(mode="json")
SPEC_POINTERS = pointers(BASE_DOC) + ["/prompt/rules/new", "/skills/new", "/hooks/new", "/decoding/stop",
                                      "/prompt/system/x", "/nope", "/skills/-"]


def set_at(doc: Any, pointer: str, value: Any, delete: bool) -> Any:
    """``doc`` with ``value`` set (or the member removed) at ``pointer``; the root replaced for ``""``."""
    if not pointer:
        return value
    *parents, leaf = [p.replace("~1", "/").replace("~0", "~") for p in pointer.split("/")[1:]]
    node = doc
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    if isinstance(node, list):
        if delete:
            node.pop(int(leaf))
        else:
            node[int(leaf)] = value
    elif delete:
        node.pop(leaf, None)
    else:
        node[leaf] = value
    return doc


@st.composite
def mutated_specs(draw: st.DrawFn) -> Any:
    """The showcase harness's JSON with a few members replaced by arbitrary JSON values or removed."""
    doc = json.loads(json.dumps(BASE_DOC))
    for _ in range(draw(st.integers(1, 3))):
        live = pointers(doc) if isinstance(doc, (dict, list)) else [""]
        doc = set_at(doc, draw(st.sampled_from(live)), draw(json_values), draw(st.booleans()))
    return doc


def round_trips(spec: HarnessSpec) -> None:
    again = load_harness(spec.model_dump_json())
    assert again.id == spec.id and again.model_dump(mode="json") == spec.model_dump(mode="json")


@FAST
@given(mutated_specs())
def test_a_spec_document_is_a_harness_that_round_trips_or_a_harness_error(doc):
    try:
        spec = validate_spec(doc)
    except HarnessError as err:
        assert err.problems and str(err)
        return
    round_trips(spec)


@FAST
@given(st.text(max_size=40) | json_values.map(json.dumps) | mutated_specs().map(json.dumps))
@example("")  # read the current folder as a file: IsADirectoryError
@example(".")
@example("a" * 5000)  # a name too long for a file
@example("x\0y")
def test_any_text_given_as_a_harness_loads_or_is_a_harness_error(text):
    try:
        spec = load_harness(text)
    except HarnessError as err:
        assert err.problems
        return
    round_trips(spec)


operations = st.fixed_dictionaries(
    {"op": st.sampled_from(["add", "remove", "replace", "move", "copy", "test"]) | st.text(max_size=6),
     "path": st.sampled_from(SPEC_POINTERS) | st.text(max_size=12) | scalars},
    optional={"value": json_values, "from": st.sampled_from(SPEC_POINTERS) | st.text(max_size=8)})
patches = st.lists(operations | json_values, max_size=4) | json_values


@FAST
@given(patches)
def test_a_json_patch_gives_a_child_that_round_trips_or_a_harness_error(patch):
    try:
        child = apply_patch(BASE, patch)
    except HarnessError as err:
        assert err.problems
        try:
            apply_patch(BASE, json.dumps(patch))  # its JSON text is refused as well
        except HarnessError:
            return
        raise AssertionError(f"the list was refused ({err}) but its JSON text was accepted")
    assert child.parents == [BASE.id]
    round_trips(child)
    assert apply_patch(BASE, make_patch(BASE, child)).id == child.id
    assert apply_patch(BASE, json.dumps(patch)).id == child.id


DEFAULTS = RunConfig().model_dump(mode="json")
CONFIG_KEYS = [p.lstrip("/").replace("/", ".") for p in pointers(DEFAULTS)[1:]] + [
    "nope", "train.nope", "train.steps.x", "env", "env.ref.x", ""]


@st.composite
def config_documents(draw: st.DrawFn) -> dict[str, Any]:
    """A run config mapping: some known dotted keys (and a few unknown) set to arbitrary values."""
    data: dict[str, Any] = {}
    for _ in range(draw(st.integers(0, 4))):
        key = draw(st.sampled_from(CONFIG_KEYS))
        value = draw(json_values | st.sampled_from([1, 2, 0.5, "vace", "showcase", "offline", True]))
        node = data
        *parents, leaf = key.split(".")
        for part in parents:
            child = node.get(part)
            node = node.setdefault(part, {}) if isinstance(child, dict) or child is None else {}
        node[leaf] = value
    return data


def load_text(text: str, suffix: str) -> RunConfig:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"c{suffix}"
        path.write_text(text)
        return load_config(path)


@FAST
@given(config_documents())
def test_a_config_mapping_loads_and_round_trips_or_is_a_config_error(data):
    try:
        cfg = load_text(yaml.safe_dump(data), ".yaml")
    except ConfigError as err:
        assert str(err)
        return
    again = load_text(yaml.safe_dump(cfg.model_dump(mode="json")), ".yaml")
    assert again.model_dump(mode="json") == cfg.model_dump(mode="json")


@FAST
@given(st.text(max_size=60), st.sampled_from([".toml", ".yaml", ".yml"]))
def test_any_config_text_loads_or_is_a_config_error(text, suffix):
    try:
        load_text(text, suffix)
    except ConfigError as err:
        assert str(err)


@FAST
@given(st.dictionaries(st.sampled_from(CONFIG_KEYS) | st.text(max_size=10),
                       json_values | st.sampled_from([1, "vace", 0.5]), max_size=3))
def test_any_set_override_loads_or_is_a_config_error(overrides):
    try:
        load_config(None, overrides)
    except ConfigError as err:
        assert str(err)


names = st.sampled_from(["showcase", "nope", "", "showcase "]) | st.text(max_size=8)
items = st.lists(st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=10)
                 | st.sampled_from(["size=inf", "size=1e999", "seed=-1", "items=3", "size=2", "reward=partial",
                                    "reward=nope", "foo=1", "items=nan", "size=1+2", "val_frac=0.9", "x",
                                    "seed=99999999999999999999999"]), max_size=4)


@FAST
@given(st.text(max_size=40) | st.builds(lambda n, i: f"{n}:{','.join(i)}", names, items))
@example("showcase:size=inf")  # OverflowError
@example("showcase:foo=1")  # TypeError: an unexpected keyword argument
@example("showcase:=1")
@example("showcase:size=1+2")  # TypeError: int() of a list
def test_any_env_reference_builds_a_suite_or_is_a_user_error(ref):
    name, _ = ref.strip().partition(":")[::2]
    if name.strip() not in ("showcase", "nope", "") and name.strip() in ("gym", "openenv", "verifiers", "bfcl",
                                                                         "textworld", "reasoning_gym"):
        return  # those build heavier suites (games, datasets); their own tests cover them
    try:
        env = get_env(ref)
    except USER_ERRORS as err:
        assert str(err)
        return
    assert env.name == parse_ref(ref)[0]


def ref_text(name: str, kwargs: dict[str, Any]) -> str:
    def value(v: Any) -> str:
        return "+".join(value(x) for x in v) if isinstance(v, list) else str(v).lower() if isinstance(v, bool) \
            else str(v)

    return name + (":" + ",".join(f"{k}={value(v)}" for k, v in kwargs.items()) if kwargs else "")


words = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=8)


@FAST
@given(words, st.dictionaries(words, st.integers(-10**6, 10**6) | st.booleans() | words
                              | st.lists(st.integers(0, 99) | words, min_size=2, max_size=3), max_size=4))
def test_an_env_reference_round_trips_through_its_parts(name, kwargs):
    kwargs = {k: v for k, v in kwargs.items() if k != "id"}
    kwargs = {k: (v if not isinstance(v, str) or v not in ("true", "false") else v + "x") for k, v in kwargs.items()}
    assert parse_ref(ref_text(name, kwargs)) == (name, kwargs)
    assert parse_ref(ref_text(*parse_ref(ref_text(name, kwargs)))) == (name, kwargs)


runner = CliRunner()


def past_preflight(*args, **kwargs):
    raise AssertionError("coevo run got past its preflight: the test's check let a valid input through")


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None,
          derandomize=True)
@given(config_documents(), st.sampled_from(["--set", "--env", "--harness"]), st.text(max_size=20))
@example({"env": None}, "--env", "showcase")  # set_dotted on a null table: TypeError
@example({"train": 3}, "--set", "4")
@example({}, "--env", "showcase:size=inf")  # OverflowError in the suite
@example({}, "--harness", ".")  # a folder read as a file: IsADirectoryError
def test_the_cli_refuses_a_bad_config_env_or_harness_in_one_paragraph_and_writes_nothing(data, flag, text):
    if flag == "--harness" and (not text or is_agent_ref(text)):
        return  # no harness is the env's base harness; an agent factory is imported (the agent tests cover it)
    with tempfile.TemporaryDirectory() as folder, mock.patch("coevo.app.run.dry_run_agent", past_preflight):
        root = Path(folder)
        config = root / "c.yaml"
        # a server policy and a strategy without a weight stage: a config that passes loads no model weights
        config.write_text(yaml.safe_dump({"env": {"ref": "showcase:size=30", "n_train": 4, "n_val": 4, "n_test": 4},
                                          **data, "db": str(root / "a.db"), "out_dir": str(root / "out"),
                                          "strategy": "harness_only", "policy": "litellm:openai/fake"}))
        value = text if flag != "--set" else f"train.steps={text}"
        try:  # what coevo run checks, in its order: the config with the flag's value, then the env, then H0
            cfg = load_config(config, key_values([value], "") if flag == "--set" else
                              {"env.ref" if flag == "--env" else "harness": text})
            env = get_env(cfg.env.ref, **cfg.env.settings())
            if flag == "--harness":
                start_harness(text, env.name)
        except (*USER_ERRORS, HarnessError):
            result = runner.invoke(app, ["run", str(config), flag, value])
            assert result.exit_code == 1 and "Traceback" not in result.output, result.output
            assert "error" in result.output or "problem" in result.output, result.output
            assert sorted(p.name for p in root.iterdir()) == ["c.yaml"]  # nothing written
