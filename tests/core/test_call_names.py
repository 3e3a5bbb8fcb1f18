"""`callgate.gate.call_names.CallNames`: the names a run records its calls under.

The model's ids come back (``call_0`` every turn), so a run answers under the model's id
and records under a name of its own: the id itself the first time, an earlier name for the
same side-effecting call (a replay) or for a call still waiting for a person, and otherwise
a fresh ``<id>#n`` that no call of the run or of the batch already has. `RunState` keeps one
book per run.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from callgate.authorize.policy import Authority
from callgate.gate.call_names import CallNames
from callgate.gate.run_state import RunState

TOOL = "send_email"


def test_an_id_never_used_is_its_own_name() -> None:
    """A first call is recorded under the id the model sent, even an id shaped like a rename."""
    names = CallNames()
    assert names.name_for("call_0", TOOL, "h1", side_effecting=True) == "call_0"
    assert names.name_for("call_0#2", TOOL, "h1", side_effecting=False) == "call_0#2"


def test_the_same_side_effecting_call_again_gets_its_earlier_name() -> None:
    """Resubmitting an admitted side-effecting call answers under the same name: no double run."""
    names = CallNames()
    names.admitted("call_0", "call_0", TOOL, "h1")
    for _ in range(3):
        assert names.name_for("call_0", TOOL, "h1", side_effecting=True) == "call_0"


def test_a_different_call_under_a_used_id_gets_a_fresh_name() -> None:
    """Another call (other arguments, or another tool) under a used id is `<id>#2`, then `#3`."""
    names = CallNames()
    names.admitted("call_0", "call_0", TOOL, "h1")
    second = names.name_for("call_0", TOOL, "h2", side_effecting=True)
    assert second == "call_0#2"
    names.admitted("call_0", second, TOOL, "h2")
    assert names.name_for("call_0", "other_tool", "h1", side_effecting=True) == "call_0#3"


def test_a_renamed_side_effecting_call_replays_under_its_renamed_name() -> None:
    """The same call as one recorded under `<id>#2` is answered by `<id>#2`, not a new name."""
    names = CallNames()
    names.admitted("call_0", "call_0", TOOL, "h1")
    names.admitted("call_0", "call_0#2", TOOL, "h2")
    assert names.name_for("call_0", TOOL, "h2", side_effecting=True) == "call_0#2"
    assert names.name_for("call_0", TOOL, "h1", side_effecting=True) == "call_0"


def test_a_read_repeated_under_a_used_id_runs_again_under_a_fresh_name() -> None:
    """A call that is not side-effecting is not replayed: the same read gets a new name."""
    names = CallNames()
    names.admitted("call_0", "call_0", "read_file", "h1")
    assert names.name_for("call_0", "read_file", "h1", side_effecting=False) == "call_0#2"


def test_a_call_after_an_error_gets_a_fresh_name() -> None:
    """An `error` ended without effect, so the same call again is a new call with a new name."""
    names = CallNames()
    names.admitted("call_0", "call_0", TOOL, "h1")
    names.errored("call_0")
    assert names.name_for("call_0", TOOL, "h1", side_effecting=True) == "call_0#2"


def test_admitting_again_clears_an_earlier_error() -> None:
    """A name admitted again after its error replays once more (the error no longer stands)."""
    names = CallNames()
    names.admitted("call_0", "call_0", TOOL, "h1")
    names.errored("call_0")
    names.admitted("call_0", "call_0", TOOL, "h1")
    assert names.name_for("call_0", TOOL, "h1", side_effecting=True) == "call_0"


def test_a_call_waiting_for_a_person_keeps_its_name_for_any_tool() -> None:
    """The same call as one awaiting approval gets its name, read or not: approval releases it."""
    names = CallNames()
    names.waiting("call_0", "call_0", "read_file", "h1")
    assert names.name_for("call_0", "read_file", "h1", side_effecting=False) == "call_0"
    assert names.name_for("call_0", "read_file", "h2", side_effecting=False) == "call_0#2"


def test_admission_ends_the_wait() -> None:
    """Once a waiting read is admitted, the same read again is a new call, not the waiting one."""
    names = CallNames()
    names.waiting("call_0", "call_0", "read_file", "h1")
    names.admitted("call_0", "call_0", "read_file", "h1")
    assert names.name_for("call_0", "read_file", "h1", side_effecting=False) == "call_0#2"


def test_a_fresh_name_skips_the_ids_of_the_batch() -> None:
    """`<id>#n` never takes an id another call of the same batch was sent under."""
    names = CallNames()
    names.admitted("a", "a", TOOL, "h1")
    got = names.name_for("a", TOOL, "h2", side_effecting=True, batch_ids=["a", "a#2", "a#3"])
    assert got == "a#4"


def test_a_fresh_name_skips_names_in_use_in_the_run() -> None:
    """A model id that looks like a rename (`a#2`) and was admitted is never handed out again."""
    names = CallNames()
    names.admitted("a", "a", TOOL, "h1")
    names.admitted("a#2", "a#2", TOOL, "h9")
    assert names.name_for("a", TOOL, "h2", side_effecting=True) == "a#3"


def test_a_rebuilt_run_reads_model_ids_back_from_renamed_names() -> None:
    """Calls found in the ledger (`recorded`) replay as they would in the run that made them."""
    names = CallNames()
    names.recorded("call_0", TOOL, "h1", state="ok")
    names.recorded("call_0#2", TOOL, "h2", state="ok")
    assert names.name_for("call_0", TOOL, "h2", side_effecting=True) == "call_0#2"
    assert names.name_for("call_0", TOOL, "h3", side_effecting=True) == "call_0#3"


def test_a_rebuilt_run_keeps_waiting_and_errored_states() -> None:
    """A recorded `pending` call is still waiting; a recorded `error` call is not replayed."""
    names = CallNames()
    names.recorded("w", "read_file", "h1", state="pending")
    names.recorded("e", TOOL, "h1", state="error")
    assert names.name_for("w", "read_file", "h1", side_effecting=False) == "w"
    assert names.name_for("e", TOOL, "h1", side_effecting=True) == "e#2"


def test_each_run_state_has_a_book_of_its_own() -> None:
    """`RunState` builds a fresh `CallNames` per run: one run's names never leak into another's."""
    authority = Authority(principal="agent")
    first = RunState(id="r1", authority=authority, context_secrets=())
    second = RunState(id="r2", authority=authority, context_secrets=())
    first.names.admitted("call_0", "call_0", TOOL, "h1")
    assert first.names is not second.names
    assert second.names.name_for("call_0", TOOL, "h2", side_effecting=True) == "call_0"
    assert first.pending is not second.pending
    assert first.batch_ids == ()


_IDS = st.sampled_from(["call_0", "call_1", "call_0#2", "call_0#3", "x"])
_OPS = st.lists(
    st.tuples(
        _IDS,
        st.sampled_from(["t1", "t2"]),
        st.sampled_from(["h1", "h2"]),
        st.booleans(),
        st.sampled_from(["admit", "wait", "error", "skip"]),
        st.lists(_IDS, max_size=3),
    ),
    max_size=25,
)


@settings(max_examples=150, deadline=None)
@given(_OPS)
def test_a_name_is_either_new_and_free_or_an_earlier_name_of_the_same_call(
    ops: list[tuple[str, str, str, bool, str, list[str]]],
) -> None:
    """Whatever ids a model sends: an old name only for the same call, else a free new one."""
    names = CallNames()
    book: dict[str, tuple[str, str]] = {}
    for model_id, tool, digest, side, then, batch in ops:
        batch_ids = [model_id, *batch]
        got = names.name_for(model_id, tool, digest, side_effecting=side, batch_ids=batch_ids)
        if got in book:
            assert book[got] == (tool, digest), (model_id, got, book)
        elif got != model_id:
            assert got.startswith(f"{model_id}#"), (got, model_id)
            assert got not in batch_ids, (got, batch_ids)
        if then == "admit":
            names.admitted(model_id, got, tool, digest)
            book[got] = (tool, digest)
        elif then == "wait":
            names.waiting(model_id, got, tool, digest)
            book[got] = (tool, digest)
        elif then == "error" and got in book:
            names.errored(got)
