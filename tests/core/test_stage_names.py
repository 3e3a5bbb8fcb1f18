"""The `Stage` values are the stage names of the docs, and a ledger written under the old
values (``schema``, ``semantic``, ``policy``, ``approval``) still reads.

The old ledger is the released schema-2 fixture (tests/ledger/data/ledger_v2.sqlite, whose
calls were rejected at ``schema`` and ``policy`` and wait at ``approval``), migrated by the
``callgate ledger migrate`` command as a user would.
"""

from __future__ import annotations

import re
import shutil
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from callgate.calls import Stage
from callgate.cli import app
from callgate.console.views import funnel
from callgate.ledger import SQLiteLedger

DATA = Path(__file__).parents[1] / "ledger" / "data"
ROOT = Path(__file__).parents[2]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("schema", Stage.VALIDATE),
        ("semantic", Stage.VALIDATE),
        ("policy", Stage.AUTHORIZE),
        ("approval", Stage.APPROVE),
    ],
)
def test_an_old_stage_value_reads_as_the_stage_it_now_is(old: str, new: Stage) -> None:
    """``Stage(old)`` of a value an older callgate recorded is the renamed stage."""
    assert Stage(old) is new


def test_a_value_that_was_never_a_stage_is_still_refused() -> None:
    """The old values are read; anything else is not a stage, as before."""
    with pytest.raises(ValueError, match="'approved' is not a valid Stage"):
        Stage("approved")


def test_the_stage_values_are_the_stages_the_readme_lists() -> None:
    """Every stage value up to ``execute`` is named, in order, in the README's list of stages."""
    readme = (ROOT / "README.md").read_text()
    listed = re.search(r"same stages \(([^)]*)\)", readme.replace("\n", " "))
    assert listed is not None
    names = [n.strip() for n in re.split(r",|\band\b", listed.group(1)) if n.strip()]
    assert [s.value for s in Stage][: len(names)] == names


def test_a_ledger_written_with_the_old_stage_values_still_reads(tmp_path: Path) -> None:
    """The released schema-2 ledger, migrated: every call's recorded stage reads as a `Stage`,
    the old names as the stages they are now, and the console's funnel counts them there."""
    path = tmp_path / "ledger_v2.sqlite"
    shutil.copyfile(DATA / "ledger_v2.sqlite", path)
    result = CliRunner().invoke(app, ["ledger", "migrate", "--db", str(path)])
    assert result.exit_code == 0, result.output
    with SQLiteLedger(str(path), read_only=True) as ledger:
        calls = ledger.calls()
    recorded = Counter(c.stage for c in calls)
    assert {"schema", "policy", "approval"} <= set(recorded), recorded
    read = Counter(Stage(c.stage) for c in calls)
    assert read[Stage.VALIDATE] == recorded["schema"] + recorded["semantic"]
    assert read[Stage.AUTHORIZE] == recorded["policy"]
    assert read[Stage.APPROVE] == recorded["approval"]
    lost = {step.label: step.lost for step in funnel(calls).steps}
    rejected = Counter(Stage(c.stage) for c in calls if c.state.value == "rejected")
    assert lost["valid"] == rejected[Stage.VALIDATE] > 0
    assert lost["authorized"] == rejected[Stage.AUTHORIZE] > 0
