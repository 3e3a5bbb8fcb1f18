"""Stage ``schedule``: which admitted calls may run together, and in what order.

The admitted calls of one batch form a graph. Two kinds of edges order them:

* **data edges** (a call needs another's result): an explicit
  ``ToolCall.after``, and proposal order between calls of one tool marked
  ``ordered``. A call whose data dependency did not end ``ok`` is not run: it
  is rejected at this stage, naming the dependency.
* **conflict edges** (the calls must not overlap): from the resources a tool
  declares (``reads="order:{order_id}"``, ``writes="cart:{cart_id}"``),
  expanded on the arguments. Two calls conflict when one writes a resource the
  other reads or writes; reads of one resource commute. A resource containing
  ``*``, ``?`` or ``[`` is a glob pattern (``"cart:*"``; ``"*"`` is everything).
  A tool that declares no resources reads everything when it is read-only and
  writes everything otherwise, so it conflicts with every write (safe default).

Conflicting calls run in proposal order, unless explicit ``after`` edges say
otherwise: conflict and ``ordered`` edges follow the stable topological order
of the ``after`` edges, so they can never close a cycle.

Planning indexes resources by name instead of comparing every pair of calls:
each resource (or pattern) keeps its last writer and the readers since, and a
new call waits only for those. Earlier accesses are covered transitively, so
a batch of n calls on one resource gets O(n) edges, not O(n²).

The runner (`run_batch_async`) starts a call as soon as everything it waits
for has finished, under a global bound and per-tool bounds, in proposal order
among the ready calls, and enforces the batch deadline: calls still waiting at
the deadline are rejected as not started, calls running at the deadline are
cancelled and reported ``unknown``.

The stage in three modules: `plan` (the graph), `batch` (the checks on a whole batch
and the rejections the stage writes) and `run` (the runner).
"""

from __future__ import annotations

from callgate.schedule.batch import (
    BatchRefusal,
    batch_refusals,
    dependency_failed,
    follow_renames,
    reject_dependents,
)
from callgate.schedule.plan import Batch, find_cycle, plan_batch
from callgate.schedule.run import run_batch_async, run_batch_sync

__all__ = [
    "Batch",
    "BatchRefusal",
    "batch_refusals",
    "dependency_failed",
    "find_cycle",
    "follow_renames",
    "plan_batch",
    "reject_dependents",
    "run_batch_async",
    "run_batch_sync",
]
