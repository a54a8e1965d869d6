"""Harnesses: ``HarnessSpec``, the hook registry, JSON-Patch edits, ``render`` and ``diff``."""

from coevo.harnesses.errors import HarnessError, Problem
from coevo.harnesses.patch import apply_patch, check_tools, make_patch
from coevo.harnesses.registry import Effect, HookContext, register_action, register_condition
from coevo.harnesses.spec import HarnessSpec, harness_warnings, load_harness, validate_spec
from coevo.harnesses.view import diff, render

__all__ = ["Effect", "HarnessError", "HarnessSpec", "HookContext", "Problem", "apply_patch", "check_tools", "diff",
           "harness_warnings", "load_harness", "make_patch", "register_action", "register_condition", "render",
           "validate_spec"]
