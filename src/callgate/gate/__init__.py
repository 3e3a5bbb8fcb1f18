"""The gate layer: the stages wired together, one module per job.

- `gate`: `Gate` and `Run`, the batch flow of ``submit`` and ``asubmit``;
- `admission`: one call through the per-call stages and the records of each decision;
- `resume`: a run rebuilt from the ledger (`Gate.resume_run`);
- `recovery`: calls left ``running`` by a crash, settled (`Gate.recover`);
- `call_names`: the names a run records its calls under;
- `run_state`: a run's state and the gate's configuration as the stages read it.

``from callgate.gate import Gate, Run, running_run`` is the public path.
"""

from __future__ import annotations

from callgate.gate.gate import Gate, Run, running_run

# The public path, not the module that happens to define them.
Gate.__module__ = Run.__module__ = running_run.__module__ = __name__

__all__ = ["Gate", "Run", "running_run"]
