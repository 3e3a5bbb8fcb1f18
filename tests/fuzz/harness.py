"""Run fuzz inputs through extract and submit, and check the three invariants.

Per input: the provider's ``extract`` (or its ``StreamAssembler``), then
``run.submit(extraction.calls)`` on a gate over a `MemoryLedger` and on one
over a `SQLiteLedger`, then ``extraction.merge`` and the provider's
``render``. Checked:

* no exception escapes any of them (and the SQLite ledger still records a
  call afterwards, and closes cleanly when it is replaced);
* no input takes more than the time limit (extract plus submit);
* no call the generator cut off reaches a handler.

`Bench` holds one worker's gates (built once, ledgers replaced every few
thousand inputs); `check` runs one input; `Tally` adds results up.
"""

from __future__ import annotations

import os
import signal
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from pydantic import BaseModel

from callgate import ToolCall
from callgate.ledger import MemoryLedger, SQLiteLedger
from callgate.providers import Extraction, anthropic, gemini, openai_chat, openai_responses, text

from .generate import Case
from .registry import RECEIVED, fuzz_gate, fuzz_registry, fuzz_run

MODULES: dict[str, Any] = {
    "openai_chat": openai_chat,
    "openai_responses": openai_responses,
    "anthropic": anthropic,
    "gemini": gemini,
    "text": text,
}
BUCKETS = (0.001, 0.01, 0.1, 0.5, 1.0, 5.0, float("inf"))
SOURCE_ROOT = str(Path(MODULES["text"].__file__).resolve().parent.parent)


class Hang(BaseException):
    """An input ran past the hard limit; raised by the watchdog timer."""


def extract(case: Case) -> Extraction:
    """What the provider's extractor (or stream assembler) makes of the input."""
    module = MODULES[case.provider]
    if case.provider == "text":
        result: Extraction = module.extract(case.payload)
        return result
    if case.stream:
        assembler = module.StreamAssembler()
        chunks = case.payload if isinstance(case.payload, list) else [case.payload]
        for chunk in chunks:
            assembler.feed(chunk)
        result = assembler.extraction()
        return result
    result = module.extract(case.payload)
    return result


def right_kind(case: Case) -> bool:
    """Whether the input is of a kind the format takes (docs/providers.md): only what is
    inside such a value is the model's; any chunk is fine for a stream assembler."""
    if case.stream:
        return True
    if case.provider == "text":
        return isinstance(case.payload, str)
    kinds: tuple[type, ...] = (Mapping, list) if case.provider == "openai_responses" else (Mapping,)
    return isinstance(case.payload, (kinds, BaseModel))


def where(exc: BaseException) -> str:
    """The innermost frame of ``exc`` in callgate's source (else the innermost), as file:line."""
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if f.filename.startswith(SOURCE_ROOT)]
    frame = (ours or frames or [None])[-1]
    if frame is None:
        return "?"
    name = (
        os.path.relpath(frame.filename, SOURCE_ROOT) if ours else os.path.basename(frame.filename)
    )
    return f"{name}:{frame.lineno} in {frame.name}"


@dataclass(slots=True, frozen=True)
class Failure:
    """One exception that escaped: the stage it escaped from, its type and where it was raised."""

    stage: str
    kind: str
    location: str
    message: str

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.stage, self.kind, self.location)


@dataclass(slots=True)
class Result:
    """What one input did."""

    failures: list[Failure] = field(default_factory=list)
    violations: list[tuple[str, str]] = field(default_factory=list)
    """(ledger, call id) of every cut call that reached a handler."""
    seconds: float = 0.0
    calls: int = 0
    not_a_response: bool = False
    """The input was not a response at all, and extract raised TypeError, as documented."""


class Bench:
    """One worker's gates: a memory and a SQLite ledger, replaced every ``rotate`` inputs."""

    def __init__(self, directory: Path, *, rotate: int = 2000, hard_limit: float = 60.0) -> None:
        self.directory = directory
        self.registry = fuzz_registry()
        self.rotate = rotate
        self.hard_limit = hard_limit
        self.done = 0
        self.generation = 0
        self.memory = fuzz_gate(self.registry, MemoryLedger())
        self.sqlite_path = self._path()
        self.sqlite = fuzz_gate(self.registry, SQLiteLedger(self.sqlite_path))
        self.canaries = 0

    def _path(self) -> Path:
        self.generation += 1
        return self.directory / f"ledger-{os.getpid()}-{self.generation}.db"

    def renew(self, result: Result | None = None) -> None:
        """Fresh ledgers; a SQLite ledger that will not close is a failure of ``result``."""
        self.memory = fuzz_gate(self.registry, MemoryLedger())
        old, old_path = self.sqlite.ledger, self.sqlite_path
        try:
            old.close()
        except Exception as exc:
            if result is not None:
                result.failures.append(_failure("close:sqlite", exc))
        for suffix in ("", "-wal", "-shm"):
            Path(f"{old_path}{suffix}").unlink(missing_ok=True)
        self.sqlite_path = self._path()
        self.sqlite = fuzz_gate(self.registry, SQLiteLedger(self.sqlite_path))

    def canary(self) -> str | None:
        """Why the SQLite ledger no longer records an ordinary call, or None if it does."""
        self.canaries += 1
        call_id = f"canary-{self.canaries}"
        run = fuzz_run(self.sqlite, f"canary-run-{os.getpid()}-{self.canaries}")
        call = ToolCall(id=call_id, name="add_to_cart", arguments='{"cart_id": "c", "sku": "s"}')
        try:
            (obs,) = run.submit([call])
            record = self.sqlite.ledger.get_call(run.id, call_id)
        except Exception as exc:
            return f"{type(exc).__name__} at {where(exc)}"
        finally:
            RECEIVED.clear()
        if obs.status.value != "ok" or record is None:
            return f"an ordinary call was answered {obs.status.value} and recorded {record!r:.60}"
        return None

    def check(self, case: Case) -> Result:
        """Run one input through extract, submit (both ledgers), merge and render."""
        result = Result()
        RECEIVED.clear()
        previous = signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, self.hard_limit)
        try:
            self._check(case, result)
        except Hang as exc:
            result.failures.append(_failure("hang", exc))
            self.renew(result)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
            RECEIVED.clear()
        self.done += 1
        if self.done % self.rotate == 0:
            self.renew(result)
        return result

    def _check(self, case: Case, result: Result) -> None:
        start = time.perf_counter()
        try:
            extraction = extract(case)
        except TypeError as exc:
            if not right_kind(case):
                result.not_a_response = True  # the documented contract: raise at once
            else:
                result.failures.append(_failure("extract", exc))
            result.seconds = time.perf_counter() - start
            return
        except Exception as exc:
            result.failures.append(_failure("extract", exc))
            result.seconds = time.perf_counter() - start
            return
        extracted = time.perf_counter() - start
        calls = extraction.calls
        result.calls = len(calls)
        slowest = 0.0
        for name, gate in (("memory", self.memory), ("sqlite", self.sqlite)):
            RECEIVED.clear()
            run = fuzz_run(gate, f"fz-{case.seed}-{case.index}")
            began = time.perf_counter()
            observations = None
            try:
                observations = run.submit(calls)
            except Exception as exc:
                result.failures.append(_failure(f"submit:{name}", exc))
            slowest = max(slowest, time.perf_counter() - began)
            result.violations += [(name, cid) for cid, _ in RECEIVED if cid in case.cut_ids]
            if observations is not None and name == "memory":
                self._answer(case, extraction, observations, result)
        result.seconds = extracted + slowest
        if any(f.stage == "submit:sqlite" for f in result.failures) or case.index % 97 == 0:
            why = self.canary()
            if why is not None:
                result.failures.append(
                    Failure("ledger_poisoned", "LedgerStopsRecording", "sqlite", why)
                )
                self.renew(result)

    @staticmethod
    def _answer(case: Case, extraction: Extraction, observations: Any, result: Result) -> None:
        try:
            merged = extraction.merge(observations)
        except Exception as exc:
            result.failures.append(_failure("merge", exc))
            return
        try:
            MODULES[case.provider].render(merged)
        except Exception as exc:
            result.failures.append(_failure("render", exc))

    def close(self) -> Result:
        result = Result()
        try:
            self.sqlite.ledger.close()
        except Exception as exc:
            result.failures.append(_failure("close:sqlite", exc))
        return result


def _alarm(signum: int, frame: FrameType | None) -> None:
    raise Hang("the input ran past the hard limit")


def _failure(stage: str, exc: BaseException) -> Failure:
    message = str(exc) if not isinstance(exc, RecursionError) else "maximum recursion depth"
    return Failure(stage, type(exc).__name__, where(exc), message[:200])


# -- adding up ------------------------------------------------------------------------


@dataclass(slots=True)
class Tally:
    """Counts over many inputs; tallies of workers add up with `add`."""

    inputs: int = 0
    not_a_response: int = 0
    calls: int = 0
    cut_calls: int = 0
    by_provider: Counter[str] = field(default_factory=Counter)
    by_source: Counter[str] = field(default_factory=Counter)
    by_mutation: Counter[str] = field(default_factory=Counter)
    failing_inputs: int = 0
    failing_by_provider: Counter[str] = field(default_factory=Counter)
    failures: dict[tuple[str, str, str], int] = field(default_factory=dict)
    examples: dict[tuple[str, str, str], list[tuple[int, int, int, str]]] = field(
        default_factory=dict
    )
    """Per failure class, the smallest inputs: (size, seed, index, message)."""
    violations: int = 0
    violation_examples: list[tuple[int, int, str, str]] = field(default_factory=list)
    buckets: list[int] = field(default_factory=lambda: [0] * len(BUCKETS))
    over_limit: int = 0
    slowest: list[tuple[float, int, int, str]] = field(default_factory=list)
    seconds_total: float = 0.0
    samples: list[float] = field(default_factory=list)

    def record(self, case: Case, result: Result, limit: float) -> None:
        self.inputs += 1
        self.not_a_response += result.not_a_response
        self.calls += result.calls
        self.cut_calls += len(case.cut_ids)
        self.by_provider[case.label] += 1
        self.by_source[case.source] += 1
        self.by_mutation.update(set(case.mutations))
        if result.failures or result.violations:
            self.failing_inputs += 1
            self.failing_by_provider[case.label] += 1
        size = payload_size(case.payload)
        for failure in result.failures:
            key = failure.key
            self.failures[key] = self.failures.get(key, 0) + 1
            examples = self.examples.setdefault(key, [])
            examples.append((size, case.seed, case.index, failure.message))
            examples.sort()
            del examples[3:]
        if result.violations:
            self.violations += len(result.violations)
            for ledger, call_id in result.violations[:2]:
                if len(self.violation_examples) < 50:
                    self.violation_examples.append((case.seed, case.index, ledger, call_id))
        for i, bound in enumerate(BUCKETS):
            if result.seconds < bound:
                self.buckets[i] += 1
                break
        if result.seconds > limit:
            self.over_limit += 1
        self.seconds_total += result.seconds
        if len(self.samples) < 20_000:
            self.samples.append(result.seconds)
        self.slowest.append((result.seconds, case.seed, case.index, _describe(case, size)))
        self.slowest.sort(reverse=True)
        del self.slowest[10:]

    def add(self, other: Tally) -> None:
        self.inputs += other.inputs
        self.not_a_response += other.not_a_response
        self.calls += other.calls
        self.cut_calls += other.cut_calls
        self.by_provider.update(other.by_provider)
        self.by_source.update(other.by_source)
        self.by_mutation.update(other.by_mutation)
        self.failing_inputs += other.failing_inputs
        self.failing_by_provider.update(other.failing_by_provider)
        for key, count in other.failures.items():
            self.failures[key] = self.failures.get(key, 0) + count
            examples = self.examples.setdefault(key, [])
            examples.extend(other.examples.get(key, []))
            examples.sort()
            del examples[3:]
        self.violations += other.violations
        self.violation_examples.extend(other.violation_examples)
        del self.violation_examples[50:]
        self.buckets = [a + b for a, b in zip(self.buckets, other.buckets, strict=True)]
        self.over_limit += other.over_limit
        self.slowest = sorted(self.slowest + other.slowest, reverse=True)[:10]
        self.seconds_total += other.seconds_total
        self.samples.extend(other.samples[: max(0, 100_000 - len(self.samples))])


def _describe(case: Case, size: int) -> str:
    tags = ",".join(sorted(set(case.mutations)))[:120]
    return f"{case.label} {case.source} size={size} [{tags}]"


def payload_size(value: Any, cap: int = 10**8) -> int:
    """Characters of text plus items of containers in ``value`` (without recursion)."""
    total = 0
    stack = [value]
    while stack and total < cap:
        node = stack.pop()
        if isinstance(node, str):
            total += len(node)
        elif isinstance(node, dict):
            total += 1 + len(node)
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, list | tuple):
            total += 1 + len(node)
            stack.extend(node)
        elif isinstance(node, BaseModel):
            total += 1
            stack.extend(vars(node).values())
        elif isinstance(node, int) and not isinstance(node, bool):
            total += max(1, node.bit_length() * 30103 // 100000)
        else:
            total += 1
    return total


def scratch_directory() -> Path:
    """A fresh temporary directory (on tmpfs when there is one): never the working tree."""
    base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    return Path(tempfile.mkdtemp(prefix="callgate-fuzz-", dir=base))


def iterate(bench: Bench, cases: Iterator[Case], tally: Tally, limit: float) -> Tally:
    """Check every case on ``bench`` and add it to ``tally``."""
    for case in cases:
        tally.record(case, bench.check(case), limit)
    return tally
