"""Each record kind's decoder reads back exactly what its encoder wrote, through the stored
JSON text (`callgate.ledger.record_data`)."""

from __future__ import annotations

from typing import Any

import pydantic_core
from hypothesis import given
from hypothesis import strategies as st

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
