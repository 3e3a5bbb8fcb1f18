"""The cost of importing a large public OpenAPI document (`callgate.openapi.import_openapi`).

Imports Stripe's published document (4.2 MB JSON, 417 operations), GitHub's REST
description (3.0 MB JSON, 623 operations), Stripe's 2023 document (4.2 MB YAML, 468
operations) and OpenAI's (3.0 MB YAML, 288 operations) from the corpus
(`tests/corpus/openapi/documents`), several times each, and reports the median wall time
and the median CPU time of the process (the machine is shared: the CPU time is what the
import itself costs, the wall time what it cost under the load of the moment). Then
splits one import into its steps: reading the document, building the operations
(`callgate.openapi.operations`), and building the tools (`schema_spec`: checking each
argument schema against the JSON Schema metaschema, compiling its validator and model).
Each import starts with the metaschema memo empty (`callgate.definitions.metaschema`:
each distinct subschema is checked once and remembered), so what is measured is a
first import, not one helped by the previous run.

Target: ≤ 5 s for a 5 MB document. No request is sent (a document without a usable
server gets a placeholder base URL).

    .venv/bin/python benchmarks/openapi_import.py [--runs 5]
"""

from __future__ import annotations

import argparse
import gzip
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = ROOT / "tests" / "corpus" / "openapi" / "documents"
CASES = ("stripe.json.gz", "github.json.gz", "stripe-2023.yaml.gz", "openai.yaml.gz")
TARGET_SECONDS = 5.0


def _import_once(path: Path) -> tuple[float, float, int, int]:
    from callgate.definitions import metaschema
    from callgate.openapi import import_openapi

    metaschema.forget()
    wall, cpu = time.perf_counter(), time.process_time()
    result = import_openapi(path, api="bench", require_credentials=False)
    return (
        time.perf_counter() - wall,
        time.process_time() - cpu,
        len(result.operations),
        len(result.tools),
    )


def _steps(path: Path) -> dict[str, float]:
    """CPU seconds of each step of one import."""
    from callgate.definitions import metaschema
    from callgate.openapi import import_openapi, load_document
    from callgate.openapi.operations import operations

    metaschema.forget()
    out: dict[str, float] = {}
    cpu = time.process_time()
    document = load_document(path)
    out["read the document"] = time.process_time() - cpu
    cpu = time.process_time()
    operations(document, api="bench", host="bench.invalid")
    out["build the operations"] = time.process_time() - cpu
    metaschema.forget()
    cpu = time.process_time()
    import_openapi(path, api="bench", require_credentials=False)
    out["whole import"] = time.process_time() - cpu
    out["build the tools (the rest)"] = (
        out["whole import"] - out["read the document"] - out["build the operations"]
    )
    return out


def main() -> int:
    """Run the cases, print a table, exit 1 if a median CPU time is over the target."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    over: list[str] = []
    with tempfile.TemporaryDirectory() as scratch:
        print(f"{'document':<22} {'MB':>5} {'ops':>5} {'tools':>5} {'wall s':>7} {'cpu s':>6}")
        for case in CASES:
            data = gzip.decompress((DOCUMENTS / case).read_bytes())
            path = Path(scratch) / case.removesuffix(".gz")
            path.write_bytes(data)
            _import_once(path)  # warm: imports, caches
            walls, cpus = [], []
            ops = tools = 0
            for _ in range(args.runs):
                wall, cpu, ops, tools = _import_once(path)
                walls.append(wall)
                cpus.append(cpu)
            median_cpu = statistics.median(cpus)
            if median_cpu > TARGET_SECONDS:
                over.append(f"{case.removesuffix('.gz')} ({median_cpu:.2f} s)")
            print(
                f"{case.removesuffix('.gz'):<22} {len(data) / 1e6:>5.1f} {ops:>5} {tools:>5} "
                f"{statistics.median(walls):>7.2f} {median_cpu:>6.2f}"
            )
        for name in ("stripe.json", "stripe-2023.yaml"):
            print(f"\n{name}, one import by step (CPU s):")
            for step, seconds in _steps(Path(scratch) / name).items():
                print(f"  {step:<28} {seconds:6.2f}")
    verdict = "met for every document" if not over else "NOT MET for " + ", ".join(over)
    print(f"\ntarget: median CPU ≤ {TARGET_SECONDS:g} s per document: {verdict}")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
