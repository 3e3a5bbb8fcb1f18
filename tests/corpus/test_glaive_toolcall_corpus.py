"""The fast sample of Glaive's tool-calling conversations (``make corpus`` runs all)."""

from __future__ import annotations

from .glaive_toolcall import source


def test_a_public_function_calling_set_registers_and_its_expected_calls_pass() -> None:
    """Every distinct definition of the sample registers, exports to every provider's
    shape and takes a generated call; every expected call its schema allows is accepted,
    and every one its schema forbids is rejected."""
    report = source.run(full=False)
    assert report.crashes == []
    assert report.checks_failed == []
    assert report.definitions == report.imported > 50
    assert report.checked["expected call: valid, accepted"] > 50
