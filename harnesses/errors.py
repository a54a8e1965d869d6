"""The one error type for a harness that cannot be built: ``HarnessError`` with every problem found."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import ValidationError

from coevo.errors import CoevoError


@dataclass(frozen=True)
class Problem:
    """One problem: ``path`` is a JSON Pointer into the spec (``/hooks/h1/condition``), ``message`` says the fix."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path or '/'}: {self.message}"


class HarnessError(CoevoError, ValueError):
    """A spec, file or patch that does not yield a valid harness.

    ``problems`` lists every problem found (not just the first), each with its JSON path.
    Raised by ``load_harness``, ``validate_spec``, ``apply_patch`` and ``check_tools``.
    """

    def __init__(self, problems: list[Problem], source: str = "harness") -> None:
        self.problems = list(problems)
        self.source = source
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"{source} is invalid ({len(self.problems)} problem(s)):\n{lines}")


def problems_from_validation(err: ValidationError) -> list[Problem]:
    """Turn pydantic's errors into ``Problem``s with JSON-Pointer paths."""
    out = []
    for e in err.errors():
        path = "/" + "/".join(str(p) for p in e["loc"]) if e["loc"] else ""
        out.append(Problem(path, e["msg"]))
    return out
