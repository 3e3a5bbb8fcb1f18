"""The fast sample of public OpenAPI documents (``make corpus`` runs all of them).

Stripe's document (417 operations, form-urlencoded bodies and ``deepObject`` queries),
a few small documents (YAML and JSON, 3.0 and 3.1, a Swagger 2.0 one refused with its
reason). OpenAI's and GitHub's documents (4.5 s of CPU together, and the sample's
checks) run in ``make corpus``, which fails if one of them or Stripe's imports less than
95 % of its operations (`source.REQUIRED`); here only with ``CALLGATE_CORPUS=full``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .openapi import source

pytestmark = pytest.mark.timeout(600)


def test_the_sample_imports_without_a_crash_and_stripe_almost_whole() -> None:
    """No crash, no failed check; at least 95 % of Stripe's operations are tools, every
    sampled tool takes a generated valid call through the gate, and the Swagger 2.0
    document is refused with its reason, not crashed on."""
    report, documents = source.run_documents(full=False)
    assert report.crashes == []
    assert report.checks_failed == []
    stripe = documents["stripe.json.gz"]
    assert stripe.operations == 417
    assert stripe.imported >= 0.95 * stripe.operations, stripe.refused
    swagger = documents["apisguru-apis.guru-2.0.1.yaml.gz"]
    assert swagger.imported == 0
    (reason,) = swagger.refused
    assert reason.startswith("document refused: ")
    assert "callgate reads OpenAPI N.N and N.N documents" in reason
    assert report.checked["calls ok"] >= report.imported
    assert report.checked["documents"] == len(source.SAMPLE)


def test_a_required_document_that_imports_too_little_fails_the_run() -> None:
    """`make corpus` fails (a failed check) when Stripe's, OpenAI's or GitHub's document
    imports under 95 % of its operations, or a different number of operations."""
    short = source.DocumentResult(file="openai.yaml.gz", operations=288, imported=273)
    assert source._shortfall(short) is not None
    enough = source.DocumentResult(file="openai.yaml.gz", operations=288, imported=274)
    assert source._shortfall(enough) is None
    other = source.DocumentResult(file="github.json.gz", operations=600, imported=600)
    assert source._shortfall(other) is not None


@pytest.mark.skipif(
    os.environ.get("CALLGATE_CORPUS") != "full",
    reason="make corpus checks OpenAI's and GitHub's documents; CALLGATE_CORPUS=full runs this",
)
@pytest.mark.parametrize(("file", "operations"), [("openai.yaml.gz", 288), ("github.json.gz", 623)])
def test_openai_and_github_descriptions_import_almost_whole(
    file: str, operations: int, tmp_path: Path
) -> None:
    """OpenAI's 3.1 document and GitHub's REST description: no crash, at least 95 % of
    their operations become tools, and what is left out says why."""
    found = source.import_document(file, tmp_path)
    assert found.crash is None
    assert found.operations == operations
    assert found.imported >= 0.95 * operations, found.refused
    assert sum(found.refused.values()) == operations - found.imported
