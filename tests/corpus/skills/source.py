"""The public anthropics/skills folders whose licence is Apache-2.0, through `load_skills`.

``skills.tar.gz`` holds the folders (see SOURCE.md for which and why). The run unpacks
them into a temporary folder and loads them all with the default `SkillLimits`: each
refusal is counted by the limit or rule that refused it, and the rest must load. Then:
the export and generated-call checks on the two skill tools; every loaded skill's
instructions and every one of its files read through a real gate (the handlers only
serve bytes held in memory); and one more load with ``description_chars`` raised, which
must take every folder (the only refusal expected at the defaults is a description
longer than the Agent Skills limit of 1,024 characters).
"""

from __future__ import annotations

import tarfile
import tempfile
from pathlib import Path

from callgate import Authority, DefinitionError, Gate, MemoryLedger, Registry, Status, ToolCall
from callgate.skills import SkillLimits, SkillSet, load_skills

from .._checks import check_registry, crash_text, refusal_reason, timed
from .._report import SourceReport

DATA = Path(__file__).with_name("skills.tar.gz")
SAMPLE = ("brand-guidelines", "claude-api", "mcp-builder", "theme-factory")
"""The folders the fast sample takes: one refused at the defaults, one with a PDF."""
RAISED = SkillLimits(description_chars=2048)


def _folders(root: Path, full: bool) -> list[Path]:
    with tarfile.open(DATA) as tar:
        tar.extractall(root, filter="data")
    folders = sorted(p for p in (root / "skills").iterdir() if p.is_dir())
    return folders if full else [f for f in folders if f.name in SAMPLE]


def _read_everything(skills: SkillSet, report: SourceReport) -> None:
    """Every skill's instructions and every file, read through a gate: each must be ok."""
    gate = Gate(Registry(skills.tools), ledger=MemoryLedger())
    run = gate.run(authority=Authority(principal="corpus", grants=["read:skill:*"]))
    calls = []
    for name, skill in skills.skills.items():
        calls.append(ToolCall(id=f"r-{name}", name="read_skill", arguments={"name": name}))
        calls += [
            ToolCall(
                id=f"f-{name}-{i}", name="read_skill_file", arguments={"name": name, "path": path}
            )
            for i, path in enumerate(skill.files)
        ]
    for start in range(0, len(calls), 50):
        batch = calls[start : start + 50]
        for call, obs in zip(batch, run.submit(batch), strict=True):
            if obs.status is not Status.OK:
                report.checks_failed.append(
                    f"{call.name}({call.arguments}) ended {obs.status.value}: {obs.content[:200]}"
                )
            else:
                report.checked["reads ok"] += 1


def run(full: bool) -> SourceReport:
    """Load the folders, count refusals by reason, check the tools and read every file."""
    report = SourceReport(source="anthropics-skills")
    with timed(report), tempfile.TemporaryDirectory() as scratch:
        folders = _folders(Path(scratch), full)
        report.definitions = len(folders)
        try:
            skills = load_skills(folders)
        except DefinitionError as exc:  # every folder refused: counted, then nothing to check
            report.refused[refusal_reason(exc)] += len(folders)
            return report
        except Exception as exc:
            report.crashes.append(f"load_skills: {crash_text(exc)}")
            return report
        report.imported = len(skills.skills)
        for refusal in skills.refused:
            reason = f"over SkillLimits.{refusal.limit}" if refusal.limit else refusal.reason
            report.refused[reason.replace(str(refusal.folder), "<folder>")[:120]] += 1
        check_registry(Registry(skills.tools), report)
        _read_everything(skills, report)
        try:
            raised = load_skills(folders, limits=RAISED)
        except Exception as exc:
            report.crashes.append(f"load_skills(limits=raised): {crash_text(exc)}")
            return report
        for refusal in raised.refused:
            report.checks_failed.append(f"refused even with {RAISED}: {refusal.reason}")
    return report
