"""A run is the same run everywhere (issue 28, item 4): a resumed run in another process
refuses (asks about) what the original would have asked about.

Process A starts a run with an intent, reads an injected page (through a tool, or put into
the prompt with `Run.untrusted`), and the model's ``delete_all_files`` waits for a person.
Process B, a separate Python process on the same SQLite file, resumes the run with
``Gate.resume_run(run_id, authority=...)`` alone and the model sends the call again: it
must wait too (before the fix it ran at once: the intent was not stored, and exposure
added with ``run.untrusted`` was not restored). The effect is counted in a file.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

WORKER = Path(__file__).with_name("resume_worker.py")


def worker(command: str, db: Path, run_id: str, deleted: Path) -> dict[str, str]:
    done = subprocess.run(
        [
            sys.executable,
            str(WORKER),
            command,
            "--db",
            str(db),
            "--run",
            run_id,
            "--deleted",
            str(deleted),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, str] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.integration
@pytest.mark.parametrize("how", ["start", "untrusted"])
def test_a_resumed_run_in_another_process_asks_what_the_original_asked(
    tmp_path: Path, how: str
) -> None:
    """The intent and the exposure come back from the journal: the deletion waits in B."""
    db, deleted = tmp_path / "ledger.db", tmp_path / "deleted.txt"
    first = worker(how, db, "run-a", deleted)
    assert first == {"status": "pending", "stage": "approve"}
    second = worker("resume", db, "run-a", deleted)
    assert second == {"status": "pending", "stage": "approve"}
    assert not deleted.exists()


@pytest.mark.integration
def test_a_resume_that_passes_a_wider_intent_can_only_narrow(tmp_path: Path) -> None:
    """An intent given to resume_run adds to the recorded one: ``tools=["*"]`` does not let
    the deletion through."""
    db, deleted = tmp_path / "ledger.db", tmp_path / "deleted.txt"
    assert worker("start", db, "run-a", deleted)["status"] == "pending"
    assert worker("widen", db, "run-a", deleted) == {"status": "pending", "stage": "approve"}
    assert not deleted.exists()
