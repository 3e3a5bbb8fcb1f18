"""The fast sample of public OpenAPI documents (``make corpus`` runs all of them).

Stripe's document (417 operations, form-urlencoded bodies and ``deepObject`` queries),
a few small documents (YAML and JSON, 3.0 and 3.1, a Swagger 2.0 one refused with its
reason); then OpenAI's and GitHub's, imported only (their checks run in ``make corpus``).
"""

from __future__ import annotations

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
