"""Each record kind's decoder reads back exactly what its encoder wrote, through the stored
JSON text (`callgate.ledger.record_data`)."""

from __future__ import annotations

from typing import Any

import pydantic_core
from hypothesis import given
from hypothesis import strategies as st

from callgate.ledger import AttemptFinish, AttemptStart, CallRecord, CallState, Outcome
from callgate.ledger.record_data import (
    ApprovalForged,
    AttemptEnded,
    AttemptStarted,
    Checkpoint,
    Decision,
    KeyAnswered,
    KeyForged,
    Released,
    RunOpened,
)
from callgate.ledger.sql_codecs import dumps

text = st.text(max_size=20)
maybe = st.none() | text
times = st.floats(min_value=0, max_value=4e9, allow_nan=False)
AT = 123.5


def _stored(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` as a SQL ledger stores it and reads it back."""
    found: dict[str, Any] = pydantic_core.from_json(dumps(data))
    return found


@given(
    st.builds(
        Decision,
        actor=text,
        tool=text,
        tool_version=maybe,
        arguments=text,
        stage=text,
        decided_by=maybe,
        effects=st.lists(text, max_size=3).map(tuple),
        approval_id=maybe,
        message=text,
        request_hash=maybe,
        idempotency_key=maybe,
        created_at=times,
        updated_at=times,
    )
)
def test_a_decision_reads_back(d: Decision) -> None:
    """A decision record's data decodes to the decision encoded."""
    assert Decision.decode(_stored(d.encode()), AT) == d


@given(
    st.builds(
        AttemptStarted,
        actor=text,
        attempt=st.integers(1, 100),
        idempotency_key=text,
        request_hash=text,
        tool_version=text,
        started_at=times,
        key_expires_at=times,
        side_effecting=st.booleans(),
        budgets=st.lists(st.tuples(text, times), max_size=3).map(tuple),
    )
)
def test_an_attempt_start_reads_back(s: AttemptStarted) -> None:
    """An ``attempt.started`` record's data decodes to the start encoded (budgets included)."""
    assert AttemptStarted.decode(_stored(s.encode()), AT) == s


@given(
    st.builds(
        AttemptEnded,
        actor=text,
        attempt=st.integers(1, 100),
        status=st.sampled_from(["ok", "error", "unknown"]),
        stage=st.sampled_from(["execute", "verify"]),
        error=maybe,
        reconciled=st.booleans(),
        transaction_id=maybe,
        evidence_id=maybe,
        note=maybe,
        content=text,
        finished_at=times,
        idempotency_key=text,
    )
)
def test_an_attempt_end_reads_back(e: AttemptEnded) -> None:
    """An ``attempt.<status>`` record's data decodes to the end encoded, whose status the
    kind names."""
    stored = _stored(e.encode())
    assert AttemptEnded.decode(stored, AT) == e
    assert AttemptEnded.decode(stored, AT, e.status) == e
    assert AttemptEnded.decode(stored, AT).outcome.content == e.content


@given(
    actor=text,
    holder=st.none() | st.tuples(text, text),
    settled=st.none() | st.sampled_from(["ok", "rejected", "unknown"]),
    stage=st.sampled_from(["execute", "verify"]),
    started_at=times,
)
def test_a_key_answer_reads_back(
    actor: str, holder: tuple[str, str] | None, settled: str | None, stage: str, started_at: float
) -> None:
    """An ``idempotency.*`` answer decodes to the answer encoded (its settlement only when
    the call settled)."""
    answered = (
        KeyAnswered(actor=actor, holder=holder)
        if settled is None
        else KeyAnswered(
            actor=actor, holder=holder, settled=settled, stage=stage, started_at=started_at
        )
    )
    assert KeyAnswered.decode(_stored(answered.encode()), AT) == answered


@given(text, text, text)
def test_forgeries_releases_and_runs_read_back(a: str, b: str, c: str) -> None:
    """The records with a few text fields decode to what was encoded."""
    assert KeyForged.decode(_stored(KeyForged(actor=a, idempotency_key=b, problem=c).encode())) == (
        KeyForged(actor=a, idempotency_key=b, problem=c)
    )
    forged = ApprovalForged(actor=a, approval_id=b, problem=c)
    assert ApprovalForged.decode(_stored(forged.encode())) == forged
    assert Released.decode(_stored(Released(approval_id=a, by=b).encode())) == Released(
        approval_id=a, by=b
    )
    assert RunOpened.decode(_stored(RunOpened(actor=a).encode({"goal": c}))) == RunOpened(actor=a)


@given(
    text,
    st.lists(
        st.tuples(
            text, st.integers(0, 2**62), st.text("0123456789abcdef", min_size=64, max_size=64)
        ),
        max_size=4,
    ),
)
def test_a_checkpoint_reads_back(actor: str, heads: list[tuple[str, int, str]]) -> None:
    """A checkpoint decodes to the heads it binds, sorted."""
    checkpoint = Checkpoint.of(heads, actor)
    assert Checkpoint.decode(_stored(checkpoint.encode())) == checkpoint
    assert list(checkpoint.heads) == sorted(heads)


# -- `of`: what a writer folds is what a reader decodes ------------------------------------

odd_times = (
    st.none()
    | times
    | st.integers(min_value=-(10**400), max_value=10**400)
    | st.sampled_from([float("inf"), float("-inf"), float("nan"), 0.0])
)
"""What a caller may pass as a time: nothing, a number, one no stored float can hold."""
odd_counts = st.integers(min_value=-(10**20), max_value=10**20) | st.sampled_from([0, 1, 2])


@given(
    st.builds(
        CallRecord,
        run_id=text,
        call_id=text,
        tool=text,
        tool_version=maybe,
        principal=text,
        arguments=text,
        state=st.sampled_from(CallState),
        stage=st.sampled_from(["", "policy", "execute"]),
        request_hash=maybe,
        idempotency_key=maybe,
        decided_by=maybe,
        message=maybe,
        effects=st.lists(text, max_size=3).map(tuple),
        approval_id=maybe,
        created_at=odd_times,
        updated_at=odd_times,
    )
)
def test_a_decision_of_a_call_is_what_its_text_decodes_to(r: CallRecord) -> None:
    """`Decision.of` equals the decode of its own stored text (no time, no message)."""
    body = Decision.of(r, AT)
    assert Decision.decode(_stored(body.encode()), AT) == body


@given(
    st.builds(
        AttemptStart,
        run_id=text,
        call_id=text,
        tool=text,
        tool_version=text,
        attempt=odd_counts,
        idempotency_key=text,
        request_hash=text,
        started_at=odd_times,
        key_expires_at=odd_times,
        side_effecting=st.booleans(),
        budgets=st.lists(
            st.tuples(text, odd_times.filter(lambda x: x is not None), times), max_size=2
        ).map(tuple),
    ),
    text,
)
def test_an_attempt_start_is_what_its_text_decodes_to(s: AttemptStart, worker: str) -> None:
    """`AttemptStarted.of` equals the decode of its own stored text."""
    body = AttemptStarted.of(s, worker, AT)
    back = AttemptStarted.decode(_stored(body.encode()), AT)
    assert _no_nan(back) == _no_nan(body)


@given(
    st.builds(
        AttemptFinish,
        run_id=text,
        call_id=text,
        attempt=odd_counts,
        idempotency_key=maybe,
        outcome=st.builds(
            Outcome,
            status=st.sampled_from(["ok", "error", "unknown"]),
            content=maybe,
            error=maybe,
            stage=st.sampled_from(["", "execute", "reconcile"]),
            finished_at=odd_times,
            reconciled=st.booleans(),
            transaction_id=maybe,
        ),
        actor=maybe,
        note=maybe,
    ),
    text,
)
def test_an_attempt_end_is_what_its_text_decodes_to(f: AttemptFinish, worker: str) -> None:
    """`AttemptEnded.of` equals the decode of its own stored text (no finish time, no
    content, an empty stage)."""
    body = AttemptEnded.of(f, worker, AT)
    back = AttemptEnded.decode(_stored(body.encode()), AT, f.outcome.status)
    assert back == body


def _no_nan(s: AttemptStarted) -> AttemptStarted:
    """``s`` with a NaN budget amount (kept as given: NaN equals nothing) marked as text."""
    s.budgets = tuple((k, "nan" if a != a else a) for k, a in s.budgets)  # type: ignore[misc]
    return s
