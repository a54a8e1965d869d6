"""Importing ``bfcl-eval`` with its side effects contained.

``bfcl_eval.constants.eval_config`` creates ``result/``, ``score/`` and ``.file_locks/`` under
``BFCL_PROJECT_ROOT`` (default: next to the installed package) at import time. We point it at
``<coevo cache>/bfcl`` for the duration of the import and restore the variable afterwards.

``ast_checker`` imports ``constants.model_config``, which imports every API client bfcl supports
(anthropic, cohere, qwen-agent, ...; qwen-agent needs ``soundfile``, which bfcl-eval does not
declare, so that import fails on a clean install). ``ast_checker`` only reads
``MODEL_CONFIG_MAPPING[model].underscore_to_dot`` for dotted function names, so we import it with a
small stand-in module for ``model_config`` (installed in ``sys.modules`` only during that import):
every model name maps to ``underscore_to_dot=False``, which is right for text (prompting) answers.

bfcl-eval pins ``numpy==1.26.4`` (and exact versions of its model clients); none of the parts imported here
uses numpy, and they run on numpy 2. So it is installed without its dependencies (``BFCL_INSTALL``, run by
scripts/setup.sh), beside the ``coevo[bfcl]`` extra, which lists what these parts import.
"""

from __future__ import annotations

import os
import sys
import time
import types
from functools import lru_cache
from typing import Any

from coevo.envs.common import cache_dir, require

BFCL_EVAL = "bfcl-eval==2026.3.23"
"""The bfcl-eval release coevo scores with (tests/unit/test_scorer_probes.py verifies it)."""
BFCL_INSTALL = f"pip install --no-deps {BFCL_EVAL}"
"""How bfcl-eval is installed: without its pins (module docstring)."""
MODEL_CONFIG = "bfcl_eval.constants.model_config"
AST_CHECKER = "bfcl_eval.eval_checker.ast_eval.ast_checker"


class _TextModelConfig:
    underscore_to_dot = False


class _AnyModel(dict):
    def __missing__(self, key: str) -> _TextModelConfig:
        return _TextModelConfig()


def load_bfcl() -> types.SimpleNamespace:
    """Import the parts of bfcl-eval coevo uses; returns a namespace with ``load_dataset_entry``,
    ``load_ground_truth_entry``, ``ast_checker``, ``multi_turn_checker``, ``execute`` (the multi-turn
    executor), ``executor_module``, ``decode_ast``, ``is_function_calling_format_output``,
    ``Language``, ``ReturnFormat``, ``class_modules``, ``additional_function_prompt``,
    ``type_map`` and ``import_s`` (seconds the import took).

    Raises ``MissingExtraError`` naming ``coevo[bfcl]`` when bfcl-eval is not installed.
    """
    require("bfcl_eval", "bfcl", "bfcl-eval", then=BFCL_INSTALL)
    return _load()


@lru_cache(maxsize=1)
def _load() -> types.SimpleNamespace:
    started = time.perf_counter()
    previous = os.environ.get("BFCL_PROJECT_ROOT")
    os.environ["BFCL_PROJECT_ROOT"] = str(cache_dir("bfcl"))
    try:
        from bfcl_eval.constants import eval_config  # noqa: F401  (fixes PROJECT_ROOT now)
        from bfcl_eval.constants.default_prompts import DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC
        from bfcl_eval.constants.enums import Language, ReturnFormat
        from bfcl_eval.constants.executable_backend_config import CLASS_FILE_PATH_MAPPING
        from bfcl_eval.constants.type_mappings import GORILLA_TO_OPENAPI
        from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils
        from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker
        from bfcl_eval.model_handler.utils import default_decode_ast_prompting
        from bfcl_eval.utils import is_function_calling_format_output, load_dataset_entry, load_ground_truth_entry

        ast_checker = _import_ast_checker()
    finally:
        if previous is None:
            os.environ.pop("BFCL_PROJECT_ROOT", None)
        else:
            os.environ["BFCL_PROJECT_ROOT"] = previous
    return types.SimpleNamespace(
        load_dataset_entry=load_dataset_entry, load_ground_truth_entry=load_ground_truth_entry,
        ast_checker=ast_checker, multi_turn_checker=multi_turn_checker,
        execute=multi_turn_utils.execute_multi_turn_func_call, executor_module=multi_turn_utils,
        decode_ast=default_decode_ast_prompting, is_function_calling_format_output=is_function_calling_format_output,
        Language=Language, ReturnFormat=ReturnFormat, class_modules=dict(CLASS_FILE_PATH_MAPPING),
        additional_function_prompt=DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC, type_map=dict(GORILLA_TO_OPENAPI),
        import_s=time.perf_counter() - started)


def _import_ast_checker() -> Any:
    if AST_CHECKER in sys.modules or MODEL_CONFIG in sys.modules:
        from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker
        return ast_checker
    stand_in = types.ModuleType(MODEL_CONFIG)
    stand_in.MODEL_CONFIG_MAPPING = _AnyModel()  # type: ignore[attr-defined]
    sys.modules[MODEL_CONFIG] = stand_in
    try:
        from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker
    finally:
        if sys.modules.get(MODEL_CONFIG) is stand_in:
            del sys.modules[MODEL_CONFIG]
    return ast_checker
