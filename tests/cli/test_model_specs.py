"""``--model``: one reading of a model spec, the same for every command that takes one.

docs/local-models.md says ``local``, ``local:smollm2`` and ``local:PATH.gguf``, each
optionally ``+none``, ``+gbnf`` or ``+llguidance``, work wherever ``--model`` is
taken. ``callgate lab run`` had its own reading and took ``smollm2`` for a file path
("no GGUF model file at smollm2"). Without the real model installed, the refusal
must be about what is missing (the ``llama_cpp`` extra), never about the spec.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from callgate.cli import app
from callgate.errors import DefinitionError
from callgate.llms import parse_local_spec

PREREG = Path(__file__).parents[2] / "examples" / "lab" / "prereg.toml"
LOCAL_SPECS = ["local", "local:smollm2", "local:smollm2+none", "local+gbnf", "local:smollm2+gbnf"]


@pytest.fixture
def no_llama_cpp(monkeypatch: pytest.MonkeyPatch) -> None:
    """llama-cpp-python as if not installed (None in sys.modules makes its import fail)."""
    monkeypatch.setitem(sys.modules, "llama_cpp", None)


@pytest.mark.parametrize("spec", LOCAL_SPECS)
def test_lab_run_reads_a_local_spec_as_run_does(
    spec: str, tmp_path: Path, no_llama_cpp: None
) -> None:
    """``callgate lab run --model local:smollm2[+none]`` is refused for the missing llama_cpp
    extra, with the install line, and starts nothing (no ledger is created)."""
    db = tmp_path / "lab.db"
    result = CliRunner().invoke(
        app,
        ["lab", "run", "--model", spec, "--prereg", str(PREREG), "--tasks", "repo:1",
         "--db", str(db), "--out", str(tmp_path / "out")],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "no GGUF model file" not in result.output
    assert "pip install 'callgate[llama_cpp]'" in result.output
    assert not db.exists()


@pytest.mark.parametrize("spec", LOCAL_SPECS)
def test_run_start_reads_a_local_spec_the_same_way(
    spec: str, tmp_path: Path, no_llama_cpp: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``callgate run start --model`` gives the same refusal for the same spec."""
    (tmp_path / "spec_tools.py").write_text(
        "from callgate import Registry\nregistry = Registry()\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    result = CliRunner().invoke(
        app,
        ["run", "start", "spec_tools:registry", "--model", spec, "--message", "hi",
         "--db", str(tmp_path / "run.db")],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "no GGUF model file" not in result.output
    assert "pip install 'callgate[llama_cpp]'" in result.output


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("local", (None, None)),
        ("local:smollm2", (None, None)),
        ("local+none", (None, "none")),
        ("local:smollm2+none", (None, "none")),
        ("local:smollm2+gbnf", (None, "gbnf")),
        ("local:/m/qwen.gguf", ("/m/qwen.gguf", None)),
        ("local:/m/qwen.gguf+llguidance", ("/m/qwen.gguf", "llguidance")),
        ("local:/m/a+b.gguf", ("/m/a+b.gguf", None)),
        ("local:C:/m/qwen.gguf+none", ("C:/m/qwen.gguf", "none")),
    ],
)
def test_a_local_spec_names_a_file_or_the_shipped_model_and_a_constraint(
    spec: str, expected: tuple[str | None, str | None]
) -> None:
    """``parse_local_spec``: the path (None for the shipped SmolLM2) and the constraint
    (None when the spec gives none, so a command's own default applies)."""
    assert parse_local_spec(spec) == expected


@pytest.mark.parametrize(
    "spec", ["local:smollm2+regex", "local+", "local:", "localx", "local:+none"]
)
def test_a_bad_local_spec_is_refused_with_the_forms(spec: str) -> None:
    """An unknown constraint, an empty path or constraint, or another kind is refused, naming
    what is accepted."""
    with pytest.raises(DefinitionError, match="local"):
        parse_local_spec(spec)


def test_lab_constrain_option_and_the_spec_must_agree(tmp_path: Path, no_llama_cpp: None) -> None:
    """``--constrain`` is the default for a spec without ``+``; a spec that says otherwise is
    bad usage, not a silent choice of one."""
    result = CliRunner().invoke(
        app,
        ["lab", "run", "--model", "local:smollm2+none", "--constrain", "gbnf",
         "--prereg", str(PREREG), "--tasks", "repo:1", "--db", str(tmp_path / "l.db"),
         "--out", str(tmp_path / "out")],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "--constrain" in result.output
