"""The offline operator library (docs/concepts/meta-loop.md, Offline meta roles): edit mechanisms over every
harness component, each declaring the failure causes it addresses, sampled per candidate by ``draw``.

Importing the package registers every operator in ``OPERATORS``: prompt rules and output-format
instructions, a category procedure and a lesson (``prompt``), demonstrations from train tasks
(``demos``), parser variants (``parser``), hooks, budgets, decoding and context (``control``), and
the tool view (``tools``) and, for a spec with BPE state, its settings (``bpe``).
"""

from coevo.roles.operators import bpe, control, demos, parser, prompt, tools  # noqa: F401  (registration)
from coevo.roles.operators.base import (
    COMPONENTS,
    OPERATORS,
    Edit,
    Material,
    Operator,
    applicable,
    assignments,
    draw,
    expected_answer,
    operator,
    order,
    seed_of,
    specific,
)

__all__ = ["COMPONENTS", "OPERATORS", "Edit", "Material", "Operator", "applicable", "assignments", "draw",
           "expected_answer", "operator", "order", "seed_of", "specific"]
