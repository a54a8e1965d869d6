"""Env registry: reference parsing, entry points, unknown names, missing optional packages."""

import sys
from types import SimpleNamespace

import pytest

from coevo.envs import registry
from coevo.envs.common import MissingExtraError, split_sizes, task_id


def test_parse_ref_coerces_values_and_collects_lists():
    name, kwargs = registry.parse_ref(
        "reasoning_gym:families=word_sorting,chain_sum,size=60,seed=0,tools=python+calculator,x=1.5,y=true")
    assert name == "reasoning_gym"
    assert kwargs == {"families": ["word_sorting", "chain_sum"], "size": 60, "seed": 0,
                      "tools": ["python", "calculator"], "x": 1.5, "y": True}
    assert registry.parse_ref("bfcl") == ("bfcl", {})


def test_parse_ref_rejects_an_item_without_key():
    with pytest.raises(ValueError, match="has no key"):
        registry.parse_ref("gym:Taxi-v4,FrozenLake-v1")
    with pytest.raises(ValueError, match="takes no target|unknown option .id."):
        registry.get_env("reasoning_gym:word_sorting")


def test_parse_ref_reads_a_bare_first_item_as_the_adapter_target():
    assert registry.parse_ref("gym:Taxi-v4,size=8,is_slippery=false") == (
        "gym", {"id": "Taxi-v4", "size": 8, "is_slippery": False})


def test_unknown_env_names_the_registered_ones():
    with pytest.raises(KeyError, match="reasoning_gym"):
        registry.get_env("no_such_suite")


def test_entry_point_suites_are_found(monkeypatch):
    class Dummy:
        name = "dummy"

        def __init__(self, k=0):
            self.k = k

    ep = SimpleNamespace(name="dummy", value="fake_mod:Dummy")
    monkeypatch.setattr(registry, "entry_points", lambda group: [ep] if group == "coevo.envs" else [])
    monkeypatch.setitem(sys.modules, "fake_mod", SimpleNamespace(Dummy=Dummy))
    assert "dummy" in registry.available()
    env = registry.get_env("dummy:k=3")
    assert isinstance(env, Dummy) and env.k == 3


@pytest.mark.parametrize("ref,module,extra", [("bfcl", "bfcl_eval", "coevo[bfcl]"),
                                              ("textworld", "textworld", "coevo[textworld]")])
def test_missing_optional_package_names_the_extra(monkeypatch, ref, module, extra):
    monkeypatch.setitem(sys.modules, module, None)  # makes `import module` raise ImportError
    with pytest.raises(MissingExtraError, match=extra.replace("[", r"\[").replace("]", r"\]")):
        registry.get_env(ref)


def test_task_id_is_stable_content_addressed_and_names_the_env_config():
    config = {"size": 10, "seed": 0, "families": ["a", "b"], "make": {"is_slippery": False}, "reward": "correct"}
    assert task_id("e", "abc", config) == task_id("e", "abc", dict(reversed(config.items())))
    assert task_id("e", "abc", config) != task_id("e", "abd", config) != task_id("f", "abc", config)
    assert task_id("e", "abc", config) != task_id("e", "abc", {**config, "seed": 1})
    assert task_id("e", "abc", config) != task_id("e", "abc", {**config, "make": {"is_slippery": True}})
    assert task_id("e", "abc", config) == task_id("e", "abc", {**config, "reward": "partial"})  # scoring only
    # the same in every process (no hash randomisation, no set order): pinned
    assert task_id("e", "abc", {"seed": 0, "tags": {"y", "x"}}) == "e-c2de915d-9f19900ddc3193b7"


def test_split_sizes_cover_all_items():
    assert split_sizes(10, 0.2, 0.2) == {"train": 6, "val": 2, "test": 2}
    assert split_sizes(3, 0.2, 0.2) == {"train": 1, "val": 1, "test": 1}
    with pytest.raises(ValueError):
        split_sizes(10, 0.6, 0.5)
