"""What every config section shares: unknown keys are errors (with the key likely meant); and the
reward modes a suite scores with."""

from __future__ import annotations

import difflib
from typing import Any, Literal, Sequence

from pydantic import BaseModel, ConfigDict, ValidationError

RewardMode = Literal["correct", "partial"]
"""How a suite scores an answer: ``correct`` (1 when its checker passes it, else 0) or ``partial``
(the checker's partial credit)."""


class Section(BaseModel):
    """A config section: unknown keys are errors (a typo never passes silently)."""

    model_config = ConfigDict(extra="forbid")


def _section(model: type[BaseModel], path: Sequence[Any]) -> type[BaseModel] | None:
    """The model class of the section at ``path`` under ``model`` (None when ``path`` leaves the models)."""
    for part in path:
        field = model.model_fields.get(str(part))
        annotation = field.annotation if field is not None else None
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return None
        model = annotation
    return model


def did_you_mean(model: type[BaseModel], loc: Sequence[Any]) -> str:
    """`` (did you mean section.key?)`` for the unknown key at ``loc`` under ``model`` when a key of
    its section is close to it (``difflib``), else ``""``."""
    section = _section(model, loc[:-1])
    if section is None:
        return ""
    close = difflib.get_close_matches(str(loc[-1]), list(section.model_fields), n=1, cutoff=0.6)
    return f" (did you mean {'.'.join([*map(str, loc[:-1]), close[0]])}?)" if close else ""


def error_lines(err: ValidationError, model: type[BaseModel]) -> list[tuple[str, str]]:
    """Each of pydantic's errors for ``model`` as ``(dotted key, message)``: the message without
    pydantic's ``Value error, `` prefix, an unknown key's with its likely intended key
    (``did_you_mean``)."""
    out = []
    for e in err.errors():
        message = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            message = f"unknown key{did_you_mean(model, e['loc'])}"
        out.append((".".join(str(p) for p in e["loc"]), message))
    return out
