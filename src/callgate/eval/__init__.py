"""Evaluation from the record: the stage funnel, interface inefficiency η, the surface lab.

* task sets with deterministic verifiers (`Task`, `repo_tasks`: 56 repository-editing
  tasks over generated repositories) and a BFCL-style checker (`check_calls`);
* the funnel P(A)·P(B|A)·P(C|A,B)·P(D|A,B,C) from ledger records and the
  verifier's verdict (`read_runs`, `funnel`);
* token accounting and η (`run_tokens`, `entropy_by_surface`, `eta`, `Tokenizer`);
* the surfaces (`get_surface`, `register_surface`) and the lab (`run_lab`,
  `Prereg`, `analyse`, `write_report`), with scripted policies (`POLICIES`)
  whose planted effects the statistics are tested against.

Needs numpy, scipy and matplotlib (``pip install 'callgate[eval]'``). See docs/evaluation.md.
"""

from callgate.eval.analysis import Analysis, Prereg, analyse
from callgate.eval.checker import CallCheck, check_calls, normalize
from callgate.eval.funnel import Funnel, FunnelRow, funnel, funnel_png
from callgate.eval.grammar_decision import GRADE_EVENT
from callgate.eval.lab import LAB_SYSTEM, LabRun, run_lab
from callgate.eval.policies import POLICIES, Policy, PolicyModel, policy_named
from callgate.eval.record import CallView, RunView, read_runs
from callgate.eval.repo_tasks import load_tasks, repo_tasks
from callgate.eval.report import write_report
from callgate.eval.stats import (
    Estimate,
    bootstrap,
    holm,
    interaction,
    paired_bootstrap,
    paired_power,
    pairs_for_power,
    ratio_bootstrap,
    wilson,
)
from callgate.eval.surfaces import GRANTS, Surface, get_surface, register_surface
from callgate.eval.tasks import ExpectedCall, Operation, Task, Verdict, materialize, verify
from callgate.eval.tokens import (
    ETA_CAVEATS,
    ETA_ESTIMATOR,
    RegexTokenizer,
    RunTokens,
    Tokenizer,
    entropy_by_surface,
    eta,
    run_tokens,
    tokenizer_from,
)

__all__ = [
    "ETA_CAVEATS",
    "ETA_ESTIMATOR",
    "GRADE_EVENT",
    "GRANTS",
    "LAB_SYSTEM",
    "POLICIES",
    "Analysis",
    "CallCheck",
    "CallView",
    "Estimate",
    "ExpectedCall",
    "Funnel",
    "FunnelRow",
    "LabRun",
    "Operation",
    "Policy",
    "PolicyModel",
    "Prereg",
    "RegexTokenizer",
    "RunTokens",
    "RunView",
    "Surface",
    "Task",
    "Tokenizer",
    "Verdict",
    "analyse",
    "bootstrap",
    "check_calls",
    "entropy_by_surface",
    "eta",
    "funnel",
    "funnel_png",
    "get_surface",
    "holm",
    "interaction",
    "load_tasks",
    "materialize",
    "normalize",
    "paired_bootstrap",
    "paired_power",
    "pairs_for_power",
    "policy_named",
    "ratio_bootstrap",
    "read_runs",
    "register_surface",
    "repo_tasks",
    "run_lab",
    "run_tokens",
    "tokenizer_from",
    "verify",
    "wilson",
    "write_report",
]
