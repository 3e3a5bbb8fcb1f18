"""The journal's own answer, read before an effect runs or an approval is spent.

The rows (calls, keys, approvals) are an index a writer reads fast, and any of them
can be edited by someone with write access to the database. So a SQL ledger never
lets a row decide alone whether an effect may run or an approval may be spent:
`JournalTruth` folds the journal itself, record by record, checking each record's
hash and its link to the one before it (as ``verify`` does), into the keys and
approvals those records make (`callgate.ledger.journal.apply`). The writer compares
the row it read with this fold and decides by the fold; a row that differs is
recorded (``idempotency.forged``, ``approval.forged``) and restored.

A process folds the whole journal once, at its first side effect or approval, and
then only the records written since (its own as it commits them, other writers'
when it next needs the answer). A journal that does not verify up to its head (an
edited, deleted or inserted record, a moved head) stops every side effect and every
approval of the ledger with a `LedgerError` that says so: the gate never acts on a
journal it cannot read as written.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from callgate.errors import LedgerError
from callgate.ledger.base import GENESIS, AuditRecord, CallRecord, audit_hash
from callgate.ledger.budgets import BudgetBook
from callgate.ledger.journal import RUN_FACT, UNREADABLE, Derived, apply

if TYPE_CHECKING:
    from callgate.ledger.journal import KeyRow

__all__ = ["CHAIN_KEY_ENV", "CHAIN_KEY_FILE_ENV", "JournalTruth", "TruthFold", "resolve_chain_key"]

CHAIN_KEY_ENV = "CALLGATE_CHAIN_KEY"
"""The environment variable holding a keyed journal's key (its text, at least 16 bytes)."""
CHAIN_KEY_FILE_ENV = "CALLGATE_CHAIN_KEY_FILE"
"""The environment variable naming a file that holds the key (read as bytes, stripped)."""
_MIN_KEY = 16


def resolve_chain_key(
    given: bytes | str | None, environ: Mapping[str, str] | None = None
) -> bytes | None:
    """The key a ledger hashes its journal with: ``given``, else the file named by
    ``CALLGATE_CHAIN_KEY_FILE``, else ``CALLGATE_CHAIN_KEY``, else None (SHA-256 alone).

    The key is never written to the ledger: whoever may append records that verify
    must hold it. A key shorter than 16 bytes raises `LedgerError`."""
    env = os.environ if environ is None else environ
    key: bytes | None
    if given is not None:
        key = given.encode() if isinstance(given, str) else bytes(given)
        where = "chain_key"
    elif env.get(CHAIN_KEY_FILE_ENV):
        path = env[CHAIN_KEY_FILE_ENV]
        try:
            with open(path, "rb") as f:
                key = f.read().strip()
        except OSError as exc:
            raise LedgerError(
                f"{CHAIN_KEY_FILE_ENV} names {path!r}, which cannot be read ({exc}); "
                "point it at the file holding the ledger's chain key"
            ) from exc
        where = f"the file {path!r} ({CHAIN_KEY_FILE_ENV})"
    elif env.get(CHAIN_KEY_ENV):
        key = env[CHAIN_KEY_ENV].encode()
        where = CHAIN_KEY_ENV
    else:
        return None
    if len(key) < _MIN_KEY:
        raise LedgerError(
            f"the chain key from {where} is {len(key)} bytes; a keyed journal needs at least "
            f"{_MIN_KEY} (e.g. 32 random bytes: python -c 'import secrets; "
            "print(secrets.token_hex(32))')"
        )
    return key


_READ = ("attempt.", "approval.", "run.", "migrated.", "ledger.")
"""The kinds of record whose data the fold reads."""
_DECISIONS = frozenset({"proposed", "rejected", "pending", "admitted"})
_FETCH = 500
"""Journal records read per statement while catching up."""


class TruthFold(Derived):
    """`Derived` without the call rows: keys and approvals (what is decided by), and each
    run's owner and ``run.*`` records (what a resumed run is rebuilt from)."""

    def __init__(self) -> None:
        super().__init__()
        self.owners: dict[str, str] = {}
        """Run id → who owns it: its ``run.opened`` record, else its first call's principal."""
        self.facts: dict[str, list[AuditRecord]] = {}
        self.budgets = BudgetBook()

    def call(self, run_id: str, call_id: str) -> CallRecord | None:
        return None

    def put_call(self, row: CallRecord, *, status_only: bool = False) -> None:
        self.owners.setdefault(row.run_id, row.principal)

    def fact(self, rec: AuditRecord) -> None:
        """Keep a ``run.*`` record."""
        if rec.kind == "run.opened":
            self.owners.setdefault(rec.run_id, str(rec.data.get("actor")))
        self.facts.setdefault(rec.run_id, []).append(rec)

    def reset(self) -> None:
        super().reset()
        self.owners.clear()
        self.facts.clear()
        self.budgets = BudgetBook()

    def add_orphan(self, run_id: str, call_id: str, seq: int) -> None:
        return None


class JournalTruth:
    """The keys and approvals of a journal, folded from its verified records.

    ``seq`` and ``hash`` are the last record folded; every record up to it linked to
    the one before and matched its hash when it was read."""

    __slots__ = ("chain_key", "hash", "keyed_as_head", "seq", "state")

    def __init__(self, chain_key: bytes | None = None) -> None:
        self.chain_key = chain_key
        self.seq = 0
        self.hash = GENESIS
        self.state = TruthFold()
        self.keyed_as_head = False
        """Whether the journal's last record was found hashed with this key (`check_key`)."""

    def check_key(self, last: AuditRecord | None) -> None:
        """Before this process appends anything: the journal's last record must hash with
        this ledger's key (or with none), so a process given the wrong key (or none, for a
        keyed journal) never chains records that the right key cannot verify."""
        if self.keyed_as_head:
            return
        if last is not None:
            found = audit_hash(
                last.prev_hash,
                last.seq,
                last.at,
                last.kind,
                last.run_id,
                last.call_id,
                last.data_json,
                self.chain_key,
            )
            if found != last.hash:
                given = "this chain key" if self.chain_key else "no chain key"
                raise LedgerError(
                    f"the journal's last record ({last.seq}) does not hash with {given}: the "
                    "ledger is keyed with another key (or none, or was edited), and records "
                    "written now could never verify. Open it with its chain key (chain_key=, "
                    "CALLGATE_CHAIN_KEY_FILE or CALLGATE_CHAIN_KEY), or run 'callgate ledger "
                    "verify'"
                )
        self.keyed_as_head = True

    def reads(self, kind: str, run_id: str) -> bool:
        """Whether folding a record of ``kind`` reads its data (the others are only checked
        against their hash): keys, approvals, budgets, runs, migrations, and a run's first
        decision (its owner)."""
        return kind.startswith(_READ) or (
            kind.startswith("call.") and run_id not in self.state.owners
        )

    def key(self, name: str) -> KeyRow | None:
        """The idempotency key as the journal makes it (None: no record took it)."""
        return self.state.keys.get(name)

    def catch_up(
        self,
        head: tuple[int, str],
        read: Callable[[int, int], Sequence[AuditRecord]],
    ) -> None:
        """Fold every record after the last one folded, up to ``head`` (its number and
        hash, as the journal's head row says); ``read(after, upto)`` reads records in
        order. Raises `LedgerError` at the first record that does not verify."""
        upto, head_hash = head
        if upto < self.seq:
            self._broken(
                upto + 1,
                f"the journal's head says record {upto}, but record {self.seq} was read "
                "before: records at the end were deleted or the head was moved back",
            )
        while self.seq < upto:
            batch = read(self.seq, min(upto, self.seq + _FETCH))
            if not batch:
                self._broken(self.seq + 1, "it is missing (deleted)")
            for rec in batch:
                self.fold(rec)
        if self.hash != head_hash:
            self._broken(
                upto,
                "the journal's head row does not hold the hash of its last record "
                "(the head or the last record was altered)",
            )

    def fold(self, rec: AuditRecord) -> None:
        """Check one record against the last one folded, then fold it."""
        expected = self.seq + 1
        if rec.seq != expected:
            self._broken(expected, "it is missing (deleted)")
        if rec.prev_hash != self.hash:
            self._broken(rec.seq, "it does not link to the record before it")
        text = rec.data_json
        found = audit_hash(
            rec.prev_hash, rec.seq, rec.at, rec.kind, rec.run_id, rec.call_id, text, self.chain_key
        )
        if found != rec.hash:
            self._broken(rec.seq, "its content does not match its hash (edited)")
        self.trusted(rec)

    def trusted(self, rec: AuditRecord) -> None:
        """Fold a record this process wrote itself (its hash is its own)."""
        kind = rec.kind
        if kind.startswith("call."):  # only a run's first decision: its owner
            if rec.run_id not in self.state.owners and kind[5:] in _DECISIONS:
                self.state.owners[rec.run_id] = str(rec.data.get("actor"))
        elif kind.startswith(_READ):
            # A record no ledger writes that still hashes right changes nothing here.
            with contextlib.suppress(*UNREADABLE):
                apply(self.state, rec)
        if kind.startswith(RUN_FACT):
            self.state.fact(rec)
        elif rec.kind == "attempt.started" and rec.call_id is not None:
            charges = rec.data.get("budgets")
            if isinstance(charges, list):
                with contextlib.suppress(*UNREADABLE, IndexError):
                    self.state.budgets.charge(rec.run_id, rec.call_id, charges)
        elif rec.kind == "attempt.error" and rec.call_id is not None:
            self.state.budgets.give_back(rec.run_id, rec.call_id)
        self.seq = rec.seq
        self.hash = rec.hash

    def _broken(self, seq: int, problem: str) -> Any:
        # Start over next time: what was folded on the way here was not proven by the head,
        # and nothing this process writes may be folded onto it unchecked.
        self.seq, self.hash, self.state = 0, GENESIS, TruthFold()
        keyed = " (a keyed journal: is this the ledger's chain key?)" if self.chain_key else ""
        raise LedgerError(
            f"the journal does not verify at record {seq}: {problem}{keyed}. A row alone never "
            "decides, so no side effect runs and no approval is spent on this ledger until it "
            "verifies: run 'callgate ledger verify' and restore the database from a backup"
        )
