"""Redaction: secrets never reach the ledger, the audit trail, logs or the model.

Two sources of secrets: argument fields a tool marks secret, and values that
look like credentials (API keys, bearer tokens, passwords in URLs).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["DEFAULT_SECRET_PATTERNS", "REDACTED", "Redactor"]

REDACTED = "[redacted]"

DEFAULT_SECRET_PATTERNS: tuple[str, ...] = (
    r"\bsk-[A-Za-z0-9_\-]{16,}",  # OpenAI-style and similar API keys
    r"\bsk-ant-[A-Za-z0-9_\-]{16,}",
    r"\b(?:ghp|gho|ghs|github_pat)_[A-Za-z0-9_]{20,}",
    r"\bAKIA[0-9A-Z]{16}\b",  # AWS access key id
    r"\bxox[abprs]-[A-Za-z0-9-]{10,}",  # Slack tokens
    r"(?i:\bbearer\s+)[A-Za-z0-9._~+/=\-]{12,}",
    r"(?<=://)[^/\s:@]+:[^/\s@]+(?=@)",  # user:password in URLs
    r"(?<=(?i:password)=)[^\s&;,]+",
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----",
)


# Lower-case literals one of which appears in any text a default pattern matches:
# a cheap test that lets most texts skip the regular expression entirely.
_DEFAULT_TRIGGERS = (
    "sk-",
    "ghp_",
    "gho_",
    "ghs_",
    "github_pat_",
    "akia",
    "xox",
    "bearer",
    "://",
    "password=",
    "private key",
)


class Redactor:
    """Replaces secret values and credential-shaped text with ``[redacted]``."""

    __slots__ = ("_pattern", "_triggers")

    def __init__(self, patterns: Iterable[str] = DEFAULT_SECRET_PATTERNS) -> None:
        patterns = tuple(patterns)
        joined = "|".join(f"(?:{p})" for p in patterns)
        self._pattern = re.compile(joined) if joined else None
        self._triggers = _DEFAULT_TRIGGERS if patterns == DEFAULT_SECRET_PATTERNS else None

    def text(self, text: str, secrets: Iterable[str] = ()) -> str:
        """``text`` with the given secret values and credential-shaped strings redacted."""
        for secret in secrets:
            if secret and len(secret) >= 4:
                text = text.replace(secret, REDACTED)
        if self._pattern is None:
            return text
        if self._triggers is not None:
            lowered = text.lower()
            for trigger in self._triggers:  # a plain loop: several times faster than any()
                if trigger in lowered:
                    break
            else:
                return text
        return self._pattern.sub(REDACTED, text)

    def arguments(self, values: Mapping[str, Any], secret_fields: Iterable[str]) -> dict[str, Any]:
        """A copy of ``values`` with the secret fields replaced."""
        secret = set(secret_fields)
        return {k: (REDACTED if k in secret else v) for k, v in values.items()}

    @staticmethod
    def secret_values(values: Mapping[str, Any], secret_fields: Iterable[str]) -> list[str]:
        """The string values of the secret fields, to scrub from any other text."""
        return [str(values[f]) for f in secret_fields if values.get(f) is not None]
