"""Secrets are never printed or stored: the one place that masks them
(docs/design.md, Principles).

What counts as a secret in coevo's inputs: the password of a database URL
(``postgresql+psycopg://alice:PASSWORD@host/db``, any ``scheme://user:password@``), the value of a
secret-named setting in a model reference or a URL query (``litellm:openai/m?api_key=KEY``,
``...&token=KEY``) or in a mapping (a run config's ``model_settings: {"api_key": ...}``), and
provider key shapes that show up in error messages (``sk-...``, ``hf_...``, ``Bearer ...``). Each is
replaced by ``MASK``; the rest of the text stays, so a masked URL still says which server and user.

Every message, log line, archive row that holds a config or a model reference, report and
tracker parameter goes through ``redact`` / ``redact_data`` before it leaves the process. A masked
API key in a stored model reference means "read it from the provider's environment variable"
(``coevo.models.refs.split_settings`` drops it), so a resumed run still works with the key set
there; a masked database password is never needed again (a resume takes ``--db`` / ``$COEVO_DB``).
"""

from __future__ import annotations

import re
from typing import Any

MASK = "***"
"""What a secret is replaced by."""

SECRET_NAMES = ("api_key", "apikey", "api-key", "access_token", "auth_token", "token", "password", "passwd",
                "secret", "client_secret", "private_key")
"""Setting and mapping keys whose values are secrets (compared case-insensitively)."""

_URL_PASSWORD = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.\-]*://[^:/@\s'\"]*:)(?P<secret>[^@\s'\"]+)(?=@)")
_SETTING = re.compile(r"(?P<head>(?<![\w.\-])(?:" + "|".join(re.escape(n) for n in SECRET_NAMES)
                      + r")\s*[=:]\s*['\"]?)(?P<secret>[^\s&,;'\"}]+)", re.IGNORECASE)
_KEY_SHAPES = re.compile(r"(?P<head>\b(?:sk|hf)[-_])(?P<secret>[A-Za-z0-9][A-Za-z0-9_\-]{11,})"
                         r"|(?P<bearer>\bBearer\s+)(?P<token>[A-Za-z0-9._~+/=\-]{8,})")


def _mask(match: re.Match[str]) -> str:
    if match.groupdict().get("bearer"):
        return match.group("bearer") + MASK
    secret = match.group("secret")
    core = secret.rstrip(":.)]")  # a message's punctuation after the secret stays
    return match.group("head") + (core if core == MASK else MASK) + secret[len(core):]


def redact(text: str) -> str:
    """``text`` with every secret masked (module docstring): ``postgresql://alice:pw@h/db`` ->
    ``postgresql://alice:***@h/db``, ``...?api_key=sk-x&api_base=URL`` -> ``...?api_key=***&api_base=URL``.
    Idempotent; text without secrets is returned unchanged."""
    if not isinstance(text, str) or not text:
        return text
    text = _URL_PASSWORD.sub(_mask, text)
    text = _SETTING.sub(_mask, text)
    return _KEY_SHAPES.sub(_mask, text)


def redact_data(data: Any) -> Any:
    """A copy of ``data`` (JSON-like: dicts, lists, strings, numbers) with every string ``redact``-ed
    and the value of every secret-named key (``SECRET_NAMES``) replaced by ``MASK``."""
    if isinstance(data, dict):
        return {key: (MASK if _secret_key(key) and value not in (None, "") else redact_data(value))
                for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return type(data)(redact_data(x) for x in data)
    return redact(data) if isinstance(data, str) else data


def _secret_key(key: Any) -> bool:
    return isinstance(key, str) and key.lower() in SECRET_NAMES


def is_masked(value: Any) -> bool:
    """Whether ``value`` is a secret this module masked (``MASK``)."""
    return value == MASK
