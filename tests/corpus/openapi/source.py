"""Public OpenAPI documents (Stripe, GitHub, OpenAI, Twilio, Adyen, OpenAPI's examples and a
sample of the APIs-guru directory), imported the way users import them.

``documents/`` holds each document gzip-compressed as published; ``manifest.json`` says
where each came from (repository, path, commit, licence; `SOURCE.md` is the same as a
table). Each document goes through `import_openapi` (YAML or JSON, 3.0 or 3.1; Swagger
2.0 is refused with its reason), with ``require_credentials=False`` and, for a document
that names no absolute server, a placeholder base URL: the corpus never sends a request.
Definitions are operations: each one imported, or left out with its reason (counted by a
short phrase), or refused with its whole document. The imported tools then go through
the shared checks (`tests.corpus._checks`): every provider export validates, and a
generated valid call for each tool is accepted by a real gate whose handlers are
no-ops.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from callgate import DefinitionError, Registry, ToolSpec
from callgate.openapi import OpenAPIImport, import_openapi

from .._checks import (
    call_failures,
    check_registry,
    crash_text,
    export_failures,
    refusal_reason,
    timed,
)
from .._report import SourceReport

HERE = Path(__file__).parent
DOCUMENTS = HERE / "documents"
MANIFEST = HERE / "manifest.json"
PLACEHOLDER = "https://server.invalid"
"""The base URL of a document that names no absolute server (no request is ever sent)."""
SAMPLE = (
    "stripe.json.gz",
    "oai-petstore-expanded.yaml.gz",
    "oai-link-example.yaml.gz",
    "twilio-routes_v2.json.gz",
    "adyen-BalanceControlService-v2.json.gz",
    "apisguru-canada-holidays.ca-1.0.yaml.gz",
    "apisguru-apis.guru-2.0.1.yaml.gz",
)
"""The fast sample (``full=False``): Stripe's document and a few small ones (YAML and
JSON, 3.0 and 3.1, one Swagger 2.0 refused)."""
_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
REQUIRED = {"stripe.json.gz": 417, "openai.yaml.gz": 288, "github.json.gz": 623}
"""Issue 26's documents and their operation counts: each must import at least
`REQUIRED_SHARE` of its operations, or the run fails (a failed check)."""
REQUIRED_SHARE = 0.95


@dataclass(kw_only=True)
class DocumentResult:
    """What one document became."""

    file: str
    operations: int = 0
    imported: int = 0
    refused: Counter[str] = field(default_factory=Counter)
    crash: str | None = None
    seconds: float = 0.0
    result: OpenAPIImport | None = None


def manifest() -> list[dict[str, Any]]:
    """Every document's entry: file, repo, path, commit, licence, bytes."""
    entries: list[dict[str, Any]] = json.loads(MANIFEST.read_text(encoding="utf-8"))
    return entries


def _counted(document: Any) -> int:
    """How many operations a document declares (for one refused whole)."""
    paths = document.get("paths") if isinstance(document, dict) else None
    if not isinstance(paths, dict):
        return 0
    return sum(
        1 for item in paths.values() if isinstance(item, dict) for m in _METHODS if m in item
    )


_POINTER = re.compile(r" \(at #/[^)]*\)$")


_FORMAT = re.compile(r"format \"([^\"]{1,60})\" \(at [^)]*\) is not one callgate checks")


def _reason(text: str) -> str:
    """A short stable phrase for an operation left out (the pointer and names blanked; an
    unknown format keeps its name: which formats the corpus meets is worth reading)."""
    unknown = _FORMAT.search(text)
    if unknown is not None:
        return f"left out: format {unknown.group(1)!r} is not one callgate checks"
    return refusal_reason(DefinitionError(_POINTER.sub("", text))).replace(
        "DefinitionError: ", "left out: ", 1
    )


def import_document(file: str, directory: Path) -> DocumentResult:
    """Import one corpus document (written decompressed into ``directory``: the importer
    reads files by their suffix, as users give them)."""
    out = DocumentResult(file=file)
    data = gzip.decompress((DOCUMENTS / file).read_bytes())
    path = directory / file.removesuffix(".gz")
    path.write_bytes(data)
    api = re.sub(r"[^A-Za-z0-9_.-]", "_", file.split(".")[0])
    start = time.perf_counter()
    try:
        try:
            result = import_openapi(path, api=api, require_credentials=False)
        except DefinitionError as exc:
            if "base_url" not in str(exc):
                raise
            result = import_openapi(path, api=api, base_url=PLACEHOLDER, require_credentials=False)
    except DefinitionError as exc:
        import yaml

        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        try:
            raw = yaml.load(data, Loader=loader)
        except yaml.YAMLError:
            raw = None
        out.operations = max(_counted(raw), 1)
        said = DefinitionError(str(exc).replace(str(path), file.removesuffix(".gz")))
        out.refused["document refused: " + refusal_reason(said)] += out.operations
        out.seconds = time.perf_counter() - start
        return out
    except Exception as exc:  # a crash is what the corpus exists to find
        out.crash = f"{file}: {crash_text(exc)}"
        out.seconds = time.perf_counter() - start
        return out
    out.seconds = time.perf_counter() - start
    out.result = result
    out.operations = len(result.operations)
    out.imported = len(result.tools)
    for why in result.skipped.values():
        out.refused[_reason(why)] += 1
    return out


def run(full: bool) -> SourceReport:
    """Import every document (or the sample), then check every imported tool."""
    return run_documents(full)[0]


EXPORT_STRIDE = 10
"""In the fast sample, every tenth of Stripe's tools has its exports checked (checking
all 417 costs about 15 s of CPU); every tool still takes a generated call."""


def run_documents(full: bool) -> tuple[SourceReport, dict[str, DocumentResult]]:
    """The source's report and each document's own result, by file name."""
    report = SourceReport(source="openapi")
    results: dict[str, DocumentResult] = {}
    with timed(report), tempfile.TemporaryDirectory() as scratch:
        registry = Registry()
        exported = Registry()
        for entry in manifest():
            if not full and entry["file"] not in SAMPLE:
                continue
            found = import_document(entry["file"], Path(scratch))
            results[found.file] = found
            report.definitions += found.operations
            report.imported += found.imported
            report.refused.update(found.refused)
            report.checked["documents"] += 1
            if found.crash is not None:
                report.crashes.append(found.crash)
                continue
            shortfall = _shortfall(found)
            if shortfall is not None:
                report.checks_failed.append(shortfall)
            if found.result is None:
                report.checked["documents refused"] += 1
                continue
            try:
                added = _add_renamed(registry, found.result, found.file)
            except Exception as exc:
                report.crashes.append(f"{found.file}: registering: {crash_text(exc)}")
                continue
            stride = 1 if full or found.file != "stripe.json.gz" else EXPORT_STRIDE
            for spec in added[::stride]:
                exported.add(spec)
        if full:
            check_registry(registry, report)
        else:
            _check_sample(registry, exported, report)
        for found in results.values():
            found.result = None  # the tools are checked; keep the report light
    return report, results


def _shortfall(found: DocumentResult) -> str | None:
    """Why one of the `REQUIRED` documents falls short, or None."""
    expected = REQUIRED.get(found.file)
    if expected is None:
        return None
    if found.operations != expected or found.imported < REQUIRED_SHARE * expected:
        return (
            f"{found.file}: {found.imported} of {found.operations} operations imported "
            f"(expected {expected} operations, at least {REQUIRED_SHARE:.0%} imported); "
            f"left out: {dict(found.refused.most_common(3))}"
        )
    return None


def _check_sample(registry: Registry, exported: Registry, report: SourceReport) -> None:
    """`check_registry` with the exports checked on ``exported`` only."""
    try:
        report.checks_failed += export_failures(exported)
    except Exception as exc:
        report.crashes.append(f"export check: {crash_text(exc)}")
    report.checked["exports"] += len(exported)
    try:
        tally = call_failures(registry)
    except Exception as exc:
        report.crashes.append(f"call check: {crash_text(exc)}")
        return
    report.checks_failed += tally.failures
    report.checked.update(tally.counts)


def _add_renamed(registry: Registry, result: OpenAPIImport, file: str) -> list[ToolSpec]:
    """Add a document's tools to the one registry the checks run on; a name another
    document already took gets the document's name as a prefix (the checks need unique
    names; a user registering two APIs would do the same)."""
    import dataclasses

    taken = {spec.name for spec in registry}
    prefix = re.sub(r"[^A-Za-z0-9_]", "_", file.split(".")[0])[:20]
    added = []
    for spec in result.tools:
        if spec.name in taken:
            tag = hashlib.sha256(f"{file}/{spec.name}".encode()).hexdigest()[:8]
            spec = dataclasses.replace(spec, name=f"{prefix}_{tag}_{spec.name}"[:64])
        registry.add(spec)
        taken.add(spec.name)
        added.append(spec)
    return added
