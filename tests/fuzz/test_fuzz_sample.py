"""A fixed-seed sample of the fuzz tier, and tests of the harness's own oracle.

The sample runs the same generator and checks as ``make fuzz`` on a few
thousand inputs: no exception escapes extract, submit, merge or render on
either ledger, the SQLite ledger keeps recording, and no call the generator
cut off reaches a handler. (Time per input is reported by ``make fuzz``,
never asserted here.)
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from callgate import ToolCall
from callgate.providers import Extraction

from . import harness
from .generate import PROVIDERS, Call, Case, Settings, _is_cut, generate
from .harness import Bench, Tally

SAMPLE_SEED = 20240
SAMPLE_SIZE = 1500
SAMPLE_SETTINGS = Settings(huge_rate=0.004, max_calls=2000, max_chars=200_000, max_depth=3000)


def _explain(tally: Tally) -> str:
    lines = [
        f"{count} x {key}: e.g. {tally.examples[key][0]}" for key, count in tally.failures.items()
    ]
    lines += [f"cut call ran: {v}" for v in tally.violation_examples[:5]]
    return "\n".join(lines)


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> tuple[Tally, list[Case]]:
    bench = Bench(tmp_path_factory.mktemp("fuzz-ledgers"))
    tally = Tally()
    cases = []
    for index in range(SAMPLE_SIZE):
        case = generate(SAMPLE_SEED, index, SAMPLE_SETTINGS)
        tally.record(case, bench.check(case), limit=float("inf"))
        cases.append(dataclasses.replace(case, payload=None))
    closing = bench.close()
    for failure in closing.failures:
        tally.failures[failure.key] = 1
        tally.examples[failure.key] = [(0, SAMPLE_SEED, -1, failure.message)]
    return tally, cases


@pytest.mark.timeout(300)
def test_no_model_output_in_the_sample_breaks_the_gate(sample: tuple[Tally, list[Case]]) -> None:
    """No exception escapes extract/submit/merge/render; the SQLite ledger still records."""
    tally, _ = sample
    assert tally.inputs == SAMPLE_SIZE
    assert tally.failures == {}, _explain(tally)


def test_no_cut_off_call_in_the_sample_reaches_a_handler(sample: tuple[Tally, list[Case]]) -> None:
    """Every call the generator cut off is rejected before any handler runs."""
    tally, _ = sample
    assert tally.cut_calls > 50  # the sample does cut calls
    assert tally.violations == 0, _explain(tally)


def test_the_sample_covers_every_format_and_mutation(sample: tuple[Tally, list[Case]]) -> None:
    """The generator is not degenerate: all formats, streams and mutation kinds appear."""
    tally, _ = sample
    labels = {f"{p}{s}" for p in PROVIDERS for s in ("", "/stream") if p != "text" or not s}
    assert set(tally.by_provider) == labels
    assert set(tally.by_source) == {"synth", "recorded", "random_text", "random_json"}
    for kind in (
        "cut:arguments",
        "stream:cut",
        "stream:no_completion",
        "arg:surrogate",
        "id:surrogate",
        "arg:huge_number",
        "arg:deep",
        "arg:long_string",
        "many_calls",
        "huge",
        "sdk",
        "struct:drop_key",
        "struct:dup_item",
        "struct:reorder_items",
        "struct:change_type",
        "text:cut",
        "ending:length",
        "ending:empty",
    ):
        assert tally.by_mutation[kind] > 0, kind


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(index=st.integers(min_value=0, max_value=2**40))
def test_any_generated_output_keeps_the_invariants(index: int, tmp_path_factory: Any) -> None:
    """Property: for any input of the generator, nothing escapes and no cut call runs."""
    bench = _shared_bench(tmp_path_factory)
    case = generate(7, index, SAMPLE_SETTINGS)
    result = bench.check(case)
    assert result.failures == []
    assert result.violations == []


_BENCH: dict[str, Bench] = {}


def _shared_bench(tmp_path_factory: Any) -> Bench:
    if "bench" not in _BENCH:
        _BENCH["bench"] = Bench(tmp_path_factory.mktemp("fuzz-property"))
    return _BENCH["bench"]


# -- the harness's own oracle --------------------------------------------------------


def _call(full: str, delivered: str) -> Call:
    return Call(id="c1", name="get_weather", args={}, full=full, delivered=delivered)


@pytest.mark.parametrize(
    ("full", "delivered", "truncated", "abnormal", "cut"),
    [
        ('{"city": "Paris"}', '{"city": "Paris"}', False, False, False),
        ('{"city": "Paris"}', '{"city": "Paris"}', False, True, False),
        ('{"city": "Paris"}', '{"city": "Pa', True, False, True),
        ('{"city": "Paris"}', '{"city": "Paris"', True, False, True),
        ('{"city": "Paris"}', "", True, True, True),
        ('{"city": "Paris"}', "", True, False, False),
        ('{"city": "Paris"} ', '{"city": "Paris"}', True, False, False),
        ('{"city": "Paris"} ', '{"city": "Paris"}', True, True, True),
    ],
)
def test_which_calls_count_as_cut(
    full: str, delivered: str, truncated: bool, abnormal: bool, cut: bool
) -> None:
    """Cut: shorter than meant and not a complete object, or shorter in a response that
    did not end normally; "" in a response that ended normally is a call without arguments."""
    assert _is_cut(_call(full, delivered), delivered, truncated, abnormal) is cut


def test_the_same_seed_and_index_give_the_same_input() -> None:
    """Any input can be rebuilt from (seed, index) alone."""
    for index in range(40):
        a, b = generate(3, index), generate(3, index)
        assert (a.label, a.source, a.mutations, a.cut_ids) == (
            b.label,
            b.source,
            b.mutations,
            b.cut_ids,
        )
        assert harness.payload_size(a.payload) == harness.payload_size(b.payload)


def _cut_chat_case() -> Case:
    payload = {
        "id": "chatcmpl-1",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": "c-cut",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": '{"city": "Pa'},
                        }
                    ],
                },
                "finish_reason": "length",
            }
        ],
    }
    return Case(
        seed=0,
        index=1,
        provider="openai_chat",
        stream=False,
        source="synth",
        payload=payload,
        cut_ids={"c-cut"},
    )


def test_a_cut_call_that_reaches_a_handler_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With an extractor that forgets the cut, the harness sees the handler get the call."""
    forgetful = SimpleNamespace(
        extract=lambda response: Extraction(
            items=(ToolCall(id="c-cut", name="get_weather", arguments={"city": "Pa"}),)
        ),
        render=lambda observations: [],
    )
    monkeypatch.setitem(harness.MODULES, "openai_chat", forgetful)
    result = Bench(tmp_path).check(_cut_chat_case())
    assert result.violations == [("memory", "c-cut"), ("sqlite", "c-cut")]


def test_an_escaping_exception_is_reported_with_stage_type_and_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An exception out of an extractor is a failure of stage extract, not a crash."""

    def broken(response: Any) -> Extraction:
        raise RecursionError("deep")

    monkeypatch.setitem(harness.MODULES, "openai_chat", SimpleNamespace(extract=broken))
    (failure,) = Bench(tmp_path).check(_cut_chat_case()).failures
    assert (failure.stage, failure.kind) == ("extract", "RecursionError")
    assert "in broken" in failure.location


def test_a_ledger_that_stops_recording_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The canary call: a SQLite ledger that no longer records is a failure of the input."""
    bench = Bench(tmp_path)
    assert bench.canary() is None
    monkeypatch.setattr(bench.sqlite.ledger, "get_call", lambda run_id, call_id: None)
    assert bench.canary() is not None


def test_an_input_that_is_not_a_response_is_the_documented_type_error(tmp_path: Path) -> None:
    """docs/providers.md: a value of the wrong kind raises TypeError; not counted as a failure."""
    case = dataclasses.replace(_cut_chat_case(), payload=42, cut_ids=set())
    result = Bench(tmp_path).check(case)
    assert result.not_a_response
    assert result.failures == []
