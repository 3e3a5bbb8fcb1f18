"""Gates share the redactor of their patterns: built once, never changed (issue 15, speed)."""

from __future__ import annotations

import pytest

from callgate import Gate, MemoryLedger, Registry
from callgate.errors import DefinitionError


def _gate(**kwargs: object) -> Gate:
    return Gate(Registry(), ledger=MemoryLedger(), **kwargs)  # type: ignore[arg-type]


def test_gates_with_the_same_patterns_share_one_redactor() -> None:
    """Two gates with the default patterns, or the same extra ones, share one redactor."""
    assert _gate().redactor is _gate().redactor
    extra = [r"acct-[0-9]{6}"]
    assert _gate(secret_patterns=extra).redactor is _gate(secret_patterns=extra).redactor


def test_a_shared_redactor_still_redacts_only_its_own_patterns() -> None:
    """A gate with an extra pattern redacts it; a default gate made after it does not."""
    special = _gate(secret_patterns=[r"acct-[0-9]{6}"])
    plain = _gate()
    assert "acct-123456" not in special.redactor.text("id acct-123456 here")
    assert plain.redactor.text("id acct-123456 here") == "id acct-123456 here"


def test_a_pattern_that_is_not_text_is_still_refused() -> None:
    """Sharing does not swallow the refusal of a pattern that is not a string."""
    with pytest.raises((DefinitionError, TypeError)):
        _gate(secret_patterns=[["not", "a", "pattern"]])
