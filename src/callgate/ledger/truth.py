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
from callgate.ledger.chains import (
    CHECKPOINT,
    ROOT_CHAIN,
    anchor_of,
    anchor_problem,
    chain_of,
    checkpoint_heads,
)
from callgate.ledger.journal import RUN_FACT, UNREADABLE, Derived, change, start
from callgate.ledger.record_data import AttemptStarted, Decision, RunOpened, charges, read
from callgate.ledger.records import DECISIONS

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


_READ = ("attempt.", "approval.", "run.", "migrated.", "ledger.", "journal.")
"""The kinds of record whose data the fold reads."""
_DECISIONS = DECISIONS


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
            self.owners.setdefault(rec.run_id, RunOpened.decode(rec.data).actor)
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

    ``heads`` holds, for each chain (`callgate.ledger.chains`), the last record folded:
    every record up to it linked to the one before it in its chain and matched its hash
    when it was read. ``mark`` is where the next read starts (a backend's own measure:
    the last number read on SQLite; on PostgreSQL the last read's snapshot: its xmax, the
    transaction ids it saw still running, and this transaction's own id, so that the next
    read asks for the records of those transactions and of every one begun since)."""

    __slots__ = (
        "_anchors",
        "_later",
        "_seen",
        "bound",
        "chain_key",
        "dense",
        "heads",
        "keyed_as_head",
        "mark",
        "moved",
        "roots",
        "state",
        "top",
    )

    def __init__(self, chain_key: bytes | None = None) -> None:
        self.chain_key = chain_key
        self.heads: dict[str, tuple[int, str]] = {}
        self.mark: int | None = None
        """None until the first read (which reads the whole journal)."""
        self.state = TruthFold()
        self.keyed_as_head = False
        """Whether the journal's last record was found hashed with this key (`check_key`)."""
        self._seen: dict[int, tuple[str, str]] | None = None
        self.dense = False
        """Whether records are numbered without gaps (SQLite: one writer at a time, each
        drawing the number after the last): a gap is then a deleted record."""
        self.top = 0
        """The highest record number folded."""
        self.bound: dict[str, int] = {}
        """Each chain's highest record a checkpoint folded binds."""
        self.moved: set[str] = set()
        """The chains (not the root) with a record folded past what any checkpoint binds:
        what the next checkpoint binds (`unbound`). Derived from the hashed checkpoints,
        never from a row a writer could flip."""
        self.roots: dict[int, str] = {}
        """The records of the root chain folded (seq → hash): what records anchor to."""
        self._anchors: list[tuple[int, int, str]] = []
        """Anchors of the records of this read (record, root seq, root hash): checked once
        the read is folded (the root record committed before, so the read has it)."""
        self._later: list[tuple[int, str, int, str]] = []
        """Bindings of checkpoints folded before the record they bind (checkpoint, chain,
        seq, hash): checked once the read that brought the checkpoint is folded."""

    @property
    def seq(self) -> int:
        """The highest record number folded."""
        return self.top

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

    def unbound(self, below: int | None = None) -> list[tuple[str, int, str]]:
        """The heads (chain, seq, hash) of the chains that moved past their last binding,
        those numbered below ``below`` (a checkpoint's own number) only."""
        found = []
        for chain in sorted(self.moved):
            seq, h = self.heads[chain]
            if below is None or seq < below:
                found.append((chain, seq, h))
        return found

    def reads(self, kind: str, run_id: str) -> bool:
        """Whether folding a record of ``kind`` reads its data (the others are only checked
        against their hash): keys, approvals, budgets, runs, migrations, checkpoints, and a
        run's first decision (its owner)."""
        return kind.startswith(_READ) or (
            kind.startswith("call.") and run_id not in self.state.owners
        )

    def folded(self, seq: int, chain: str | None, run_id: str) -> bool:
        """Whether record ``seq`` (of ``chain``, or of ``run_id``'s chain) is folded already
        (read again: a reader may see a record twice)."""
        head = self.heads.get(chain or "r:" + run_id)
        return head is not None and seq <= head[0]

    def follows(self, records: Sequence[AuditRecord]) -> bool:
        """Whether ``records`` (a transaction's own, not committed yet) directly follow what
        the fold has: numbered from the next number without gaps on a backend that numbers
        so (`dense`: SQLite, one writer at a time), each linking to its chain's head as the
        fold has it. Then no other record can have been written before them, and once
        committed they may be folded as this process's own (`trusted`) without reading the
        journal again, as a transaction that read it first does. Each must also anchor to a
        root record the fold has (as a read checks, `catch_up`): a root head row moved under
        the writer makes its records anchor elsewhere, and the next read refuses them."""
        if not self.dense or self.mark is None or not records:
            return False
        expected = self.top + 1
        heads: dict[str, str] = {}
        roots = self.roots
        for rec in records:
            chain = chain_of(rec)
            prev = heads.get(chain)
            if prev is None:
                prev = self.heads.get(chain, (0, GENESIS))[1]
            if rec.seq != expected or rec.prev_hash != prev:
                return False
            try:
                anchor = anchor_of(rec.data_json)
            except ValueError:
                return False
            if anchor is not None and anchor[0] > 0 and roots.get(anchor[0]) != anchor[1]:
                return False
            heads[chain] = rec.hash
            expected += 1
        return True

    def key(self, name: str) -> KeyRow | None:
        """The idempotency key as the journal makes it (None: no record took it)."""
        return self.state.keys.get(name)

    def catch_up(
        self,
        read: Callable[[int | None], tuple[Sequence[AuditRecord], int | None]],
        chain_rows: Callable[[], Sequence[tuple[str, int, str]]],
    ) -> None:
        """Fold every record committed since the last read. ``read(mark)`` returns the
        records written since ``mark`` (None: all of them), in order, and the next mark;
        ``chain_rows()`` the head rows, read (on the first read) before the records, so
        that every head row names a record the fold has. Raises `LedgerError` at the first
        record that does not verify."""
        first = self.mark is None
        rows = chain_rows() if first else ()
        if first:
            self._seen = {}
        self._later = []
        self._anchors = []
        try:
            records, mark = read(self.mark)
            for rec in records:
                self.fold(rec)
            later, self._later = self._later, []
            for checkpoint, chain, seq, h in later:
                self._check_bound(checkpoint, chain, seq, h)
            anchors, self._anchors = self._anchors, []
            for seq, root, h in anchors:
                if self.roots.get(root) != h:
                    self._broken(seq, anchor_problem(seq, root).partition(": ")[2])
            if first:
                self._check_rows(rows)
        finally:
            self._seen = None
            self._later = []
            self._anchors = []
        if mark is not None:
            self.mark = mark
        elif first:
            self.mark = 0

    def _check_rows(self, rows: Sequence[tuple[str, int, str]]) -> None:
        """Every head row names a record the fold has (a deleted end of a chain, or a whole
        chain, is not silently read as a shorter one)."""
        seen = self._seen
        assert seen is not None
        for chain, seq, h in rows:
            if seq <= 0:
                continue  # a chain a writer opened but wrote nothing to yet
            have = self.heads.get(chain)
            if have is None or have[0] < seq or seen.get(seq, (chain, h)) != (chain, h):
                self._broken(
                    seq,
                    f"the head row of chain {chain!r} names it, but the journal does not have "
                    "it: records at the end of the chain were deleted or the head was altered",
                )

    def check_head(self, chain: str, row: tuple[int, str]) -> None:
        """A chain this transaction locked: its head row (``row``) must be the last record
        the fold has of it (nobody else can write it, so any difference is an edit)."""
        have = self.heads.get(chain, (0, GENESIS))
        if row[0] <= 0:
            if have[0] > 0:
                self._broken(
                    have[0] + 1,
                    f"chain {chain!r} has records up to {have[0]} but its head row was "
                    "deleted or reset",
                )
            return
        if have != row:
            self._broken(
                min(have[0], row[0]) + 1,
                f"the head row of chain {chain!r} says record {row[0]}, the journal ends it "
                f"at record {have[0]}: records at the end were deleted or the head was moved",
            )

    def check_anchor(self, anchor: tuple[int, str] | None) -> None:
        """The root chain's head row a transaction read (what its records anchor to) must
        name a root record the fold has, with its hash. On PostgreSQL a root record the
        fold has not read yet may have committed after the read (the next read checks it);
        on SQLite, one writer at a time, the fold has every record, so one it lacks was
        never written."""
        if anchor is None or anchor[0] <= 0:
            return
        have = self.roots.get(anchor[0])
        if have == anchor[1] or (have is None and not self.dense):
            return
        self._broken(
            anchor[0],
            f"the head row of the chain of records of no run names it with hash "
            f"{anchor[1][:16]!r}..., the journal {'has another' if have else 'has no such record'}"
            ": the head row was altered (e.g. to hide deleted checkpoints)",
        )

    def fold(self, rec: AuditRecord) -> None:
        """Check one record against the last one folded of its chain, then fold it (a
        record folded already, read again, is skipped)."""
        chain = chain_of(rec)
        before = self.heads.get(chain, (0, GENESIS))
        if rec.seq <= before[0]:
            return
        if self.dense and rec.seq != self.top + 1:
            self._broken(
                self.top + 1,
                f"the next record is numbered {rec.seq}: {rec.seq - self.top - 1} record(s) "
                "before it are missing (this backend numbers records without gaps, so they "
                "were deleted)",
            )
        if rec.prev_hash != before[1]:
            self._broken(
                rec.seq,
                "it does not link to the record before it in its chain (a record was "
                "deleted or inserted)",
            )
        text = rec.data_json
        found = audit_hash(
            rec.prev_hash, rec.seq, rec.at, rec.kind, rec.run_id, rec.call_id, text, self.chain_key
        )
        if found != rec.hash:
            self._broken(rec.seq, "its content does not match its hash (edited)")
        try:
            anchor = anchor_of(text)
        except ValueError as exc:
            self._broken(rec.seq, str(exc))
        if anchor is not None and anchor[0] > 0:
            self._anchors.append((rec.seq, anchor[0], anchor[1]))
        if rec.kind == CHECKPOINT and chain == ROOT_CHAIN:
            self._check_checkpoint(rec)
        if self._seen is not None:
            self._seen[rec.seq] = (chain, rec.hash)
        self.trusted(rec)

    def _check_checkpoint(self, rec: AuditRecord) -> None:
        """Check the heads a checkpoint binds. On PostgreSQL a checkpoint may bind a record
        numbered after it (committed before it by a writer that drew its number first):
        the fold, reading by number, has not met that record yet, so its check waits for
        the end of the read (which has it: it committed before the checkpoint)."""
        try:
            bound = checkpoint_heads(rec)
        except (TypeError, ValueError, OverflowError):
            self._broken(rec.seq, "an unreadable checkpoint")
        for chain, seq, h in bound:
            have = self.heads.get(chain)
            if seq > rec.seq and (have is None or have[0] < seq):
                self._later.append((rec.seq, chain, seq, h))
            else:
                self._check_bound(rec.seq, chain, seq, h)

    def _check_bound(self, checkpoint: int, chain: str, seq: int, h: str) -> None:
        """Checkpoint ``checkpoint`` binds record ``seq`` (hash ``h``) to ``chain``: the fold
        must have that record there (or, past a first read, a later one of the chain)."""
        if self._seen is not None and seq in self._seen:
            ok = self._seen[seq] == (chain, h)
        else:
            have = self.heads.get(chain)
            ok = have is not None and (have[0] > seq or have == (seq, h))
        if not ok:
            self._broken(
                seq,
                f"checkpoint {checkpoint} binds it to chain {chain!r}, but the journal does "
                "not have it there: the record (or its whole run) was deleted or rewritten",
            )

    def trusted(self, rec: AuditRecord) -> bool:
        """Fold a record this process wrote itself (its hash is its own). A record that
        does not link to the last record the fold has of its chain is not folded (another
        writer's records came between, which the fold has not read): the fold starts over
        at the next read, which reads them all (returns False)."""
        chain = chain_of(rec)
        if rec.prev_hash != self.heads.get(chain, (0, GENESIS))[1]:
            self.forget()
            return False
        kind = rec.kind
        if kind.startswith("call."):  # only a run's first decision: its owner
            if rec.run_id not in self.state.owners and kind[5:] in _DECISIONS:
                decided = read(Decision, rec.data)
                self.state.owners[rec.run_id] = (
                    decided.actor if decided is not None else str(rec.data.get("actor"))
                )
        elif kind == "attempt.started" and rec.call_id is not None:
            self._started(rec)
        elif kind.startswith(_READ):
            try:  # noqa: SIM105 (a try costs less than `contextlib.suppress`: a hot path)
                change(self.state, rec)  # (no call rows here: nothing to `link`)
            except UNREADABLE:
                pass  # A record no ledger writes that still hashes right changes nothing here.
        if kind.startswith(RUN_FACT):
            self.state.fact(rec)
        elif kind == "attempt.error" and rec.call_id is not None:
            self.state.budgets.give_back(rec.run_id, rec.call_id)
        self.heads[chain] = (rec.seq, rec.hash)
        if rec.seq > self.top:
            self.top = rec.seq
        if chain != ROOT_CHAIN:
            if rec.seq > self.bound.get(chain, 0):
                self.moved.add(chain)
            return True
        self.roots[rec.seq] = rec.hash
        if kind == CHECKPOINT:
            with contextlib.suppress(TypeError, ValueError, OverflowError):
                for bound_chain, seq, _ in checkpoint_heads(rec):
                    if seq > self.bound.get(bound_chain, 0):
                        self.bound[bound_chain] = seq
                    head = self.heads.get(bound_chain)
                    if head is not None and head[0] <= seq:
                        self.moved.discard(bound_chain)
        return True

    def _started(self, rec: AuditRecord) -> None:
        """Fold an ``attempt.started`` record, decoded once: the key it takes, and what it
        spends of each budget (read on its own: a start whose other data cannot be read
        still spends; `verify` reports it)."""
        assert rec.call_id is not None
        data = rec.data
        started = read(AttemptStarted, data)
        if started is None:
            try:
                started = AttemptStarted.decode(data, rec.at)
            except UNREADABLE:
                spent = charges(data.get("budgets")) if isinstance(data, Mapping) else ()
                if spent:
                    self.state.budgets.charge(rec.run_id, rec.call_id, spent)
                return
        with contextlib.suppress(*UNREADABLE):
            start(self.state, rec, started)
        if started.budgets:
            self.state.budgets.charge(rec.run_id, rec.call_id, started.budgets)

    def forget(self) -> None:
        """Start over: the next read folds the whole journal again."""
        self.heads, self.mark, self.state = {}, None, TruthFold()
        self.bound, self.moved, self.top, self.roots = {}, set(), 0, {}

    def _broken(self, seq: int, problem: str) -> Any:
        # Start over next time: what was folded on the way here was not proven by the head,
        # and nothing this process writes may be folded onto it unchecked.
        self.forget()
        keyed = " (a keyed journal: is this the ledger's chain key?)" if self.chain_key else ""
        raise LedgerError(
            f"the journal does not verify at record {seq}: {problem}{keyed}. A row alone never "
            "decides, so no side effect runs and no approval is spent on this ledger until it "
            "verifies: run 'callgate ledger verify' and restore the database from a backup"
        )
